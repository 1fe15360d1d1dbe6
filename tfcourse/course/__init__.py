"""The course tooling: notebooks as files, not models.

``build`` generates learner notebooks from solutions, ``run`` executes a notebook cell by
cell, ``execute`` refreshes stored outputs, ``restamp`` puts check cells back, ``grade``
grades submissions (every exercise through ``sealed/``, the one grading path), ``scan``,
``references`` and ``secret`` serve it, ``report``, ``untrusted`` and ``gradescope`` write
its results, ``sanitize`` rewrites machine-specific text, ``notebook_format`` holds the tag
and metadata conventions, ``launch`` opens JupyterLab, ``site`` builds the HTML course.
Nothing here imports ``tfcourse.nn``, ``tfcourse.lab`` or ``tfcourse.train``; the one
import of ``tfcourse.checks`` is the sealed grader's (``sealed/session.py``), which runs
the checks in the grader while the learner's code runs in a sandboxed worker.
"""
