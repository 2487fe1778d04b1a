"""Verifiers that run outside anything the model could write. See :mod:`practicum.verify.code`."""

from practicum.verify.code import CaseResult, CodeTests, CodeVerifier, Verdict, VerifyConfig, assemble
from practicum.verify.flags import FLAGS, static_flags

__all__ = ["FLAGS", "CaseResult", "CodeTests", "CodeVerifier", "Verdict", "VerifyConfig", "assemble", "static_flags"]
