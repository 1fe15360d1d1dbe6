"""Training: data sets that need no download, the loop, its optimizer and checkpoints, the command.

``data`` (Markov chain, copy task, stdlib text), ``bpe`` (a byte-level BPE tokenizer, from
scratch), ``optim`` (AdamW and the warmup + cosine schedule), ``loop`` (``Trainer`` and
``train``), ``memo`` (the test suite's memo of training runs), ``checkpoint`` (atomic save,
safe load), ``command`` (``tfcourse train``, also under torchrun) with ``flags`` (its flags),
``run`` (one run), ``distributed`` (torchrun's processes) and ``report`` (what a run prints).
"""
