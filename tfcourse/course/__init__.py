"""The course tooling: notebooks as files, not models.

``build`` generates learner notebooks from solutions, ``run`` executes a
notebook cell by cell, ``execute`` refreshes stored outputs, ``restamp`` puts
check cells back, ``grade`` grades submissions, ``sanitize`` rewrites
machine-specific text, ``notebook_format`` holds the tag and metadata
conventions, ``launch`` opens JupyterLab. Nothing here imports ``tfcourse.nn``,
``tfcourse.lab`` or ``tfcourse.train``: grading loads the checks by name, inside
the notebook's own kernel.
"""
