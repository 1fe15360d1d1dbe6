"""The course's version: the one source (pyproject.toml reads it; notebooks stamp it).

A module of its own, importing nothing, so that whatever needs the version (the first
cell's check, ``tfcourse --version``, ``tfcourse doctor``) does not import the package's
public face, which loads every wing on demand.
"""

__version__ = "0.1.0"
