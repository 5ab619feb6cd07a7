"""Authoring tools on top of the checker (:mod:`mkpolicy.check`): lint reports in text,
JSON, SARIF and GitHub formats, policy test suites, scaffolding (``init``), ``explain``
and ``export``."""
