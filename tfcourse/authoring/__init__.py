"""Authoring: the tools that make the course, which no learner's command imports.

``build`` generates learner notebooks from the solutions (``tfcourse build-notebooks``),
``translation`` and ``glossary`` keep the Chinese edition in step, ``run`` executes a
notebook cell by cell and ``execute`` refreshes stored outputs with it (``sanitize``
rewrites machine-specific text in them), ``site`` (with ``site_languages`` and
``offline``) builds the HTML course. Of the package it imports only ``course``
(notebooks as files).
"""
