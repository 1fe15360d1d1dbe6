"""The message of an unsolved exercise's stub, in each edition's language.

The generator writes it into every stub (``build.make_stub``); the grader and the learner's
screen recognise an unsolved exercise by it (``is_stub_message``), in either language. A
module of its own so that those readers need not import the notebook generator.
"""

from __future__ import annotations

# In every stub's message, by the notebook's language; the grader and the learner's screen
# recognise an unsolved exercise by them.
STUB_SIGNATURES = {
    "en": "replace this line with your implementation",
    "zh": "请把这一行换成你的实现",
}


def is_stub_message(text: str) -> bool:
    """Whether ``text`` holds a stub's message (of either edition)."""
    return any(signature in text for signature in STUB_SIGNATURES.values())


def stub_message(name: str, language: str = "en") -> str:
    """The text of the ``NotImplementedError`` a stub raises (names the exercise)."""
    if language == "zh":
        return f"练习 '{name}'：{STUB_SIGNATURES['zh']}"
    return f"Exercise '{name}': {STUB_SIGNATURES['en']}"
