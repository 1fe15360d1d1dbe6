"""The course tooling: notebooks as files, not models.

``build`` generates learner notebooks from solutions (``stubs`` holds the unsolved
exercise's message, which the grader and the learner's screen recognise), ``translation``
and ``glossary`` keep the Chinese edition in step, ``run`` executes a notebook cell by
cell, ``execute`` refreshes stored outputs, ``restamp`` puts check cells back (for
``tfcourse.yours``), ``grade`` grades submissions (every exercise through ``sealed/``,
the one grading path) and ``grade_command`` is its command line (``progress`` the
learner's: every exercise of a folder), ``judge`` holds a grade's records,
``references`` and ``secret`` serve it, ``report``, ``untrusted`` and ``gradescope`` write
its results, ``autograder`` bundles it for Gradescope, ``sanitize`` rewrites
machine-specific text, ``notebook_format`` holds the tag and metadata conventions,
``installed`` finds the course inside the package or the checkout, ``notebooks_command``
copies its learner notebooks for a learner, ``launch`` opens JupyterLab, ``site`` (with
``site_languages`` and ``offline``) builds the HTML course. Nothing here imports
``tfcourse.nn``, ``tfcourse.lab`` or ``tfcourse.train``; the one import of
``tfcourse.checks`` is the sealed grader's (``sealed/session.py``), which runs the checks
in the grader while the learner's code runs in a sandboxed worker.
"""
