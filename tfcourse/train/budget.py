"""The capstone's training budget: the settings a sweep tries, and the runs it recorded.

``benchmarks/capstone_budget.py`` trains one ``Setting`` for a number of steps, scores it on
the validation and the test part of the held-out text, and ``record_run`` appends the result
to ``capstone_runs.json`` (shipped with the package); notebook 12 prints
``recorded_runs_table()`` from that file (the runs at ``capstone.BUDGET_STEPS``), so the table
a learner reads is the sweep's own output, trains ``best_run()``, the lowest mean validation
loss, for those steps, and prints ``frontier_table()``: the chosen setting's test margin at
other numbers of steps. A
``Setting`` leaves at ``None`` what it takes from the capstone preset (``nn/config.py``
"capstone", ``presets.TRAINING_PRESETS["capstone"]``).
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from ..language import pad, say, text_width
from ..nn.attention import MultiHeadAttention
from ..nn.config import GPTConfig
from ..nn.model import GPT
from ..runtime import seed_everything
from . import capstone
from .bpe import ByteBPE
from .data import TextDataset
from .loop import Trainer

RUNS_FILE = Path(__file__).with_name("capstone_runs.json")
# A setting's fields as ``Setting.label`` names them: (English, Chinese).
_FIELD_WORDS = {
    "n_layers": ("blocks", "块数"),
    "d_model": ("width", "宽度"),
    "n_heads": ("heads", "头数"),
    "dropout": ("dropout", "dropout"),
    "attn_dropout": ("attention dropout", "注意力 dropout"),
    "seq_len": ("context", "上下文长度"),
    "batch_size": ("batch", "批大小"),
    "lr": ("learning rate", "学习率"),
    "weight_decay": ("weight decay", "权重衰减"),
}


@dataclasses.dataclass(frozen=True)
class Setting:
    """One point of the sweep. ``dropout`` is residual dropout (after each sublayer and on
    the embeddings); ``attn_dropout`` drops attention weights, which on a CPU costs a
    ``(B, H, T, T)`` random mask a layer and a slower attention kernel."""

    tokens: str = "chars"  # "chars" or "bpeN" (N byte-pair merges learned on the train split)
    n_layers: int | None = None
    d_model: int | None = None
    n_heads: int | None = None
    dropout: float = 0.0
    attn_dropout: float = 0.0
    seq_len: int | None = None
    batch_size: int | None = None
    lr: float | None = None
    weight_decay: float | None = None
    # More training text: ``capstone.more_training_text``, the docstrings of the rest of the
    # standard library (the held-out text stays the same).
    more_text: bool = False

    def __post_init__(self):
        if self.tokens != "chars" and not (
            self.tokens.startswith("bpe") and self.tokens[3:].isdigit()
        ):
            raise ValueError(
                say(
                    f"tokens must be 'chars' or 'bpeN', got {self.tokens!r}",
                    f"tokens 必须是 'chars' 或 'bpeN'，实际是 {self.tokens!r}",
                )
            )

    @property
    def schedule(self) -> dict:
        """The capstone schedule with this setting's changes."""
        s = dict(capstone.SCHEDULE)
        for key, value in (("seq_len", self.seq_len), ("batch_size", self.batch_size)):
            if value is not None:
                s[key] = value
        if self.lr is not None:
            s["lr"], s["min_lr"] = self.lr, self.lr / 10
        s["weight_decay"] = 0.1 if self.weight_decay is None else self.weight_decay
        return s

    def model_changes(self) -> dict:
        changes = {
            name: getattr(self, name)
            for name in ("n_layers", "d_model", "n_heads")
            if getattr(self, name) is not None
        }
        return {**changes, "dropout": self.dropout, "max_seq_len": self.schedule["seq_len"]}

    def label(self) -> str:
        """The tokens, then the fields that differ from the preset, in the reader's words
        (``more_text`` left out: a table shows the runs of one text). ``describe`` is the
        ``name=value`` form of the command line and the recorded file."""
        default = Setting()
        parts = [
            say(
                f"{int(self.tokens[3:]):,} byte-pair merges",
                f"{int(self.tokens[3:]):,} 次合并的字节对",
            )
            if self.tokens.startswith("bpe")
            else say("characters", "字符")
        ]
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name not in ("tokens", "more_text") and value != getattr(default, f.name):
                parts.append(f"{say(*_FIELD_WORDS[f.name])} {value}")
        return say(", ", "，").join(parts)

    def describe(self) -> str:
        """The tokens, then the fields that differ from the preset, as ``name=value``."""
        default = Setting()
        changed = [
            f"{f.name}={getattr(self, f.name)}"
            for f in dataclasses.fields(self)
            if f.name == "tokens" or getattr(self, f.name) != getattr(default, f.name)
        ]
        return ", ".join(changed)


def setting_data(
    setting: Setting, chars: TextDataset | None = None, *, tokenizer=ByteBPE
) -> TextDataset:
    """The capstone split (``chars``, read afresh if not given) in the setting's tokens;
    byte pairs are encoded by ``tokenizer(merges)`` (``capstone.BytePairText``)."""
    chars = capstone.capstone_data() if chars is None else chars
    if setting.more_text:
        chars = capstone.with_more_training_text(chars)
    if setting.tokens == "chars":
        return chars
    return capstone.BytePairText(chars, int(setting.tokens[3:]), tokenizer=tokenizer)


def model_config(data: TextDataset, setting: Setting) -> GPTConfig:
    """The capstone model of ``setting`` for ``data``'s vocabulary."""
    return GPTConfig.preset("capstone", vocab_size=data.vocab_size, **setting.model_changes())


def build_model(data: TextDataset, setting: Setting, seed: int) -> GPT:
    """A fresh capstone GPT of ``setting`` for ``data``'s vocabulary, its weights from ``seed``."""
    seed_everything(seed)
    model = GPT(model_config(data, setting))
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            module.dropout = setting.attn_dropout  # the residual dropout stays config.dropout
    return model


def trainer_for(data, setting: Setting, steps: int, seed: int, device=None) -> Trainer:
    """A ``Trainer`` of a fresh model of ``setting`` for ``steps`` steps of its schedule (warmup
    a tenth of a short run, ten validations)."""
    config = capstone.schedule_config(
        setting.schedule, steps, seed=seed, eval_every=max(1, steps // 10), eval_batches=8
    )
    return Trainer(build_model(data, setting, seed), data, config, device=device)


def seconds_per_step(data, setting: Setting, *, device=None, steps: int = 20) -> float:
    """The time of one training step of ``setting`` here (after two untimed steps)."""
    trainer = trainer_for(data, setting, steps + 2, seed=0, device=device)
    trainer.config.eval_every = 0
    trainer.fit(until=2)
    started = time.perf_counter()
    for _ in range(steps):
        trainer.train_step()
    return (time.perf_counter() - started) / steps


def train_setting(data, setting: Setting, steps: int, *, seed: int = 0, device=None) -> Trainer:
    """Train a fresh model of ``setting`` for ``steps`` steps; the trainer holds the model
    (``.module``) and its history."""
    trainer = trainer_for(data, setting, steps, seed, device)
    trainer.fit()
    return trainer


def chars_per_token(data: TextDataset) -> float:
    """Characters of held-out text per held-out token (1 for characters)."""
    if isinstance(data, capstone.BytePairText):
        return len(data.tokenizer.decode(data.val.tolist())) / len(data.val)
    return 1.0


def part_scores(model: GPT, data: TextDataset) -> dict[str, float]:
    """The capstone's score on each part of the held-out text (``capstone.held_out_parts``):
    ``{"validation": ..., "test": ...}`` in nats per character."""
    held_out = data.tokenizer.decode(data.val.tolist())
    return {
        part: capstone.nats_per_char(model, data.tokenizer, text)
        for part, text in capstone.held_out_parts(held_out).items()
    }


@dataclasses.dataclass(frozen=True)
class RecordedRun:
    """A setting, its steps and minutes, and each seed's loss on the validation part of the
    held-out text (``losses``) and on its test part (``test_losses``), in nats per character
    (``capstone.held_out_parts``). ``curves``: per seed, ``(step, loss per token)`` along the
    run, measured on batches of the whole held-out text."""

    setting: Setting
    steps: int
    minutes: float
    losses: tuple[float, ...]
    seeds: tuple[int, ...]
    test_losses: tuple[float, ...] = ()
    curves: tuple = ()

    @property
    def mean(self) -> float:
        return sum(self.losses) / len(self.losses)

    @property
    def spread(self) -> float:
        """The seeds' standard deviation (n - 1 in the denominator; 0 for one seed)."""
        return _sd(self.losses)

    def test_margins(self, ngram_test: float) -> list[float]:
        """Each seed's margin on the test part over a counting model's test loss
        ``ngram_test`` (positive: the GPT is better)."""
        return [ngram_test - loss for loss in self.test_losses]

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["summary"] = {
            "setting": self.setting.describe(),
            "steps": self.steps,
            "minutes": self.minutes,
            "mean": round(self.mean, 4),
            "spread": round(self.spread, 4),
            "test": list(self.test_losses),
        }
        return d

    @classmethod
    def from_dict(cls, d: dict) -> RecordedRun:
        return cls(
            setting=Setting(**d["setting"]),
            steps=d["steps"],
            minutes=d["minutes"],
            losses=tuple(d["losses"]),
            seeds=tuple(d["seeds"]),
            test_losses=tuple(d.get("test_losses", ())),
            curves=tuple(tuple(tuple(p) for p in c) for c in d.get("curves", ())),
        )


def _sd(values) -> float:
    n = len(values)
    if n < 2:
        return 0.0
    mean = sum(values) / n
    return (sum((v - mean) ** 2 for v in values) / (n - 1)) ** 0.5


def recorded_runs(path: Path = RUNS_FILE) -> list[RecordedRun]:
    if not path.exists():
        return []
    return [RecordedRun.from_dict(d) for d in json.loads(path.read_text(encoding="utf-8"))]


def record_run(run: RecordedRun, path: Path = RUNS_FILE) -> RecordedRun:
    """Add ``run`` to the file; seeds of a setting already recorded at the same steps and
    minutes join its row (so seeds can run as separate processes). Returns the row."""
    runs = recorded_runs(path)
    for i, old in enumerate(runs):
        if (old.setting, old.steps, old.minutes) == (run.setting, run.steps, run.minutes):
            fresh = [k for k, seed in enumerate(run.seeds) if seed not in old.seeds]
            run = dataclasses.replace(
                old,
                losses=old.losses + tuple(run.losses[k] for k in fresh),
                seeds=old.seeds + tuple(run.seeds[k] for k in fresh),
                test_losses=old.test_losses
                + tuple(run.test_losses[k] for k in fresh if k < len(run.test_losses)),
                curves=old.curves + tuple(run.curves[k] for k in fresh if k < len(run.curves)),
            )
            runs[i] = run
            break
    else:
        runs.append(run)
    path.write_text(
        json.dumps([r.to_dict() for r in runs], indent=1, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    return run


def budget_runs(
    runs: list[RecordedRun] | None = None, more_text: bool = capstone.MORE_TEXT
) -> list[RecordedRun]:
    """The recorded runs at the budget (``capstone.BUDGET_STEPS``) on one training text, where
    settings compete: with more text (``Setting.more_text``, notebook 12's text,
    ``capstone.MORE_TEXT``) or the corpus alone. Runs on different texts are never compared:
    each has its own counting model (``capstone.ngram_for``)."""
    runs = recorded_runs() if runs is None else runs
    return [
        r for r in runs if r.steps == capstone.BUDGET_STEPS and r.setting.more_text == more_text
    ]


def best_run(
    runs: list[RecordedRun] | None = None, more_text: bool = capstone.MORE_TEXT
) -> RecordedRun:
    """The run at the budget with the lowest mean validation loss on that text: with the
    default text, the setting notebook 12 trains."""
    runs = budget_runs(runs, more_text)
    if not runs:
        raise ValueError(
            say(
                "no run is recorded: run benchmarks/capstone_budget.py",
                "还没有记录任何运行：请运行 benchmarks/capstone_budget.py",
            )
        )
    return min(runs, key=lambda r: r.mean)


def recorded_runs_table(
    ngram: float, runs: list[RecordedRun] | None = None, more_text: bool = capstone.MORE_TEXT
) -> str:
    """The recorded runs at the budget on one text (``budget_runs``) as an aligned table in the
    reader's language, best first: each row's setting (``Setting.label``), its validation loss
    (mean ± standard deviation over its seeds) and its margin over ``ngram``, the counting
    model's validation loss on that text (positive: the GPT is better)."""
    runs = sorted(budget_runs(runs, more_text), key=lambda r: r.mean)
    header = (
        say("setting", "设置"),
        say("steps", "步数"),
        say("time", "时间"),
        say("seeds", "种子"),
        say("validation nats/char", "验证集 nats/字符"),
        say("margin", "差距"),
    )
    rows = [
        (
            r.setting.label(),
            f"{r.steps:,}",
            say(f"{r.minutes:.1f} min", f"{r.minutes:.1f} 分钟"),
            str(len(r.seeds)),
            f"{r.mean:.3f} ± {r.spread:.3f}" if len(r.seeds) > 1 else f"{r.mean:.3f}",
            f"{ngram - r.mean:+.3f}",
        )
        for r in runs
    ]
    return _aligned([header, *rows])


def frontier(setting: Setting, runs: list[RecordedRun] | None = None) -> list[RecordedRun]:
    """The recorded runs of ``setting`` with test losses, fewest steps first: its margin
    against the budget."""
    runs = recorded_runs() if runs is None else runs
    return sorted(
        (r for r in runs if r.setting == setting and r.test_losses), key=lambda r: r.steps
    )


def frontier_table(setting: Setting, ngram_test: float, runs=None) -> str:
    """``frontier(setting)`` as an aligned table in the reader's language: per number of steps,
    the minutes, each seed's margin on the test part over ``ngram_test`` (the counting model's
    test loss) and their mean ± standard deviation."""
    header = (
        say("steps", "步数"),
        say("time", "时间"),
        say("margin per seed", "各种子的差距"),
        say("mean ± sd", "均值 ± 标准差"),
    )
    rows = []
    for r in frontier(setting, runs):
        margins = r.test_margins(ngram_test)
        rows.append(
            (
                f"{r.steps:,}",
                say(f"{r.minutes:.1f} min", f"{r.minutes:.1f} 分钟"),
                " ".join(f"{m:+.3f}" for m in margins),
                f"{sum(margins) / len(margins):+.3f}"
                + (f" ± {_sd(margins):.3f}" if len(margins) > 1 else ""),
            )
        )
    return _aligned([header, *rows])


def _aligned(rows: list[tuple[str, ...]]) -> str:
    widths = [max(text_width(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(pad(cell, width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )
