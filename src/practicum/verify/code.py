"""The code verifier: scores a solution against hidden tests, and cannot be talked into a pass.

Design (threat model below)::

    host (trusted)                 session A (solution)            session B (grader, fresh)
    ──────────────                 ────────────────────            ─────────────────────────
    static flags from the AST
    round 0 (cached per task) ─────────────────────────────────►  harness: which calls do the
                                                                   tests make? (no solution yet)
    calls ───────────────────────► worker: import solution.py,
                                   answer each call, plain data
    results (validated) ───────────────────────────────────────►  harness: run every case with
    ◄──────────────────────────────────────────────────────────── the results; report (JSON)
    (repeat while a case needs results that depend on earlier ones)
    score = passed / counted cases; flags from source + worker

* The hidden tests never enter session A, where the solution runs; they run afterwards in a
  fresh session B that never holds the solution's code or anything it wrote. (Fresh: newly
  started, or taken from a SandboxPool that reset it — every writable folder emptied, no process
  left, and nothing of an earlier execution in memory, see docs/sandbox.md; the harness reads
  nothing from its file system but the standard library.) Sessions B come from their own pool
  (``graders``), so a session that held hidden tests never runs a solution or a tool call.
* The solution and the tests never share a process. The worker sends return values as tagged
  JSON; the harness rebuilds them as exact builtin types (codec.py), so ``==`` in a test is the
  interpreter's own, never an ``__eq__`` the solution wrote.
* The outcome is the harness's structured report, read from a private file descriptor, with a
  nonce; never an exit code or anything the solution (or a test) printed.
* The harness loads no plugins, conftest files or modules from any workspace: it runs the tests
  with its own small runner, with the workspace removed from ``sys.path``.
* A worker that exits, hangs or crashes answers nothing (``NoAnswer`` in the harness, which no
  ``except Exception`` in a test catches), so every case that needed it fails; all the worker
  processes of one verification share a time budget.
  Writing outside the workspace is the sandbox's to prevent (read-only system folders, a
  private workspace per session); this module's tests check that nothing persists.

Limits: solutions are called as functions of plain data (None, bool, int, float, complex, str,
bytes, list, tuple, dict, set); a call's effect on its arguments, or state kept between calls
in different rounds, is not seen by the tests. Identical calls get one result.
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import json
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from practicum.errors import SandboxError, VerifierFailure
from practicum.records import Score
from practicum.sandbox import shipped
from practicum.sandbox.base import ExecResult, Limits, SandboxSession
from practicum.verify import codec
from practicum.verify.flags import FLAGS, behaviour_flags, static_flags

Outcome = Literal["passed", "failed", "error", "timeout", "skipped", "trivial", "incomplete"]


class CodeTests(BaseModel):
    """The hidden part of a code task: what the verifier needs, and the model never sees."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    entry_point: str = Field(..., description="Name of the function the solution must define.")
    prompt_code: str | None = Field(None, description="The prompt, when it is Python: run before the tests so "
                                    "that helpers it defines are available to them (HumanEval).")
    check: str | None = Field(None, description="Source defining check(candidate) with assert statements.")
    pytest_files: dict[str, str] = Field(default_factory=dict, description="Pytest-style test files: name -> source.")
    module: str = Field("solution", description="Module name the pytest files import the solution as.")

    def digest(self) -> str:
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()


class SessionOpener(Protocol):
    """A Sandbox or a SandboxPool: anything that opens fresh sessions, and is closed by its owner
    (the verifier never closes the openers it is given)."""

    async def session(self, limits: Limits | None = None) -> SandboxSession: ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class VerifyConfig:
    scoring: Literal["fraction", "all"] = "fraction"  # passed fraction, or 1 only when every case passes
    call_timeout_s: float = 5.0  # one call of the solution (and its import)
    case_timeout_s: float = 5.0  # one hidden test case in the harness
    exec_timeout_s: float = 30.0  # one worker or harness process
    solution_budget_s: float = 60.0  # all the solution's worker processes of one verification together
    memory_mb: int = 1024
    max_rounds: int = 6  # harness runs after round 0; a nested call costs one
    max_worker_restarts: int = 3  # fresh worker processes after a crash or timeout, per round
    output_bytes: int = 8 * 1024 * 1024  # channel size per process

    @property
    def limits(self) -> Limits:
        """Limits of the verifier's sessions (a SandboxPool given these keeps them warm)."""
        return Limits(timeout_s=self.exec_timeout_s, cpu_s=self.exec_timeout_s, memory_mb=self.memory_mb,
                      output_bytes=self.output_bytes)


@dataclass
class CaseResult:
    id: str
    label: str
    outcome: Outcome
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"


@dataclass
class Verdict:
    """Everything one verification found. ``score`` is what training uses."""

    score: Score
    flags: list[str]
    cases: list[CaseResult]
    rounds: int = 0
    calls: int = 0
    seconds: float = 0.0
    solution_output: str = ""  # what the solution printed (its stderr and redirected stdout), capped

    def to_json(self) -> dict[str, Any]:
        return {
            "value": self.score.value,
            "components": self.score.components,
            "explanation": self.score.explanation,
            "flags": self.flags,
            "cases": [{"id": c.id, "label": c.label, "outcome": c.outcome, "detail": c.detail} for c in self.cases],
            "rounds": self.rounds,
            "calls": self.calls,
            "seconds": round(self.seconds, 4),
        }


def sandbox_script(name: str) -> str:
    """codec.py + ``name``.py as one standalone program (see :mod:`practicum.sandbox.shipped`)."""
    return shipped.script("practicum.verify.codec", f"practicum.verify.{name}")


# what compiling a reply can raise: bad syntax, null bytes or lone surrogates (ValueError), and an
# expression nested past the compiler's depth (RecursionError, MemoryError)
NOT_PYTHON = (SyntaxError, ValueError, RecursionError, MemoryError)


def _compiles(source: str) -> bool:
    try:
        compile(source, "<solution>", "exec")
    except NOT_PYTHON:
        return False
    return True


def assemble(answer: str, tests: CodeTests) -> tuple[str, str | None]:
    """The module the worker imports, and a syntax error message when there is none.

    A full solution is placed after the prompt's code (so the prompt's imports and helpers
    exist and the solution's definitions replace its stub); a function body continues the
    prompt (HumanEval completions), indented if it was not.
    """
    prompt = tests.prompt_code
    if _compiles(answer):
        return (f"{prompt.rstrip()}\n\n\n{answer}" if prompt else answer), None
    if prompt:
        for body in (answer, _indent(answer)):
            candidate = prompt + body
            if _compiles(candidate):
                return candidate, None
    try:
        compile(answer, "solution.py", "exec")
    except NOT_PYTHON as e:
        line = getattr(e, "lineno", None)
        return answer, f"the answer is not valid Python: {type(e).__name__}: {getattr(e, 'msg', e)}" + (
            f" (line {line})" if line else "")
    return answer, None


def unimplemented(source: str, entry_point: str) -> bool:
    """True when the module's last top-level definition of ``entry_point`` is a stub: only a
    docstring, imports, ``pass``, ``...`` or ``raise NotImplementedError`` (the prompt sent back)."""
    try:
        tree = ast.parse(source)
    except NOT_PYTHON:
        return False
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == entry_point]
    others = [n for n in tree.body if entry_point in _bound_names(n) and not isinstance(n, ast.FunctionDef)]
    if not defs or (others and others[-1].lineno > defs[-1].lineno):
        return False
    for stmt in defs[-1].body:
        if isinstance(stmt, (ast.Pass, ast.Import, ast.ImportFrom)) or (
            isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
        ):
            continue
        if isinstance(stmt, ast.Raise) and "NotImplementedError" in ast.dump(stmt):
            continue
        return False
    return True


def _bound_names(node: ast.stmt) -> set[str]:
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
        elif isinstance(n, (ast.ClassDef, ast.AsyncFunctionDef)):
            out.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in n.names)
    return out


def _indent(code: str) -> str:
    return "".join(("    " + ln if ln.strip() else ln) for ln in code.splitlines(keepends=True))


@dataclass
class _WorkerState:
    deadline: float  # time.monotonic() after which the solution gets no more worker time
    import_error: str | None = None  # why the solution could not be imported (then nothing is re-run)
    writes: list[str] = field(default_factory=list)
    spawned: bool = False
    flags: set[str] = field(default_factory=set)
    output: str = ""
    calls: int = 0
    workspace: str | None = None


class CodeVerifier:
    """Scores answers to code tasks in sandbox sessions.

    Session A (the solution) comes from ``sandbox``, session B (the hidden tests) from
    ``graders`` (default: ``sandbox``). With pools, give graders a pool of their own, as training
    does (:func:`practicum.domains.code.env.code_verifier`): a pooled session that once held hidden
    tests is then never lent to a solution or to the ``python`` tool, even after its reset.
    """

    def __init__(self, sandbox: SessionOpener, config: VerifyConfig | None = None, cache_size: int = 4096, *,
                 graders: SessionOpener | None = None) -> None:
        self.sandbox = sandbox
        self.graders = graders if graders is not None else sandbox
        self.config = config or VerifyConfig()
        self._round0: OrderedDict[str, asyncio.Future[dict[str, Any]]] = OrderedDict()
        self._cache_size = cache_size

    @property
    def limits(self) -> Limits:
        return self.config.limits

    async def verify(self, tests: CodeTests, answer: str) -> Verdict:
        t0 = time.perf_counter()
        answer = answer.encode("utf-8", "replace").decode("utf-8")  # a lone surrogate (no UTF-8 holds one): "?"
        source, syntax_error = assemble(answer, tests)
        flags = static_flags(answer)
        if syntax_error or not answer.strip() or unimplemented(source, tests.entry_point):
            why = syntax_error or (f"the answer does not implement {tests.entry_point}()" if answer.strip()
                                   else "the answer holds no code")
            return self._verdict([], flags, why, 0, 0, t0, "")
        state = _WorkerState(deadline=time.monotonic() + self.config.solution_budget_s)
        try:
            report, rounds = await self._run(tests, source, state)
        except SandboxError as e:  # a session died or was refused: this episode's verifier failed
            raise VerifierFailure(f"sandbox failure while verifying: {e}") from e
        cases = [CaseResult(c["id"], c["label"], c["outcome"], c.get("detail", "")) for c in report["cases"]]
        for c in cases:
            if c.outcome == "incomplete":
                c.outcome, c.detail = "error", f"still needed results after {rounds} rounds"
        flags |= state.flags
        flags |= behaviour_flags(state.writes, state.spawned, state.output, state.workspace)
        return self._verdict(cases, flags, state.import_error, rounds, state.calls, t0, state.output)

    async def _run(self, tests: CodeTests, source: str, state: _WorkerState) -> tuple[dict[str, Any], int]:
        """Rounds of worker and harness until every case has the results it needs."""
        harness = _Harness(self, tests)
        memo: dict[str, Any] = {}
        rounds = 0
        # Two fresh sessions: A holds only the solution (and its worker), B only the grader.
        session_a, session_b = await self._open_two()
        async with session_a, session_b:
            await session_a.write_file("solution.py", source)
            report = await self._round_zero(tests, harness, session_b)
            pending = report["pending"]
            while pending and rounds < self.config.max_rounds:
                memo.update(await self._run_worker(session_a, tests, pending, state))
                report = await harness.run(session_b, memo)
                rounds += 1
                asked = [c for c in report["pending"] if codec.call_key(*c) not in memo]
                if report["pending"] and not asked:
                    raise VerifierFailure("the harness asked again for calls it already has results for")
                pending = asked
        return report, rounds

    async def _open_two(self) -> tuple[SandboxSession, SandboxSession]:
        opened = await asyncio.gather(self.sandbox.session(self.limits), self.graders.session(self.limits),
                                      return_exceptions=True)
        failed = [x for x in opened if isinstance(x, BaseException)]
        if failed:
            for x in opened:
                if isinstance(x, SandboxSession):
                    await x.close()
            raise failed[0]
        return opened[0], opened[1]  # type: ignore[return-value]

    async def _round_zero(self, tests: CodeTests, harness: _Harness, session: SandboxSession) -> dict[str, Any]:
        """The harness with no results: which calls the tests make first. It depends only on the
        task, so it is computed once per task (in the first verification's session B) and shared
        by the verifications that wait for it."""
        key = tests.digest()
        loop = asyncio.get_running_loop()
        known = self._round0.get(key)
        if known is not None and known.get_loop() is loop:
            self._round0.move_to_end(key)
            try:
                return await asyncio.shield(known)
            except asyncio.CancelledError:
                if not known.cancelled():
                    raise  # this verification was cancelled
                # the verification computing it was cancelled: compute it here
        fut: asyncio.Future[dict[str, Any]] = loop.create_future()
        self._round0[key] = fut
        while len(self._round0) > self._cache_size:
            self._round0.popitem(last=False)
        try:
            report = await harness.run(session, {})
            if report["errors"]:
                raise VerifierFailure("the hidden tests cannot be loaded: " + "; ".join(report["errors"]))
        except BaseException as e:
            if self._round0.get(key) is fut:
                del self._round0[key]
            if isinstance(e, VerifierFailure):
                fut.set_exception(e)  # waiters fail the same way
                fut.exception()  # (marked retrieved: each waiter raises it itself)
            else:
                fut.cancel()  # waiters compute it themselves
            raise
        fut.set_result(report)
        return report

    async def _run_worker(self, session: SandboxSession, tests: CodeTests, calls: list[list[Any]],
                          state: _WorkerState) -> dict[str, Any]:
        """Results of ``calls`` (memo entries by call key), from as many worker processes as it takes."""
        keys = [codec.call_key(*c) for c in calls]
        results: dict[str, Any] = {}
        if state.import_error is not None:
            return {k: {"fail": state.import_error} for k in keys}
        todo = list(range(len(calls)))
        for _ in range(self.config.max_worker_restarts + 1):
            left = state.deadline - time.monotonic()
            if left <= 0:
                break
            request = {"file": "solution.py", "module": tests.module, "calls": [calls[i] for i in todo],
                       "call_timeout": self.config.call_timeout_s}
            res = await session.run_python(sandbox_script("worker"), stdin=json.dumps(request),
                                           timeout_s=min(self.config.exec_timeout_s, left))
            if res.status == "error":  # the sandbox could not start it: not the solution's doing
                raise VerifierFailure(f"the sandbox could not run the solution's worker: {res.detail}")
            state.output = (state.output + res.stderr)[-20_000:]
            ready, answered = self._read_worker(res, len(todo), state)
            state.calls += len(answered)
            if not ready:
                state.import_error = state.import_error or _died(res, "while importing the solution")
                if state.import_error.startswith("the solution's process exited"):
                    state.flags.add("exit_on_import")
                for i in todo:
                    results[keys[i]] = {"fail": state.import_error}
                return results
            for j, result in answered.items():
                results[keys[todo[j]]] = result
            missing = [j for j in range(len(todo)) if j not in answered]
            if not missing:
                return results
            # The worker stopped during call missing[0]: that call fails; the rest get a new worker.
            why = _died(res, "during this call")
            if why.startswith("the solution's process exited"):
                state.flags.add("exit_in_call")
            results[keys[todo[missing[0]]]] = {"fail": why}
            todo = [todo[j] for j in missing[1:]]
            if not todo:
                return results
        for i in todo:
            results[keys[i]] = {"fail": "not run: the solution used up its time" if time.monotonic() >= state.deadline
                                else "not run: the solution's process kept failing"}
        return results

    @staticmethod
    def _read_worker(res: ExecResult, n: int, state: _WorkerState) -> tuple[bool, dict[int, Any]]:
        """Parse the worker's channel defensively: the solution may have written anything to it."""
        ready = False
        answered: dict[int, Any] = {}
        for line in res.stdout.splitlines():
            try:
                msg = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if not isinstance(msg, dict):
                continue
            ev = msg.get("ev")
            if ev == "ready":
                ready = True
                if isinstance(msg.get("cwd"), str):
                    state.workspace = msg["cwd"]
            elif ev == "import_error":
                kind, text = str(msg.get("type", "")), str(msg.get("msg", ""))[:300]
                state.import_error = f"importing the solution raised {kind}: {text}"
                if kind in ("SystemExit", "KeyboardInterrupt"):
                    state.flags.add("exit_on_import")
                if "Skip" in kind or kind in ("XFailed", "Exit"):
                    state.flags.add("skip_raised")
            elif ev == "write" and isinstance(msg.get("path"), str) and len(state.writes) < 256:
                state.writes.append(msg["path"])
            elif ev == "spawn":
                state.spawned = True
            elif ev == "eq_override":
                state.flags.add("eq_override")
            elif isinstance(msg.get("id"), int) and 0 <= msg["id"] < n and msg["id"] not in answered:
                answered[msg["id"]] = _checked_result(msg, state)
        return ready, answered

    def _verdict(self, cases: list[CaseResult], flags: set[str], failure: str | None, rounds: int, calls: int,
                 t0: float, output: str) -> Verdict:
        counted = [c for c in cases if c.outcome != "trivial"]
        passed = sum(c.passed for c in counted)
        frac = passed / len(counted) if counted else 0.0
        all_passed = bool(counted) and passed == len(counted)
        value = frac if self.config.scoring == "fraction" else float(all_passed)
        comps: dict[str, float] = {"pass_rate": frac, "all_passed": float(all_passed)}
        comps.update({f"test:{c.id}": float(c.passed) for c in counted})
        comps.update({f"flag:{f}": 1.0 for f in sorted(flags)})
        parts = [f"{passed}/{len(counted)} hidden tests passed"] if counted else ["no hidden test ran the solution"]
        if failure:
            parts.append(failure)
        bad = [c for c in counted if not c.passed]
        for c in bad[:3]:
            parts.append(f"{c.id} `{c.label}`: {c.outcome}" + (f" ({c.detail})" if c.detail else ""))
        if len(bad) > 3:
            parts.append(f"... {len(bad) - 3} more not passed")
        if flags:
            parts.append("flags: " + "; ".join(f"{f} ({FLAGS.get(f, '')})" for f in sorted(flags)))
        score = Score(value=value, components=comps, explanation="; ".join(parts))
        return Verdict(score, sorted(flags), cases, rounds, calls, time.perf_counter() - t0, output[-4000:])


class _Harness:
    """Runs harness rounds for one verification, in its session B."""

    def __init__(self, verifier: CodeVerifier, tests: CodeTests) -> None:
        self.v = verifier
        suites: list[dict[str, Any]] = []
        if tests.check is not None:
            suites.append({"kind": "check", "name": "check", "source": tests.check, "prompt": tests.prompt_code,
                           "entry_point": tests.entry_point})
        for name, src in sorted(tests.pytest_files.items()):
            suites.append({"kind": "pytest", "name": name, "source": src, "module": tests.module})
        self.suites = suites

    async def run(self, session: SandboxSession, memo: dict[str, Any]) -> dict[str, Any]:
        nonce = secrets.token_hex(8)
        request = {"nonce": nonce, "suites": self.suites, "memo": memo, "case_timeout": self.v.config.case_timeout_s}
        res = await session.run_python(sandbox_script("harness"), stdin=json.dumps(request),
                                       timeout_s=self.v.config.exec_timeout_s)
        try:
            report = json.loads(res.stdout)
        except ValueError:
            report = None
        if not isinstance(report, dict) or report.get("nonce") != nonce or not isinstance(report.get("cases"), list):
            raise VerifierFailure(
                f"the grader's harness gave no report ({res.status}, exit code {res.exit_code}"
                f"{', output truncated' if res.truncated else ''}): {res.stderr[-800:]}"
            )
        return report


def _checked_result(msg: dict[str, Any], state: _WorkerState) -> dict[str, Any]:
    """A worker message -> a memo entry the harness can trust to be well-formed.

    ``ok``: a plain value; ``err``: an Exception the solution raised (tests may expect one);
    ``fail``: no answer (the harness raises it past ``except Exception`` and ``pytest.raises``,
    so a crash or a timeout never counts as the exception a test expected)."""
    if "ok" in msg:
        try:
            codec.decode(msg["ok"])
        except codec.CodecError as e:
            return {"fail": f"the solution's result is not plain data: {e}"}
        return {"ok": msg["ok"]}
    err = msg.get("err")
    if isinstance(err, list) and len(err) == 2:
        return {"err": [str(err[0])[:100], str(err[1])[:500]]}
    kind = str(msg.get("type", ""))[:100]
    if kind in ("SystemExit", "KeyboardInterrupt"):
        state.flags.add("exit_in_call")
    if "Skip" in kind or kind in ("XFailed", "Exit"):
        state.flags.add("skip_raised")
    return {"fail": str(msg.get("fail") or "malformed result from the solution's process")[:600]}


def _died(res: ExecResult, when: str) -> str:
    if res.status == "timeout":
        return f"the solution's process timed out {when}"
    if res.status == "memory":
        return f"the solution's process ran out of memory {when}"
    if res.status in ("killed", "error"):
        return f"the solution's process was {res.status} {when} ({res.detail or res.signal})"
    return f"the solution's process exited {when} (exit code {res.exit_code})"

