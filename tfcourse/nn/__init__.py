"""The reference model: attention, norms, MLPs, positions, the block, the GPT and its config.

This wing imports no other part of ``tfcourse``: it is the model and nothing else,
so the checks, the lab and the trainer can all build on it. Every public module
takes and returns ``(batch, seq, d_model)`` tensors and validates its input
(``validate``) with a ``ValueError``/``TypeError`` that names what it expected.
Validation happens once, at the entry point: inside ``GPT.forward`` (or a block
called directly) the inner layers skip the checks already made.
"""
