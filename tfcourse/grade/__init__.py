"""Grading: ``tfcourse grade`` and everything it needs, and nothing else.

``command`` is the command line and the class run; ``notebook`` grades one notebook
(chooses its solution, judges every exercise through ``sealed/``, the one grading path);
``records`` holds a grade's records, exercise names and points; ``references`` the two
lists of what does an exercise for the learner (sealed names, watched shortcuts);
``secret`` the grader's secret and each learner's cases; ``report``, ``untrusted`` and
``gradescope`` write the results (text, CSV, JSON, Gradescope's ``results.json``);
``autograder`` bundles the grader for Gradescope; ``progress`` is the learner's own view
(``tfcourse progress``: every exercise of a folder, judged the same way, unsealed).
Of the package it imports only ``course`` (notebooks as files) and, from
``sealed/session.py`` alone, ``checks``: the checks run in the grader while the learner's
code runs in a sandboxed worker. What is promised is in SECURITY.md.
"""
