"""The Chinese edition's machinery: translation files, what a translation may change, and
the build of ``solutions/zh/`` and ``notebooks/zh/`` (fast: in-memory notebooks, no kernel).
"""

from __future__ import annotations

import re

import nbformat
import pytest

from tfcourse import cli, language
from tfcourse.authoring import glossary, translation
from tfcourse.authoring.build import build, solve
from tfcourse.course import notebook_format

from helpers import METHOD, ROOT, code, tiny_solution

FULL = {  # a complete translation of test_generator.tiny_solution()
    ("cell", "title"): "# 小例子",
    ("cell", "ex-norm"): "```python\n"
    + METHOD.replace("# code after the region stays", "# 区域之后的代码保留")
    + "\n```",
    ("hint", "ex-mask"): "保留下三角",
    ("hint", "ex-norm"): "均方根",
}


def twin_text(nb, texts: dict) -> str:
    """A translation file holding ``texts`` with the fingerprints of ``nb``'s English."""
    cells = {cell.id: cell for cell in nb.cells}
    parts = []
    for (kind, cell_id), text in texts.items():
        english = cells[cell_id].source if kind == "cell" else cells[cell_id].metadata.tfcourse.hint
        parts.append(
            f"<!-- {kind}: {cell_id} · en: {translation.fingerprint(english)} -->\n{text}\n"
        )
    return "\n".join(parts)


def problems_of(nb, texts: dict) -> list[str]:
    sections = translation.parse_twin(twin_text(nb, texts))
    return translation.translate_notebook(nb, sections, "00_tiny")[1]


def test_a_complete_translation_gives_a_chinese_notebook_with_the_same_code():
    nb = tiny_solution()
    chinese, problems = translation.translate_notebook(
        nb, translation.parse_twin(twin_text(nb, FULL)), "00_tiny"
    )
    # The tiny notebook has no setup cell: that is the only problem.
    assert problems == [
        "00_tiny: no cell calls setup_notebook(...), which switches the "
        "Chinese edition's messages to Chinese"
    ]
    assert chinese.cells[0].source == "# 小例子"
    assert chinese.cells[2].metadata.tfcourse.hint == "保留下三角"
    assert chinese.cells[5].source.endswith("# 区域之后的代码保留")
    assert [c.source for c in chinese.cells[1:5]] == [c.source for c in nb.cells[1:5]]
    assert chinese.cells[3].outputs == nb.cells[3].outputs
    assert chinese.metadata.tfcourse.language == "zh"


def with_setup(nb):
    nb.cells.insert(1, code("first", 'device = tc.runtime.setup_notebook(written_for="0.1.0")'))
    return nb


def test_the_generator_makes_the_first_cell_choose_chinese():
    nb = with_setup(tiny_solution())
    chinese, problems = translation.translate_notebook(
        nb, translation.parse_twin(twin_text(nb, FULL)), "00_tiny"
    )
    assert problems == []
    assert chinese.cells[1].source == (
        'device = tc.runtime.setup_notebook(written_for="0.1.0", language="zh")'
    )


@pytest.mark.parametrize(
    "drop, expected",
    [
        (("cell", "title"), "cell 'title' (#0): the cell has no translation"),
        (("hint", "ex-norm"), "cell 'ex-norm' (#6): its hint has no translation"),
        (("cell", "ex-norm"), "cell 'ex-norm' (#6): the cell has no translation"),
    ],
)
def test_a_missing_translation_names_the_cell(drop, expected):
    nb = with_setup(tiny_solution())
    problems = problems_of(nb, {k: v for k, v in FULL.items() if k != drop})
    assert len(problems) == 1 and expected in problems[0]


def test_an_english_edit_makes_the_translation_stale_and_names_the_cell():
    nb = with_setup(tiny_solution())
    text = twin_text(nb, FULL)
    nb.cells[0].source = "# Tiny, edited"
    problems = translation.translate_notebook(nb, translation.parse_twin(text), "00_tiny")[1]
    assert len(problems) == 1
    assert "cell 'title' (#0): the cell changed since it was translated" in problems[0]
    assert translation.fingerprint("# Tiny, edited") in problems[0]


def test_untranslated_markdown_and_unused_sections_are_problems():
    nb = with_setup(tiny_solution())
    problems = problems_of(nb, {**FULL, ("cell", "title"): "# Tiny", ("cell", "ex-mask"): "x"})
    assert any("cell 'title' (#0): the translation has no Chinese" in p for p in problems)
    assert any(
        "section 'cell: ex-mask' is not used (the cell needs no translation)" in p for p in problems
    )


@pytest.mark.parametrize(
    "english, chinese, same_output, allowed",
    [
        ("x = f(1)  # one", "x = f(1)  # 一", True, True),
        (
            'def f():\n    """Doc."""\n    return 1',
            'def f():\n    """文档。"""\n    return 1',
            True,
            True,
        ),
        ('print("a b")', 'print("甲 乙")', False, True),  # its outputs must be its own
        ('print(f"{x:.3f} nats per char")', 'print(f"{x:.3f} nats/字符")', False, True),
        ('print(f"{x:.3f} nats")', 'print(f"{x:.2f} nats")', False, False),  # the format is code
        ('print(f"{x} {y}")', 'print(f"{x} {z}")', False, False),
        ("x = f(1)", "x = f(2)", False, False),
        ("x = f(1)", "x = g(1)", False, False),
        ("%time x = 1", "%time x = 1  # 计时", False, True),  # the magic line is its argument
    ],
)
def test_a_code_translation_may_change_only_text(english, chinese, same_output, allowed):
    assert (translation.code_difference(english, chinese) is None) == allowed
    if allowed:
        assert translation.prints_the_same(english, chinese) == same_output


def test_which_cells_need_a_translation():
    assert translation.needs_translation(code("a", "x = 1  # the first token"))
    assert not translation.needs_translation(code("a", "x = y @ w  # (B, T, D)"))
    assert not translation.needs_translation(
        code("a", "### BEGIN SOLUTION\nx = 1\n### END SOLUTION")
    )
    assert translation.needs_translation(code("a", 'print("the loss is", x)'))
    assert translation.needs_translation(  # compared: the Chinese prints its own
        code("a", 'print("the loss is", x)', ["nbval-check-output"])
    )


def test_twin_files_reject_duplicates_and_stray_text():
    header = "<!-- cell: title · en: 0123456789 -->"
    with pytest.raises(ValueError, match="a second 'cell: title' section"):
        translation.parse_twin(f"{header}\n甲\n{header}\n乙\n")
    with pytest.raises(ValueError, match="text before the first"):
        translation.parse_twin(f"stray\n{header}\n甲\n")


def test_build_writes_both_editions_and_check_names_a_stale_cell(tmp_path, capsys):
    solutions = tmp_path / "solutions"
    nb = with_setup(tiny_solution())
    notebook_format.write_notebook(nb, solutions / "00_tiny.ipynb")
    translation.twin_path(solutions / "00_tiny.ipynb").write_text(
        twin_text(nb, FULL), encoding="utf-8"
    )
    report = build(solutions, tmp_path / "notebooks")
    assert report.ok, report.problems
    written = sorted(p.relative_to(tmp_path).as_posix() for p in report.written)
    assert written == [
        "notebooks/00_tiny.ipynb",
        "notebooks/zh/00_tiny.ipynb",
        "solutions/zh/00_tiny.ipynb",
    ]
    learner = notebook_format.read_notebook(tmp_path / "notebooks" / "zh" / "00_tiny.ipynb")
    assert learner.cells[3].source.splitlines()[2] == "    # 提示：保留下三角"
    solved = solve(
        learner, notebook_format.read_notebook(tmp_path / "solutions" / "zh" / "00_tiny.ipynb")
    )
    assert "提示" not in solved.cells[3].source and "tril" in solved.cells[3].source
    assert learner.metadata.tfcourse.language == "zh"

    nb.cells[0].source = "# Tiny, edited"
    notebook_format.write_notebook(nb, solutions / "00_tiny.ipynb")
    capsys.readouterr()
    args = [
        "build-notebooks",
        "--check",
        "--solutions",
        str(solutions),
        "--out",
        str(tmp_path / "notebooks"),
    ]
    assert cli.main(args) == 1
    err = capsys.readouterr().err
    assert "00_tiny.ipynb (中文版): 00_tiny: cell 'title' (#0): the cell changed" in err


def test_a_rebuild_keeps_the_chinese_solutions_own_outputs(tmp_path):
    """A check cell has the English code but prints Chinese once the Chinese solution is
    executed; building again must not put the English verdict back."""
    solutions = tmp_path / "solutions"
    nb = with_setup(tiny_solution())
    notebook_format.write_notebook(nb, solutions / "00_tiny.ipynb")
    translation.twin_path(solutions / "00_tiny.ipynb").write_text(
        twin_text(nb, FULL), encoding="utf-8"
    )
    assert build(solutions, tmp_path / "notebooks").ok
    chinese = solutions / "zh" / "00_tiny.ipynb"

    def verdict(path):
        (cell,) = [c for c in notebook_format.read_notebook(path).cells if c.id == "check-mask"]
        return cell

    executed = notebook_format.read_notebook(chinese)
    executed.cells[executed.cells.index(verdict(chinese))].outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="Mask：3/3 项检查通过\n")
    ]
    notebook_format.write_notebook(executed, chinese)
    assert build(solutions, tmp_path / "notebooks").ok
    assert notebook_format.text_of_outputs(verdict(chinese).outputs) == ["Mask：3/3 项检查通过\n"]
    learner = tmp_path / "notebooks" / "zh" / "00_tiny.ipynb"  # marked as the reference's output
    assert notebook_format.text_of_outputs(verdict(learner).outputs) == [
        "预期（参考实现的输出）：Mask：3/3 项检查通过"
    ]


def test_say_follows_the_chosen_language(monkeypatch):
    monkeypatch.delenv("TFCOURSE_LANG", raising=False)
    try:
        assert language.say("mask", "掩码") == "mask"
        monkeypatch.setenv("TFCOURSE_LANG", "zh_CN.UTF-8")
        assert language.say("mask", "掩码") == "掩码"
        language.use("en")
        assert language.say("mask", "掩码") == "mask"
        with pytest.raises(ValueError, match="language must be one of"):
            language.use("fr")
    finally:
        language.use(None)


def test_translate_command_appends_the_missing_sections(tmp_path, monkeypatch, capsys):
    solutions = tmp_path / "solutions"
    nb = with_setup(tiny_solution())
    notebook_format.write_notebook(nb, solutions / "00_tiny.ipynb")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["translate", "00_tiny"]) == 0
    text = translation.twin_path(solutions / "00_tiny.ipynb").read_text(encoding="utf-8")
    sections = translation.parse_twin(text)
    assert set(sections) == set(FULL)
    assert sections[("cell", "title")].text == "# Tiny"  # the English, to replace
    assert cli.main(["translate", "00_tiny", "--check"]) == 1
    assert "the translation has no Chinese" in capsys.readouterr().err


def test_a_glossary_term_in_english_needs_its_chinese_term():
    nb = with_setup(tiny_solution())
    nb.cells[0].source = "# Tiny: weight tying"
    assert problems_of(nb, {**FULL, ("cell", "title"): "# 小例子：权重绑定"}) == []
    problems = problems_of(nb, {**FULL, ("cell", "title"): "# 小例子：权重共享"})
    assert len(problems) == 1
    assert "the English says 'weight tying'; the Chinese should say 权重绑定" in problems[0]


def test_the_glossary_reads_its_own_rules():
    terms = {term.english: term.chinese for term in glossary.load()}
    assert terms["weight tying"] == ("权重绑定",)  # 又称权重共享: not accepted
    assert terms["layer normalization"] == ("层归一化", "LayerNorm")
    assert terms["pre-LN"] == ("前置层归一化", "Pre-LN") and terms["KV cache"][0] == "键值缓存"
    for english in (
        "cross-entropy",
        "autoregressive generation",
        "teacher forcing",
        "temperature",
        "top-k sampling",
        "entropy rate",
        "dropout",
        "grouped-query attention",
        "learned positional embedding",
        "buffer",
        "logits",
    ):
        assert english in terms, english


TRANSLATED = sorted(
    p for p in (ROOT / "solutions").glob("*.ipynb") if translation.twin_path(p).exists()
)


# Digits with their thousands commas and decimals; not a sign ("head-0") nor a trailing comma.
_NUMBER = re.compile(r"\d(?:[\d,]*\d)?(?:\.\d+)?(?:e[-+]?\d+)?")


def in_step(outputs) -> tuple:
    """What two editions' outputs of one compared cell share: the kinds of output (which
    streams, which other outputs; a run may split one stream into several pieces) and the
    numbers in all their text (as a multiset: a translation may put them in another order)."""
    streams = sorted({o.get("name") for o in outputs if o.get("output_type") == "stream"})
    others = sorted(o.get("output_type") for o in outputs if o.get("output_type") != "stream")
    return (
        streams,
        others,
        sorted(_NUMBER.findall("".join(notebook_format.text_of_outputs(outputs)))),
    )


def test_outputs_in_step_differ_in_a_number_not_in_words():
    english = [nbformat.v4.new_output("stream", name="stdout", text="loss 1.25 after 300 steps\n")]
    chinese = [nbformat.v4.new_output("stream", name="stdout", text="300 步之后损失为 1.25\n")]
    wrong = [nbformat.v4.new_output("stream", name="stdout", text="300 步之后损失为 1.26\n")]
    assert in_step(english) == in_step(chinese) != in_step(wrong)


@pytest.mark.parametrize("solution", TRANSLATED, ids=lambda p: p.stem)
def test_the_two_editions_pair_up(solution):
    """Same cells, same code, compared outputs in step (each the same kinds of output with
    the same numbers: the Chinese words are the edition's own, nbval compares them with its
    own runs); every text translated, glossary kept; a cell the English solution shows
    executed is executed in the Chinese one too (the Chinese reader, and the site, see its
    figures and numbers)."""
    english = notebook_format.read_notebook(solution)
    chinese, problems = translation.check_notebook(solution)
    assert problems == []
    shipped = notebook_format.read_notebook(solution.parent / "zh" / solution.name)
    assert [(c.id, c.cell_type) for c in shipped.cells] == [
        (c.id, c.cell_type) for c in english.cells
    ]
    unexecuted = [
        en.id
        for en, zh in zip(english.cells, shipped.cells, strict=True)
        if en.cell_type == "code" and en.outputs and not zh.outputs
    ]
    assert not unexecuted, (
        f"cells without outputs in solutions/zh/{solution.name}: "
        f"{unexecuted}; run `tfcourse execute solutions/zh/{solution.name}`"
    )
    for en, zh in zip(english.cells, shipped.cells, strict=True):
        if en.cell_type == "code":
            setup = translation._SETUP_CALL.sub(r'\1, language="zh")', en.source)
            assert translation.code_difference(setup, zh.source) is None, en.id
            if translation.is_compared(en):
                assert in_step(en.outputs) == in_step(zh.outputs), en.id
        elif translation.needs_translation(en):
            assert translation._CJK.search(zh.source), en.id
    assert shipped.metadata.tfcourse.language == "zh"


def test_check_cells_are_never_translated():
    nb = with_setup(tiny_solution())
    nb.cells[4].source = "check_mask(causal_mask)  # the verdict line"
    assert not translation.needs_translation(nb.cells[4])
    problems = problems_of(
        nb, {**FULL, ("cell", "check-mask"): "```python\ncheck_mask(causal_mask)  # 判定\n```"}
    )
    assert any("section 'cell: check-mask' is not used" in p for p in problems)


@pytest.mark.parametrize(
    "source",
    [
        'ax.set(xlabel="step", ylabel="nats / character")',
        'ax.plot(x, y, label="train (smoothed)")',
        'print(f"--- after {step} steps ---")',
        'widgets.IntSlider(description="heads")',
    ],
)
def test_labels_and_printed_words_need_a_translation(source):
    assert translation.needs_translation(code("a", source))
    assert translation.needs_translation(code("a", source, ["nbval-check-output"]))
    assert not translation.needs_translation(code("a", 'ax.plot(x, y, "o-", color="C1")'))


@pytest.mark.parametrize(
    "english, chinese, slip",
    [
        ("Rotate `(q_i, q_{i+1})` by $m\\theta$.", "把 `(q_i, q_{i+1})` 旋转 $m\\theta$。", None),
        (
            "Rotate `(q_i, q_{i+1})`.",
            "把 `(q_i, q_{i1})` 旋转。",
            "lost or changed `(q_i, q_{i+1})`",
        ),
        ("When $T > 512$ it grows.", "当 $T 512$ 时它会变长。", "lost or changed $T > 512$"),
        ("Wrapped `a =\n  b` span.", "换行的 `a = b` 片段。", None),
        ("Mean: 0.", "均值: 0。", "half-width punctuation"),
        ("It (the mean) is 0.", "它(均值)为 0。", "half-width punctuation"),
        ("It (the mean) is 0.", "它（均值）为 0。", None),
        ("The handbook says so.", "手册原文：“初始化时只建[512, d_model]时(q_i)用”。", None),
    ],
)
def test_mechanical_slips_of_a_translation_are_caught(english, chinese, slip):
    slips = translation.prose_slips(english, chinese)
    assert (slips == []) if slip is None else any(slip in s for s in slips), slips


def test_a_label_the_chinese_code_translated_is_named_as_the_chinese_edition_shows_it():
    # The English prose names a table row, `shifts frozen`, that the Chinese table prints as
    # “冻结平移”: the Chinese names the row it shows, not the English one.
    nb = with_setup(tiny_solution())
    nb.cells.insert(2, code("table", 'rows = {"post-LN, shifts frozen": 1}\nprint(rows)'))
    nb.cells.insert(
        3, nbformat.v4.new_markdown_cell("See the `shifts frozen` row; `x + y` is code.", id="md")
    )
    chinese_table = '```python\nrows = {"Post-LN，冻结平移": 1}\nprint(rows)\n```'
    named = "见表中“Post-LN，冻结平移”一行；`x + y` 是代码。"
    assert problems_of(nb, {**FULL, ("cell", "table"): chinese_table, ("cell", "md"): named}) == []
    # Untranslated, the label is still the English one: the Chinese must keep the span.
    english_table = '```python\nrows = {"post-LN, shifts frozen": 1}\nprint(rows)\n```'
    problems = problems_of(nb, {**FULL, ("cell", "table"): english_table, ("cell", "md"): named})
    assert any("lost or changed `shifts frozen`" in p for p in problems), problems
    # Code is never a label: a lost `x + y` is a slip whatever the labels.
    slips = translation.prose_slips("`x + y` and `x`", "和", ('"x + y"', '"x"'))
    assert any("`x + y`" in s for s in slips) and any("`x`" in s for s in slips)


def test_an_english_docstring_or_half_width_print_in_chinese_code_is_caught():
    assert translation.code_slips('def f():\n    """Bytes per token: a key and a value."""')
    assert not translation.code_slips('def f():\n    """每个词元占用的字节数。"""')
    assert translation.code_slips('print(f"均值: {m:.3f}")')
    assert not translation.code_slips('print(f"均值：{m:.3f}")')
