"""What the notebooks show: widgets, plots, gradient probes, timing, production demos.

Built on ``tfcourse.nn``. Notebooks reach these as ``tc.widgets``, ``tc.plots``,
``tc.probes``, ``tc.timing`` and ``tc.production`` (see ``tfcourse/__init__.py``).
"""
