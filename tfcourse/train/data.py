"""Training data that needs no download.

Three datasets, one protocol. Each has ``vocab_size``, ``loss_floor`` (the
best achievable mean cross-entropy in nats, or None when unknown) and
``batch(batch_size, seq_len, *, generator, split="train") -> (x, y)`` with token
ids ``x (B, T)`` and next-token targets ``y (B, T)``; a target of
``IGNORE_INDEX`` (-100) marks a position the loss skips.

- ``MarkovChain``: a fixed random first-order Markov chain. Its entropy rate is
  the exact loss floor: no model can predict the next token better than the
  true transition probabilities do.
- ``CopyTask``: random symbols, a separator, then the same symbols again. The
  copy is fully determined by the first half, so its floor is 0 nats.
- ``TextDataset``: characters of real English (Python's standard library
  docstrings, or the capstone corpus of ``corpus.py``, gathered from the installed
  interpreter at run time), with a character-level ``CharTokenizer`` and a
  train/val split.

``make_dataset(name, ...)`` builds any of them by name (the ``tfcourse train`` CLI).
"""

from __future__ import annotations

import math
import os

import torch

from ..language import say
from ..nn import validate
from .corpus import STDLIB_MODULES, capstone_text, stdlib_docstrings  # noqa: F401 - re-exported
from .names import DATASETS, TEXT_SOURCES

IGNORE_INDEX = -100  # F.cross_entropy's default ignore_index
SPLITS = ("train", "val")


def _physical_memory_bytes() -> int | None:
    """The machine's physical memory (POSIX), or None where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # Windows has no sysconf
        return None


def _check_batch_args(batch_size, seq_len, generator, split):
    validate.positive_int("batch_size", batch_size)
    validate.positive_int("seq_len", seq_len)
    if generator is not None and not isinstance(generator, torch.Generator):
        got = type(generator).__name__
        raise TypeError(
            say(
                f"generator must be a torch.Generator or None, got {got}",
                f"generator 必须是 torch.Generator 或 None，实际是 {got}",
            )
        )
    validate.choice("split", split, SPLITS)


# --------------------------------------------------------------------------- Markov chain


class MarkovChain:
    """A fixed random Markov chain over ``vocab_size`` tokens: a task with a known optimum.

    Each token has ``n_successors`` possible next tokens (chosen at random) with
    random probabilities; every other transition has probability exactly 0, so a
    generated sequence that takes an impossible transition is visibly wrong.

    Sequences start from the stationary distribution, so every position of every
    sequence has the same conditional entropy ``H(X_{t+1} | X_t)``: the entropy
    rate, ``entropy_rate = -sum_i pi_i sum_j P_ij log P_ij`` (nats). That is the
    loss floor of a model that sees the past only.

    Args:
        vocab_size: number of states (tokens) V >= 2.
        n_successors: allowed next tokens per state, 1 <= n_successors <= V.
        seed: builds the chain (the same seed gives the same chain everywhere).

    Attributes:
        transition: ``(V, V)`` float64, row ``i`` = P(next | current = i), rows sum to 1.
        stationary: ``(V,)`` float64, ``stationary @ transition == stationary``.
        entropy_rate: the loss floor in nats (float).
    """

    def __init__(self, vocab_size: int = 32, n_successors: int = 4, *, seed: int = 0):
        validate.positive_int("vocab_size", vocab_size)
        validate.positive_int("n_successors", n_successors)
        if vocab_size < 2:
            raise ValueError(
                say(
                    f"vocab_size must be >= 2, got {vocab_size}",
                    f"vocab_size（词表大小）必须 >= 2，实际是 {vocab_size}",
                )
            )
        if n_successors > vocab_size:
            raise ValueError(
                say(
                    f"n_successors must be <= vocab_size={vocab_size}, got {n_successors}",
                    f"n_successors 必须 <= vocab_size={vocab_size}，实际是 {n_successors}",
                )
            )
        # Refused even when a caller skips the memory estimate (tfcourse train
        # --no-memory-check): where the kernel overcommits memory, an 8 TB torch.zeros
        # succeeds and filling it gets the process killed without a word.
        need, have = self.table_bytes(vocab_size), _physical_memory_bytes()
        if have is not None and need > have:
            raise ValueError(
                say(
                    f"a Markov chain over vocab_size={vocab_size} tokens builds (V, V) float64 "
                    f"tables of about {need / 2**30:,.0f} GiB, more than this machine's "
                    f"{have / 2**30:,.0f} GiB of memory; use a smaller vocab_size",
                    f"vocab_size={vocab_size} 个词元的马尔可夫链要建 (V, V) 的 float64 表，"
                    f"大约 {need / 2**30:,.0f} GiB，超过了这台机器 {have / 2**30:,.0f} GiB "
                    f"的内存；请用更小的 vocab_size",
                )
            )
        self.vocab_size = vocab_size
        self.n_successors = n_successors
        self.seed = seed
        g = torch.Generator().manual_seed(seed)
        # A random cycle through all states guarantees every state reaches every
        # other (one stationary distribution); the other successors are random.
        order = torch.randperm(vocab_size, generator=g)
        cycle_next = torch.empty(vocab_size, dtype=torch.long)
        cycle_next[order] = order.roll(-1)
        transition = torch.zeros(vocab_size, vocab_size, dtype=torch.float64)
        for i in range(vocab_size):
            others = torch.randperm(vocab_size, generator=g)
            others = others[others != cycle_next[i]][: n_successors - 1]
            successors = torch.cat([cycle_next[i : i + 1], others])
            # Exponential weights = a flat Dirichlet: some successors likely, some rare.
            weights = (
                -torch.rand(n_successors, generator=g, dtype=torch.float64).clamp_min(1e-12).log()
            )
            transition[i, successors] = weights / weights.sum()
        self.transition = transition
        self.stationary = self._stationary(transition)
        p = transition
        plogp = torch.where(p > 0, p * p.clamp_min(1e-300).log(), torch.zeros_like(p))
        self.entropy_rate = float(-(self.stationary * plogp.sum(dim=1)).sum())
        self._cum = transition.cumsum(dim=1)  # for inverse-CDF sampling
        self._cum[:, -1] = 1.0
        self._stationary_cum = self.stationary.cumsum(0)
        self._stationary_cum[-1] = 1.0

    @staticmethod
    def table_bytes(vocab_size: int) -> int:
        """Bytes of the chain's float64 ``(V, V)`` tables: the transition table, its cumulative
        sums and the powers squared for the stationary distribution, about 4 at once."""
        return 4 * 8 * vocab_size**2

    @staticmethod
    def _stationary(transition: torch.Tensor) -> torch.Tensor:
        # pi with pi P = pi: every row of P^n tends to it. The lazy chain (P + I) / 2 has the
        # same pi and cannot oscillate; squaring it until its rows agree raises it to a power
        # 2^k. Not LAPACK's least squares, whose last bits changed from one process to the
        # next (with the alignment of its buffers, measured): the chain must be the same chain,
        # bit for bit, wherever it is built (tfcourse/train/memo.py compares it).
        V = transition.shape[0]
        power = (transition + torch.eye(V, dtype=transition.dtype)) / 2
        for _ in range(64):
            power = power @ power
            power = power / power.sum(dim=1, keepdim=True)  # rows stay distributions
            if float((power.amax(dim=0) - power.amin(dim=0)).max()) <= 1e-16:
                break
        pi = power.mean(dim=0)
        return pi / pi.sum()

    @property
    def loss_floor(self) -> float:
        return self.entropy_rate

    @property
    def unigram_entropy(self) -> float:
        """Entropy of ``stationary`` (nats): the best loss of a model that ignores the context."""
        pi = self.stationary
        return float(-(pi * pi.clamp_min(1e-300).log()).sum())

    def sample(
        self, batch_size: int, length: int, *, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """``(batch_size, length)`` long tensor of sequences, each starting from ``stationary``."""
        validate.positive_int("batch_size", batch_size)
        validate.positive_int("length", length)
        # Inverse-CDF sampling, one uniform number per token; (length, B, 1) so
        # that each step's slice is contiguous.
        u = torch.rand(length, batch_size, 1, generator=generator, dtype=torch.float64)
        out = torch.empty(batch_size, length, dtype=torch.long)
        state = torch.searchsorted(self._stationary_cum, u[0, :, 0]).clamp_max(self.vocab_size - 1)
        out[:, 0] = state
        for t in range(1, length):
            state = (
                torch.searchsorted(self._cum[state], u[t]).squeeze(1).clamp_max(self.vocab_size - 1)
            )
            out[:, t] = state
        return out

    def batch(
        self,
        batch_size: int,
        seq_len: int,
        *,
        generator: torch.Generator | None = None,
        split: str = "train",
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x, y)``, both ``(B, T)``: a sampled sequence and the same shifted by one.

        The chain is an endless source, so ``split`` only exists for the common
        protocol: use a different generator for validation batches.
        """
        _check_batch_args(batch_size, seq_len, generator, split)
        seq = self.sample(batch_size, seq_len + 1, generator=generator)
        return seq[:, :-1], seq[:, 1:]

    def transition_nll(self, seq: torch.Tensor) -> float:
        """Mean ``-log P(x_{t+1} | x_t)`` under the true chain (inf if a transition is impossible).

        ``seq`` is ``(B, L)`` with L >= 2. For sequences the chain itself produced,
        this averages to ``entropy_rate``.
        """
        seq = validate.token_ids(seq, self.vocab_size, name="seq")
        if seq.shape[1] < 2:
            shape = tuple(seq.shape)
            raise ValueError(
                say(
                    f"seq must have at least 2 tokens per row, got shape {shape}",
                    f"seq 每行至少要有 2 个词元，实际的形状是 {shape}",
                )
            )
        p = self.transition[seq[:, :-1].cpu(), seq[:, 1:].cpu()]
        return float(-p.log().mean())

    def impossible_fraction(self, seq: torch.Tensor) -> float:
        """Fraction of the transitions in ``seq (B, L)`` that the chain can never take."""
        seq = validate.token_ids(seq, self.vocab_size, name="seq")
        if seq.shape[1] < 2:
            shape = tuple(seq.shape)
            raise ValueError(
                say(
                    f"seq must have at least 2 tokens per row, got shape {shape}",
                    f"seq 每行至少要有 2 个词元，实际的形状是 {shape}",
                )
            )
        p = self.transition[seq[:, :-1].cpu(), seq[:, 1:].cpu()]
        return float((p == 0).double().mean())

    def __repr__(self) -> str:
        return (
            f"MarkovChain(vocab_size={self.vocab_size}, n_successors={self.n_successors}, "
            f"seed={self.seed}, entropy_rate={self.entropy_rate:.4f} nats)"
        )


# --------------------------------------------------------------------------- copy task


class CopyTask:
    """Copy a random string: ``a b c d | a b c d``, the task attention exists for.

    Token ``n_symbols`` is the separator, so ``vocab_size = n_symbols + 1``. A row
    of ``x`` is ``n`` random symbols, the separator, then the symbols again
    (cropped to ``seq_len + 1`` tokens before the shift), with ``n = (seq_len + 1) // 2``.
    Only the copied half is scored: its targets are fully determined by the first half
    (floor 0 nats),
    while the random half is unpredictable and gets ``IGNORE_INDEX``.

    ``batch(B, T)`` returns ``x (B, T)``, ``y (B, T)``.
    """

    def __init__(self, n_symbols: int = 16):
        validate.positive_int("n_symbols", n_symbols)
        if n_symbols < 2:
            raise ValueError(
                say(
                    f"n_symbols must be >= 2, got {n_symbols}",
                    f"n_symbols 必须 >= 2，实际是 {n_symbols}",
                )
            )
        self.n_symbols = n_symbols
        self.separator = n_symbols
        self.vocab_size = n_symbols + 1
        self.loss_floor = 0.0

    def batch(
        self,
        batch_size: int,
        seq_len: int,
        *,
        generator: torch.Generator | None = None,
        split: str = "train",
    ) -> tuple[torch.Tensor, torch.Tensor]:
        _check_batch_args(batch_size, seq_len, generator, split)
        if seq_len < 3:
            raise ValueError(
                say(
                    f"the copy task needs seq_len >= 3, got {seq_len}",
                    f"复制任务要求 seq_len >= 3，实际是 {seq_len}",
                )
            )
        n = (seq_len + 1) // 2  # 2n + 1 >= seq_len + 1 tokens: enough for x and y
        symbols = torch.randint(0, self.n_symbols, (batch_size, n), generator=generator)
        sep = torch.full((batch_size, 1), self.separator, dtype=torch.long)
        seq = torch.cat([symbols, sep, symbols], dim=1)[:, : seq_len + 1]  # (B, T + 1)
        x, y = seq[:, :-1], seq[:, 1:].clone()
        y[:, :n] = IGNORE_INDEX  # predicting a random symbol is hopeless: not scored
        return x, y

    def __repr__(self) -> str:
        return f"CopyTask(n_symbols={self.n_symbols})"


# --------------------------------------------------------------------------- real text


class CharTokenizer:
    """Character-level tokenizer: one token per distinct character, in sorted order.

    ``CharTokenizer.from_text(text)`` builds the vocabulary; ``encode(str) -> list[int]``
    and ``decode(ids) -> str`` are inverses on text made of known characters.
    """

    def __init__(self, chars):
        chars = list(chars)
        if not chars or not all(isinstance(c, str) and len(c) == 1 for c in chars):
            raise ValueError(
                say(
                    "chars must be a non-empty sequence of single characters",
                    "chars 必须是由单个字符组成的非空序列",
                )
            )
        if len(set(chars)) != len(chars):
            raise ValueError(say("chars must not repeat", "chars 中的字符不能重复"))
        self.chars = chars
        self.stoi = {c: i for i, c in enumerate(chars)}

    @classmethod
    def from_text(cls, text: str) -> CharTokenizer:
        if not isinstance(text, str) or not text:
            raise ValueError(say("text must be a non-empty str", "text 必须是非空的 str"))
        return cls(sorted(set(text)))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            got = type(text).__name__
            raise TypeError(
                say(f"encode expects a str, got {got}", f"encode 需要 str，实际是 {got}")
            )
        unknown = sorted(set(text) - self.stoi.keys())
        if unknown:
            missing = "".join(unknown)
            raise ValueError(
                say(
                    f"characters not in the vocabulary: {missing!r}",
                    f"这些字符不在词表中：{missing!r}",
                )
            )
        return [self.stoi[c] for c in text]

    def decode(self, ids) -> str:
        if isinstance(ids, torch.Tensor):
            if ids.dim() != 1:
                shape = tuple(ids.shape)
                raise ValueError(
                    say(
                        f"decode expects a 1-D sequence of ids, got shape {shape}",
                        f"decode 需要一维的 id 序列，实际的形状是 {shape}",
                    )
                )
            ids = ids.tolist()
        bad = [i for i in ids if not 0 <= int(i) < self.vocab_size]
        if bad:
            raise ValueError(
                say(
                    f"ids must be in [0, {self.vocab_size}), got {bad[:5]}",
                    f"ids 必须在 [0, {self.vocab_size}) 中，实际有 {bad[:5]}",
                )
            )
        return "".join(self.chars[int(i)] for i in ids)

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"


def train_val_split(tokens: torch.Tensor, val_fraction: float = 0.1, block: int | None = None):
    """Split a 1-D token tensor into a train part and a val part.

    Contiguous text, not random positions: validation text is text the model never
    trained on, not interleaved copies of its neighbours. Without ``block`` the val
    part is the trailing ``val_fraction``. With ``block``, the text is cut into
    blocks of that many tokens and every ``round(1 / val_fraction)``-th block (the
    last of each group) goes to val: held-out text from all over a corpus whose
    parts differ (a manual, then docstrings), not only from its end.
    """
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 1:
        got = getattr(tokens, "shape", type(tokens))
        raise ValueError(
            say(f"tokens must be a 1-D tensor, got {got}", f"tokens 必须是一维张量，实际是 {got}")
        )
    validate.probability("val_fraction", val_fraction)
    if block is None:
        n_val = round(len(tokens) * val_fraction)
        return tokens[: len(tokens) - n_val], tokens[len(tokens) - n_val :]
    validate.positive_int("block", block)
    if not val_fraction > 0:
        raise ValueError(
            say("a block split needs val_fraction > 0", "按块划分要求 val_fraction > 0")
        )
    every = max(2, round(1 / val_fraction))
    blocks = tokens.split(block)
    val = [b for i, b in enumerate(blocks) if i % every == every - 1]
    train = [b for i, b in enumerate(blocks) if i % every != every - 1]
    if not val:
        raise ValueError(
            say(
                f"{len(tokens)} tokens make fewer than {every} blocks of {block}: "
                f"nothing left for val",
                f"{len(tokens)} 个词元切不出 {every} 个长为 {block} 的块：没有留给验证集的部分",
            )
        )
    return torch.cat(train), torch.cat(val)


class TextDataset:
    """Random crops of a character-tokenized text; ``loss_floor`` is unknown (None).

    Args:
        text: the corpus; by default it comes from ``source``:
        source: ``"docstrings"`` (``stdlib_docstrings(max_chars)``) or ``"capstone"``
            (``capstone_text(max_chars)``: the reference manual's topics, then docstrings;
            ``max_chars=None`` keeps all of it).
        val_fraction: the part held out for ``split="val"``: the trailing part, or with
            ``val_block`` every ``1/val_fraction``-th block of that many characters
            (see ``train_val_split``).
    """

    def __init__(
        self,
        text: str | None = None,
        *,
        val_fraction: float = 0.1,
        max_chars: int | None = 200_000,
        source: str = "docstrings",
        val_block: int | None = None,
    ):
        validate.choice("source", source, TEXT_SOURCES)
        if text is None and source == "capstone":
            text = capstone_text(max_chars)
        self.text = stdlib_docstrings(max_chars or 200_000) if text is None else text
        self.tokenizer = CharTokenizer.from_text(self.text)
        self.vocab_size = self.tokenizer.vocab_size
        self.loss_floor = None
        tokens = torch.tensor(self.tokenizer.encode(self.text), dtype=torch.long)
        self.train, self.val = train_val_split(tokens, val_fraction, val_block)

    def batch(
        self,
        batch_size: int,
        seq_len: int,
        *,
        generator: torch.Generator | None = None,
        split: str = "train",
    ) -> tuple[torch.Tensor, torch.Tensor]:
        _check_batch_args(batch_size, seq_len, generator, split)
        data = self.train if split == "train" else self.val
        if len(data) < seq_len + 1:
            raise ValueError(
                say(
                    f"the {split} split has {len(data)} tokens, fewer than seq_len + 1 = "
                    f"{seq_len + 1}; use a shorter seq_len or more text",
                    f"{split} 划分只有 {len(data)} 个词元，少于 seq_len + 1 = {seq_len + 1}；"
                    f"请用更短的 seq_len 或更多的文本",
                )
            )
        starts = torch.randint(0, len(data) - seq_len, (batch_size,), generator=generator)
        offsets = torch.arange(seq_len + 1)
        seq = data[starts[:, None] + offsets]  # (B, T + 1)
        return seq[:, :-1], seq[:, 1:]

    def __repr__(self) -> str:
        return (
            f"TextDataset(chars={len(self.text)}, vocab_size={self.vocab_size}, "
            f"train={len(self.train)}, val={len(self.val)})"
        )


def make_dataset(name: str, **kwargs):
    """Build a dataset by name: ``"markov"``, ``"copy"`` or ``"text"`` (kwargs go to its class)."""
    validate.choice("dataset", name, DATASETS)
    return {"markov": MarkovChain, "copy": CopyTask, "text": TextDataset}[name](**kwargs)


def uniform_loss(vocab_size: int) -> float:
    """``log(V)``: the loss of a model that knows nothing (uniform over the vocabulary)."""
    validate.positive_int("vocab_size", vocab_size)
    return math.log(vocab_size)
