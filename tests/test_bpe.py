"""Byte-level BPE (tfcourse.train.bpe): exact round trips, deterministic training, and the
same ids as Hugging Face ``tokenizers`` given the same merges (an independent
implementation of the same algorithm)."""

from __future__ import annotations

import json

import pytest

from tfcourse.train.bpe import N_BYTES, ByteBPE
from tfcourse.train.corpus import capstone_text

TEXTS = [
    "",
    "def forward(self, x):\n    return x @ self.weight.T  # (B, T, D)\n",
    "注意力机制让每个词元都能看到前面的词元。Attention, 混合 text 与中文！",
    "emoji 🙂👍🏽, accents: naïve café, tabs\tand  double  spaces,   and trailing   ",
    "numbers 3.14159 and 1,000,000; quotes 'single' \"double\" it's we'll they've",
]


@pytest.fixture(scope="module")
def corpus() -> str:
    return capstone_text()


@pytest.fixture(scope="module")
def trained(corpus) -> ByteBPE:
    return ByteBPE.train(corpus[:60_000], 300)


def test_a_classic_example_merges_the_most_frequent_pair_first():
    bpe = ByteBPE.train("aaabdaaabac", 3)
    a, b = ord("a"), ord("b")
    # "aa" occurs 4 times (overlapping); then "aa"+"a" and "ab" twice each: the smaller pair
    # wins the tie; then "aa"+"ab", twice.
    assert bpe.merges == [(a, a), (a, b), (N_BYTES, N_BYTES + 1)]
    assert bpe.encode("aaab") == [N_BYTES + 2]
    assert bpe.encode("aaabdaaabac") == [N_BYTES + 2, ord("d"), N_BYTES + 2, a, ord("c")]
    assert bpe.decode(bpe.encode("aaabdaaabac")) == "aaabdaaabac"


@pytest.mark.parametrize("text", TEXTS)
def test_every_text_round_trips_exactly(trained, text):
    ids = trained.encode(text)
    assert trained.decode(ids) == text
    assert all(0 <= i < trained.vocab_size for i in ids)


def test_merges_compress_and_never_cross_a_chunk(trained, corpus):
    held_out = corpus[-20_000:]
    ids = trained.encode(held_out)
    assert len(ids) < 0.7 * len(held_out.encode("utf-8"))
    pieces = [trained.token_bytes(i) for i in ids]
    # a token is a word with its leading space, or a piece of one: never "x." or "a b"
    assert not any(p.strip() and b" " in p.strip() for p in pieces)


def test_training_is_deterministic_and_rebuilds_from_its_merges(corpus, trained):
    again = ByteBPE.train(corpus[:60_000], 300)
    assert again.merges == trained.merges and len(trained.merges) == 300
    rebuilt = ByteBPE(trained.merges)
    assert rebuilt.encode(corpus[-5000:]) == trained.encode(corpus[-5000:])


def test_a_sequence_cut_inside_a_character_decodes_with_a_replacement(trained):
    ids = ByteBPE([]).encode("中")  # three bytes, three ids
    assert len(ids) == 3 and ByteBPE([]).decode(ids[:2]) == "\ufffd"


def test_bad_input_gets_a_clear_error():
    with pytest.raises(ValueError, match=r"merges\[1\] must be a pair of ids below 257"):
        ByteBPE([(97, 98), (257, 1)])
    with pytest.raises(ValueError, match="n_merges must be an int >= 0"):
        ByteBPE.train("abc", -1)
    with pytest.raises(TypeError, match="text must be a str"):
        ByteBPE([]).encode(b"bytes")
    with pytest.raises(ValueError, match=r"token must be an id in \[0, 256\)"):
        ByteBPE([]).decode([256])


# ------------------------------------------------------------------ against Hugging Face


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in character for each byte, as byte-level vocabularies
    (Hugging Face's ByteLevel among them) write tokens."""
    keep = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    shifted = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in shifted:
            shifted[b] = chr(256 + extra)
            extra += 1
    return shifted


def _huggingface(bpe: ByteBPE):
    tokenizers = pytest.importorskip("tokenizers")
    stand_in = _bytes_to_unicode()

    def spelled(token: int) -> str:
        return "".join(stand_in[b] for b in bpe.token_bytes(token))

    vocab = {spelled(i): i for i in range(bpe.vocab_size)}
    merges = [(spelled(a), spelled(b)) for a, b in bpe.merges]
    tokenizer = tokenizers.Tokenizer(tokenizers.models.BPE(vocab=vocab, merges=merges))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(
        add_prefix_space=False, use_regex=True
    )
    tokenizer.decoder = tokenizers.decoders.ByteLevel()
    return tokenizer


def test_the_same_merges_give_the_same_ids_in_hugging_face_tokenizers(trained, corpus):
    theirs = _huggingface(trained)
    for text in [*TEXTS, corpus[-20_000:]]:
        ours = trained.encode(text)
        assert theirs.encode(text).ids == ours, text[:60]
        assert theirs.decode(ours) == text


def _trained_by_hugging_face(text: str, n_merges: int):
    """Hugging Face's own byte-level BPE trainer on ``text``: its tokenizer, and its merges
    as byte strings."""
    tokenizers = pytest.importorskip("tokenizers")
    tokenizer = tokenizers.Tokenizer(tokenizers.models.BPE())
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(
        add_prefix_space=False, use_regex=True
    )
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=256 + n_merges,
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator([text], trainer=trainer)
    to_byte = {c: b for b, c in _bytes_to_unicode().items()}
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    pairs = [m.split(" ") if isinstance(m, str) else m for m in merges]
    return tokenizer, [tuple(bytes(to_byte[c] for c in half) for half in pair) for pair in pairs]


def test_merges_that_hugging_face_learned_encode_alike_in_both(corpus):
    """Independent training: Hugging Face's trainer learns its own merges (its ties may break
    otherwise than ours); given those merges, the course's encoding cuts every text into the
    same tokens as Hugging Face's own tokenizer does."""
    theirs, learned = _trained_by_hugging_face(corpus[:60_000], 300)
    ids = {bytes([b]): b for b in range(256)}
    merges = []
    for left, right in learned:
        merges.append((ids[left], ids[right]))
        ids[left + right] = 255 + len(merges)
    ours = ByteBPE(merges)
    stand_in = _bytes_to_unicode()
    for text in [*TEXTS, corpus[-20_000:]]:
        pieces = [ours.token_bytes(t) for t in ours.encode(text)]
        spelled = ["".join(stand_in[b] for b in piece) for piece in pieces]
        assert theirs.encode(text).tokens == spelled, text[:60]
    assert len(merges) > 200  # most of what was asked for was learned
