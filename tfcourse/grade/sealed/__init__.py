"""The sealed grader: a grade the learner's own process cannot forge.

The trusted grader process chooses the solution notebook, reads the submission as
data and runs the checks itself; for each exercise it starts a worker process
(``worker.py``, started ahead under bubblewrap: ``pool.py``, ``sandbox.py``)
that runs only the learner's code, in a file system built from nothing: the system and
Python read-only, a private ``/tmp``, no network, no course files (in a container
without namespaces: as a fresh unprivileged user that cannot read the grader's files,
``users.py``). There ``import tfcourse`` finds a sealed copy of the package (``seal.py``)
in which the reference for the exercise under test is a stub that refuses to run and the
checks are silent no-ops. The two
processes exchange tensors as safetensors (``protocol.py``) and nothing else: the
worker computes, the grader checks every reply and judges (``session.py``,
``proxy.py``). What the grader makes for a worker (a control group, ``cgroups.py``; a fresh
user; temporary folders) is removed even if the grader is killed (``undertaker.py``).
"""
