"""``tc.yours()``: the learner's parts, read from their notebooks, composed into one model."""

from __future__ import annotations

import pytest
import torch

import tfcourse as tc
from tfcourse.authoring.build import make_learner, solve
from tfcourse.course import notebook_format
from tfcourse.language import speaking
from tfcourse.yours import PARTS, yours

from helpers import ROOT

SOLUTIONS = ROOT / "solutions"
NOTEBOOKS = sorted({part.notebook for part in PARTS})
SMALL = tc.GPTConfig(vocab_size=40, max_seq_len=16, n_layers=2, n_heads=4, d_model=32)
MODERN = SMALL.replace(norm="rmsnorm", mlp="swiglu", bias=False, positional="rope", n_kv_heads=2)


def _learner(name: str, *, solved: bool = True):
    solution = notebook_format.read_notebook(SOLUTIONS / f"{name}.ipynb")
    learner = make_learner(solution, name)
    return solve(learner, solution) if solved else learner


def _folder(tmp_path, *, skip=(), edits=None, unsolved=()):
    """A learner's folder: every notebook of ``PARTS`` solved, except those in ``skip``
    (absent) and ``unsolved`` (stubs); ``edits`` maps (notebook, exercise) to (old, new)."""
    for name in NOTEBOOKS:
        if name in skip:
            continue
        nb = _learner(name, solved=name not in unsolved)
        for (notebook, exercise), (old, new) in (edits or {}).items():
            if notebook != name:
                continue
            cell = next(
                c
                for c in nb.cells
                if notebook_format.exercise_name(c) == exercise and notebook_format.is_exercise(c)
            )
            assert old in cell.source, (exercise, old)
            cell.source = cell.source.replace(old, new)
        notebook_format.write_notebook(nb, tmp_path / f"{name}.ipynb")
    return tmp_path


def _whose(parts) -> dict[str, str]:
    return {name: whose for name, _, whose, _ in parts.rows()}


def test_solved_notebooks_compose_into_the_learners_own_gpt(tmp_path):
    """Every part is the learner's, their attention sits inside their block inside their GPT,
    and the model computes what tc.GPT computes with the same weights."""
    parts = yours(_folder(tmp_path), solutions_dir=SOLUTIONS)
    assert set(_whose(parts).values()) == {"yours"}, str(parts)
    assert "23 of 23 parts are yours" in str(parts)

    for config in (SMALL.replace(activation="gelu"), MODERN):
        model = parts.gpt(config).eval()
        block = model.blocks[0]
        # LLaMA's block is the learner's LlamaBlock (10); any other, their TransformerBlock (05).
        block_cls = parts.LlamaBlock if config is MODERN else parts.TransformerBlock
        assert type(model) is parts.GPT and type(block) is block_cls
        attention = parts.RotaryAttention if config is MODERN else parts.MultiHeadAttention
        assert type(block.attn) is attention
        norm, mlp = (
            (parts.LayerNorm, parts.FeedForward)
            if config is not MODERN
            else (parts.RMSNorm, parts.SwiGLU)
        )
        assert type(block.norm1) is norm and type(model.final_norm) is norm
        assert type(block.mlp) is mlp
        assert all(used.yours for used in parts.used), parts.slots()

        reference = tc.GPT(config).eval()
        model.load_state_dict(reference.state_dict(), strict=True)
        idx = torch.randint(config.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            torch.testing.assert_close(model(idx), reference(idx), rtol=0, atol=1e-5)

    # The learner's loop asks for the learner's schedule.
    assert parts.train_loop.__globals__["training"].lr_at is parts.lr_at


def test_a_slot_no_exercise_can_fill_gets_the_reference_and_says_why(tmp_path):
    parts = yours(_folder(tmp_path), solutions_dir=SOLUTIONS)
    model = parts.gpt(SMALL)  # GPT-2's tanh GELU: the learner's FeedForward has the exact one
    assert type(model.blocks[0].mlp) is tc.FeedForward
    (mlp,) = [row for row in parts.slots() if row[0] == "MLP"]
    assert mlp[2] == "reference" and "activation='gelu_tanh'" in mlp[3]
    assert type(model.blocks[0].attn) is parts.MultiHeadAttention  # the rest stays theirs


def test_a_modern_block_llama_cannot_express_is_the_learners_transformer_block(tmp_path):
    """LlamaBlock has no biases and no post-norm: such a config gets the learner's
    TransformerBlock, its slots still filled with their RMSNorm, RotaryAttention and SwiGLU."""
    parts = yours(_folder(tmp_path), solutions_dir=SOLUTIONS)
    for config in (MODERN.replace(bias=True), MODERN.replace(pre_ln=False)):
        block = parts.gpt(config).blocks[0]
        assert type(block) is parts.TransformerBlock, config
        assert type(block.attn) is parts.RotaryAttention and type(block.mlp) is parts.SwiGLU
        assert ("block", "TransformerBlock", "yours", "") in parts.slots()


def test_a_failing_llama_block_leaves_the_learners_transformer_block(tmp_path):
    """A LlamaBlock that normalizes after the add fails its check; LLaMA's config is then
    built by the learner's TransformerBlock, and the slots table says why."""
    post_norm = (
        "x = x + self.attn(self.norm1(x))",
        "x = self.norm1(x + self.attn(x))",
    )
    folder = _folder(tmp_path, edits={("10_modern_block", "LlamaBlock"): post_norm})
    parts = yours(folder, solutions_dir=SOLUTIONS)
    rows = {name: (whose, why) for name, _, whose, why in parts.rows()}
    assert rows["LlamaBlock"][0] == "reference", rows["LlamaBlock"]
    assert rows["LlamaBlock"][1].startswith("its check fails: LlamaBlock"), rows["LlamaBlock"]
    block = parts.gpt(MODERN).blocks[0]
    assert type(block) is parts.TransformerBlock and type(block.attn) is parts.RotaryAttention
    assert ("block", "TransformerBlock", "yours", "") in parts.slots()


def test_missing_unsolved_and_failing_parts_fall_back_each_with_its_reason(tmp_path):
    eps_outside = (
        "return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias",
        "return (x - mean) / (torch.sqrt(var) + self.eps) * self.weight + self.bias",
    )
    folder = _folder(
        tmp_path,
        skip=("08_training",),
        unsolved=("10_modern_block",),
        edits={("03_norms", "LayerNorm"): eps_outside},
    )
    parts = yours(folder, solutions_dir=SOLUTIONS)
    rows = {name: (whose, why) for name, _, whose, why in parts.rows()}

    assert rows["LayerNorm"][0] == "reference"
    assert rows["LayerNorm"][1].startswith("its check fails: LayerNorm"), rows["LayerNorm"]
    assert rows["SwiGLU"] == rows["RotaryAttention"] == ("reference", "not started")
    assert rows["train_loop"] == ("reference", "no 08_training.ipynb in this folder")
    assert rows["RMSNorm"] == ("yours", "") and rows["GPT"] == ("yours", "")
    assert parts.LayerNorm is tc.LayerNorm and parts.SwiGLU is tc.SwiGLU

    model = parts.gpt(MODERN)
    assert type(model.blocks[0].mlp) is tc.SwiGLU and type(model.blocks[0].norm1) is parts.RMSNorm
    assert type(model.blocks[0].attn) is tc.MultiHeadAttention and model.pos_emb is None
    assert ("MLP", "SwiGLU", "reference", "not started") in parts.slots()
    assert ("attention", "RotaryAttention", "reference", "not started") in parts.slots()
    # The reference loop trains like the learner's would.
    assert parts.train_loop.__module__ == "tfcourse.yours"


def test_a_failing_block_leaves_the_learners_gpt_with_the_reference_block(tmp_path):
    """A block that always normalizes after the add (post-LN) fails its check: the GPT is still
    the learner's, built from tc.TransformerBlock."""
    post_only = ("        if self.pre_ln:\n", "        if False:\n")
    folder = _folder(tmp_path, edits={("05_block", "TransformerBlock"): post_only})
    parts = yours(folder, solutions_dir=SOLUTIONS)
    whose = _whose(parts)
    assert whose["TransformerBlock"] == "reference" and whose["GPT"] == "yours", str(parts)
    model = parts.gpt(SMALL)
    assert type(model) is parts.GPT and type(model.blocks[0]) is tc.TransformerBlock


def test_the_table_speaks_chinese(tmp_path):
    folder = _folder(tmp_path, skip=("08_training",))
    with speaking("zh"):
        parts = yours(folder, solutions_dir=SOLUTIONS)
        text = str(parts)
    assert "参考实现" in text and "这个文件夹里没有 08_training.ipynb" in text
    assert "23 个部分中有 17 个是你的" in text


def test_a_folder_that_is_not_one_is_refused(tmp_path):
    with pytest.raises(ValueError, match="is not a folder"):
        yours(tmp_path / "nowhere", solutions_dir=SOLUTIONS)


def test_a_failing_function_is_replaced_for_the_cells_that_use_it(tmp_path):
    """Tiled key/value heads fail repeat_kv's check; RotaryAttention, which calls repeat_kv,
    then runs with the reference's and stays the learner's."""
    tiled = (
        "kv[:, :, None].expand(B, H_kv, n_rep, T, hd)",
        "kv[:, None].expand(B, n_rep, H_kv, T, hd)",
    )
    folder = _folder(tmp_path, edits={("10_modern_block", "repeat_kv"): tiled})
    parts = yours(folder, solutions_dir=SOLUTIONS)
    whose = _whose(parts)
    assert whose["repeat_kv"] == "reference" and whose["RotaryAttention"] == "yours", str(parts)


def test_a_failing_configure_optimizer_is_the_references(tmp_path):
    """Decay on everything (one group) fails the check: the capstone's run builds its optimizer
    with the reference's, and the table says why; the loop beside it stays the learner's."""
    one_group = (
        "    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)",
        "    return torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, "
        "weight_decay=weight_decay)",
    )
    folder = _folder(tmp_path, edits={("08_training", "configure_optimizer"): one_group})
    parts = yours(folder, solutions_dir=SOLUTIONS)
    rows = {name: (whose, why) for name, _, whose, why in parts.rows()}
    whose, why = rows["configure_optimizer"]
    assert whose == "reference" and "every parameter decays" in why, why
    assert rows["train_loop"] == ("yours", "")
    from tfcourse.train.optim import configure_optimizer

    assert parts.configure_optimizer is configure_optimizer


def test_the_capstones_tokenizer_is_the_learners_own(tmp_path):
    """tokenizer(merges) cuts with the learner's pre_split, encodes with their bpe_encode
    (which calls their merge_pair) and decodes with their bpe_decode: the course's ids and
    text, from their functions."""
    from tfcourse.train.bpe import ByteBPE

    parts = yours(_folder(tmp_path, skip=NOTEBOOKS[:-1]), solutions_dir=SOLUTIONS)
    tokenizer_parts = ("merge_pair", "pre_split", "bpe_encode", "bpe_decode")
    assert {_whose(parts)[name] for name in tokenizer_parts} == {"yours"}, str(parts)
    assert parts.bpe_encode.__module__ == parts.pre_split.__module__ == "__yours__"
    text = "the merges of the text, encoded: 注意力 🙂\n\n  indented"
    course = ByteBPE.train(text * 3, 30)
    theirs = parts.tokenizer(course.merges)
    assert theirs.encode(text) == course.encode(text)
    assert theirs.decode(course.encode(text)) == text
    assert theirs.decode([ord("a"), "注".encode()[0]]) == "a\ufffd"


def test_a_failing_bpe_encode_is_the_references_and_a_failing_merge_pair_serves_theirs(tmp_path):
    """Merge i as id i fails bpe_encode's check: the tokenizer encodes with the reference's.
    A merge_pair that loses the last id fails its own check: the learner's bpe_encode then
    calls the reference's merge_pair, passes, and stays theirs."""
    from tfcourse.train.bpe import ByteBPE

    id_is_rank = (
        "merge_pair(chunk_ids, pair, 256 + rank[pair])",
        "merge_pair(chunk_ids, pair, rank[pair])",
    )
    folder = _folder(
        tmp_path, skip=NOTEBOOKS[:-1], edits={("12_capstone", "bpe_encode"): id_is_rank}
    )
    parts = yours(folder, solutions_dir=SOLUTIONS)
    rows = {name: (whose, why) for name, _, whose, why in parts.rows()}
    assert rows["bpe_encode"][0] == "reference" and "merge i becomes id i" in rows["bpe_encode"][1]
    course = ByteBPE.train("abab cdcd " * 5, 6)
    assert parts.tokenizer(course.merges).encode("abab cd") == course.encode("abab cd")

    tail_lost = ("    while i < len(ids):\n", "    while i + 1 < len(ids):\n")
    folder = _folder(
        tmp_path / "b", skip=NOTEBOOKS[:-1], edits={("12_capstone", "merge_pair"): tail_lost}
    )
    parts = yours(folder, solutions_dir=SOLUTIONS)
    whose = _whose(parts)
    assert whose["merge_pair"] == "reference" and whose["bpe_encode"] == "yours", str(parts)
