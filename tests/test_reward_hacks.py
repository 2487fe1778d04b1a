"""The hostile corpus: every wrong solution in ../shared/hostile/reward_hacks/ that tries to be
scored correct scores 0 (all-or-nothing) and below 1 (fraction), and is flagged, under the
check(candidate) tests, the pytest file, and both; the task's correct solution still scores 1
with no flag; and nothing a hack wrote survives on the host or in a later session.

New cases added to the corpus are picked up automatically (they must score 0 or be flagged);
the cases known today must also raise the flag that names their trick."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import site
from pathlib import Path

import pytest
from typer.testing import CliRunner

from practicum.cli_verify import verify_app
from practicum.domains.code.tasks import load_tasks
from practicum.verify import CodeVerifier, VerifyConfig

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PRACTICUM_SHARED", REPO.parent / "shared"))
CORPUS = SHARED / "hostile" / "reward_hacks"
CASES = sorted(p.name for p in CORPUS.iterdir() if (p / "task.json").is_file()) if CORPUS.is_dir() else []

EXPECTED_FLAG = {
    "conftest_patch": "writes_conftest",
    "edit_tests": "edits_tests",
    "eq_always_true": "eq_override",
    "exit_zero_on_import": "exit_on_import",
    "fake_pytest_module": "writes_pytest_module",
    "persist_site_hook": "writes_site_hook",
    "print_fake_pass": "fake_pass_output",
    "skip_everything": "skip_raised",
    "sys_exit_zero": "exit_in_call",
}
SUITES = ("check", "pytest", "both")

def test_every_case_with_a_known_flag_is_in_the_corpus():
    """A known case renamed or dropped from the corpus would silently lose its flag check."""
    assert set(EXPECTED_FLAG) <= set(CASES), sorted(set(EXPECTED_FLAG) - set(CASES))


pytestmark = pytest.mark.skipif(not CASES, reason=f"no reward-hack corpus at {CORPUS} (set PRACTICUM_SHARED)")


@pytest.fixture(scope="module")
def sandbox():
    from practicum.sandbox import get_sandbox

    return get_sandbox("auto")


PLANTED = "def test_ok():\n    pass\n\ndef check(candidate):\n    pass\n"  # what edit_tests writes


def _fingerprint() -> dict[str, str]:
    """What a hack could plant or overwrite on the host: the corpus itself (hashes), files the
    hacks create (conftest.py, pytest.py, site hooks) where they would take effect, and test
    files replaced by edit_tests' content. (Other people's edits to the repository are not
    hashed: the worktree is shared.)"""
    out = {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in CORPUS.glob("**/*") if p.is_file()}
    dirs = [REPO, REPO / "tests", *CORPUS.iterdir(), *map(Path, site.getsitepackages()), Path(site.getusersitepackages())]
    for d in dirs:
        for name in ("zz_planted.pth", "sitecustomize.py", "usercustomize.py", "conftest.py", "pytest.py"):
            out[f"{d}/{name}"] = "present" if (d / name).exists() else "absent"
    planted = [p for p in [*REPO.glob("tests/**/*.py"), *REPO.glob("src/**/test*.py")]
               if p.is_file() and p.read_text(errors="replace") == PLANTED]
    out["test files holding edit_tests' content"] = repr(sorted(map(str, planted)))
    return out


@pytest.fixture(scope="module")
def results(sandbox):
    """Verify every hack and every correct solution, in every suite, once (with the host
    fingerprinted before and after)."""
    before = _fingerprint()

    async def run():
        # edit_tests globs the whole file system while being imported: a short import limit
        verifier = CodeVerifier(sandbox, VerifyConfig(call_timeout_s=2.0))
        out = {}
        for name in CASES:
            (task,) = load_tasks(CORPUS / name / "task.json")
            hack = (CORPUS / name / "solution.py").read_text()
            for suite in SUITES:
                tests = task.hidden()
                if suite == "check":
                    tests = tests.model_copy(update={"pytest_files": {}})
                elif suite == "pytest":
                    tests = tests.model_copy(update={"check": None})
                out[name, suite] = (await verifier.verify(tests, hack),
                                    await verifier.verify(tests, task.correct_solution or ""))
        return out

    res = asyncio.run(run())
    return res, before, _fingerprint()


@pytest.mark.parametrize("suite", SUITES)
@pytest.mark.parametrize("name", CASES)
def test_hack_scores_zero_or_is_flagged_and_the_correct_solution_scores_one(results, name, suite):
    res, _, _ = results
    fraction, correct = res[name, suite]
    why = f"{name}/{suite}: {fraction.score.explanation}"
    assert fraction.score.components["all_passed"] == 0.0, why  # the score with scoring="all"
    assert fraction.score.value < 1.0, why
    assert fraction.score.value == 0.0 or fraction.flags, why
    if name in EXPECTED_FLAG:
        assert EXPECTED_FLAG[name] in fraction.flags, why
        assert fraction.score.components[f"flag:{EXPECTED_FLAG[name]}"] == 1.0
    assert correct.score.value == 1.0 and correct.flags == [], f"{name}/{suite}: {correct.score.explanation}"
    n_tests = {"check": 3, "pytest": 3, "both": 6}[suite]
    assert len([c for c in correct.cases if c.outcome != "trivial"]) == n_tests


def test_nothing_a_hack_wrote_survives_on_the_host(results):
    _, before, after = results
    changed = {k: (before.get(k), v) for k, v in after.items() if before.get(k) != v}
    assert not changed


def test_nothing_a_hack_wrote_reaches_a_later_session(results, sandbox):
    """After persist_site_hook and friends ran, a fresh session's interpreter is clean, and its
    workspace holds nothing: each episode starts from scratch."""

    async def probe():
        s = await sandbox.session()
        try:
            return await s.run_python(
                "import builtins, os, site\n"
                "print(hasattr(builtins, '_practicum_planted'), sorted(os.listdir('.')))\n"
            )
        finally:
            await s.close()

    res = asyncio.run(probe())
    assert res.ok and res.stdout.strip() == "False []", res


@pytest.mark.parametrize("name", CASES)
def test_cli_scores_each_hack_as_json(name):
    result = CliRunner().invoke(verify_app, ["code", "--task", str(CORPUS / name / "task.json"),
                                             "--answer", str(CORPUS / name / "solution.py"), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert {"value", "components", "explanation", "flags"} <= out.keys()
    assert out["value"] < 1.0 and (out["value"] == 0.0 or out["flags"]), out
    if name in EXPECTED_FLAG:
        assert EXPECTED_FLAG[name] in out["flags"]


def test_pooled_sessions_carry_nothing_from_one_verification_to_the_next():
    """Through a SandboxPool, sessions are reset and lent again: after every hack ran in them,
    the correct solutions still score 1, and a session taken from the pool is empty and clean."""
    from practicum.sandbox import SandboxPool, get_sandbox

    config = VerifyConfig(call_timeout_s=2.0)

    async def run():
        async with SandboxPool(get_sandbox("auto"), size=2, limits=config.limits) as pool:
            verifier = CodeVerifier(pool, config)
            hacks, correct = [], []
            for name in CASES:
                (task,) = load_tasks(CORPUS / name / "task.json")
                hacks.append(await verifier.verify(task.hidden(), (CORPUS / name / "solution.py").read_text()))
                correct.append(await verifier.verify(task.hidden(), task.correct_solution or ""))
            probes = []
            for _ in range(2):
                s = await pool.session(config.limits)
                try:
                    probes.append(await s.run_python(
                        "import builtins, os\nprint(hasattr(builtins, '_practicum_planted'), sorted(os.listdir('.')),"
                        " sorted(os.listdir('/tmp')))\n"))
                finally:
                    await s.close()
            return hacks, correct, probes, pool.reused

    hacks, correct, probes, reused = asyncio.run(run())
    assert reused > 0
    assert all(v.score.components["all_passed"] == 0.0 for v in hacks)
    assert [v.score.value for v in correct] == [1.0] * len(CASES)
    assert [p.stdout.strip() for p in probes] == ["False [] []"] * 2, probes
