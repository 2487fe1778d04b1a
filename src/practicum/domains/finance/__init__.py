"""The ``finance`` domain: questions over a company's financial statements, checked with units.

Statements of several fiscal years (income statement, balance sheet, cash flows) are generated so
that the accounting identities hold (:mod:`.statements`), headed by a real company's name,
ticker and SEC CIK (:mod:`.companies`), and printed as the text tables a model reads
(:mod:`.render`). Questions (:mod:`.questions`) need calculation: margins, ratios, growth,
working capital, covenant tests under a credit agreement's definitions, NPV/IRR/annuity figures
(numpy-financial is the ground truth), and planted inconsistencies. The verifier
(:mod:`.verifier`) reads numbers with their units, scale words, percent signs, signs and the
stated rounding, with partial credit by rubric for multi-part answers. Tasks also come from
files or expert-annotated files (:mod:`.tasks`, through :mod:`practicum.domains.annotations`).
docs/finance.md documents the options, the scoring rules and the task file format of
``practicum verify finance``.
"""

from practicum.domains.finance.options import FinanceOptions
from practicum.domains.finance.plugin import FinancePlugin, plugin
from practicum.domains.finance.verifier import AnswerKey, Part, check

__all__ = ["AnswerKey", "FinanceOptions", "FinancePlugin", "Part", "check", "plugin"]
