"""The course as notebook files, and the learner's commands on them.

``notebook_format`` holds the tag and metadata conventions every wing reads; ``stubs``
the unsolved exercise's message (which the grader and the learner's screen recognise);
``installed`` finds the course inside the package or the checkout; ``restamp`` puts a
notebook's check cells back from its solution (for ``tfcourse.yours``); ``notebooks_command``
copies the learner notebooks for a learner and ``launch`` opens them in JupyterLab. It
imports nothing of the package but the shared modules (``language``, ``files``): the
grading wing (``tfcourse.grade``) and the authoring wing (``tfcourse.authoring``) build
on it.
"""
