"""The grader's harness: runs the hidden tests in a fresh sandbox, against a remote solution.

Runs in sandbox session B, which never holds the solution's code or anything it wrote. The
hidden tests call the solution through proxies (``candidate`` for ``check(candidate)`` suites,
a ``solution`` module of proxies for pytest-style files). A proxy does not run anything: it
looks the call up in the *memo* the host sent (results the solution's worker produced in
session A, decoded strictly into builtin types by codec.py) and, when a call has no result
yet, the case is *incomplete*. The host then has the worker answer the missing calls and runs
the harness again, until every case completes (a call whose arguments depend on an earlier
result takes one more round).

To gather as many missing calls per round as possible, an incomplete case is re-run in
*discovery* mode: its ``assert`` statements are rewritten to evaluate and ignore their
condition, and a missing result is a :class:`Pending` value that raises on any use. A verdict
is only ever taken from a *real* run in which every call was answered: discovery affects which
calls are asked, never an outcome.

Input (stdin, JSON): ``{"nonce", "suites": [...], "memo": {key: result}, "case_timeout"}``
where a suite is ``{"kind": "check", "name", "source", "prompt", "entry_point"}`` or
``{"kind": "pytest", "name", "source", "module"}`` and a result is ``{"ok": encoded}`` or
``{"err": [type, message]}`` (an Exception the solution raised) or ``{"fail": message}`` (no
answer: it crashed, timed out, exited, or returned something that is not plain data).

Output: one JSON object on a private duplicate of stdout (fd 1 itself points at stderr, so
whatever a test prints cannot reach the report): ``{"nonce", "cases": [{"id", "label",
"outcome", "detail", "calls"}], "pending": [[attr, args, kwargs], ...], "errors": [...]}``.
Outcomes: passed, failed, error, timeout, skipped, trivial (passed without calling the
solution: not a test of it), incomplete (needs results the memo lacks).

Cases: each top-level ``assert`` (or compound statement holding asserts) of ``check``'s body is
one case, preceded by the body's earlier other statements as set-up; names the prompt defines
are available to the tests (HumanEval's helpers), with the entry point bound to the proxy. A
pytest-style file is run by this module's own small runner — no pytest plugins, conftest files
or rootdir discovery exist here: test functions and methods of ``Test*`` classes, with
``parametrize``, ``skip``, ``skipif`` and ``xfail`` marks; fixtures are not supported. Skipped
and xfail-marked tests are not passed. Standard library only.
"""

import ast
import builtins
import copy
import inspect
import itertools
import json
import os
import random
import signal
import sys
import types

from practicum.verify.codec import CodecError, call_key, decode, encode  # host-only

_CASE_PREFIX = "__practicum_case_"


class RemoteError(Exception):
    """The solution raised an exception that is not a builtin one, or could not answer."""


class NoAnswer(BaseException):
    """The solution gave no answer to a call (crash, timeout, exit, not plain data). Not an
    Exception, so that ``except Exception`` or ``pytest.raises(Exception)`` in a test never
    takes it for an exception the solution raised."""


class _NeedResult(BaseException):
    """Real mode: a call has no result in the memo yet."""


class _CaseTimeout(BaseException):
    pass


class _Poisoned(Exception):
    """A pending (not yet known) result was used during discovery."""


class Pending:
    """Stand-in for a result not known yet (discovery only): every use raises _Poisoned."""

    __slots__ = ()

    def __repr__(self):
        return "<pending>"

    def __getattr__(self, name):
        raise _Poisoned(name)


def _poison(self, *args, **kwargs):
    raise _Poisoned("pending result")


for _name in (
    "__eq__ __ne__ __lt__ __le__ __gt__ __ge__ __hash__ __bool__ __len__ __iter__ __next__ __getitem__ "
    "__setitem__ __delitem__ __contains__ __call__ __float__ __int__ __index__ __complex__ __round__ __abs__ "
    "__neg__ __pos__ __invert__ __add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __truediv__ __rtruediv__ "
    "__floordiv__ __rfloordiv__ __mod__ __rmod__ __pow__ __rpow__ __and__ __rand__ __or__ __ror__ __xor__ "
    "__rxor__ __lshift__ __rlshift__ __rshift__ __rrshift__ __matmul__ __rmatmul__ __divmod__ __rdivmod__ "
    "__format__ __enter__ __exit__ __reversed__"
).split():
    setattr(Pending, _name, _poison)


def _has_pending(value, depth=0):
    if isinstance(value, Pending):
        return True
    if depth > 50:
        return False
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_has_pending(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return any(_has_pending(k, depth + 1) or _has_pending(v, depth + 1) for k, v in value.items())
    return False


class _Ctx:
    """One run of one case: where calls are looked up, and what was missing."""

    def __init__(self, memo, discover):
        self.memo = memo
        self.discover = discover
        self.calls = 0
        self.needed = False
        self.pending = {}

    def call(self, attr, args, kwargs):
        self.calls += 1
        try:
            a = encode(tuple(args))
            k = encode(dict(kwargs))
        except CodecError as e:
            if self.discover and _has_pending((args, kwargs)):
                self.needed = True
                return Pending()
            raise TypeError(f"the grader passes only plain data to the solution: {e}") from None
        key = call_key(attr, a, k)
        result = self.memo.get(key)
        if result is None:
            self.needed = True
            if not self.discover:
                raise _NeedResult()
            self.pending.setdefault(key, [attr, a, k])
            return Pending()
        return _materialize(result)


_STATE = {"ctx": None}
_CONTROL_FLOW = ("StopIteration", "StopAsyncIteration")


def _materialize(result):
    """A memo entry -> a fresh plain value, or the exception the solution raised."""
    if type(result) is dict and "ok" in result:
        try:
            return decode(result["ok"])
        except CodecError as e:
            raise NoAnswer(f"the solution's result is not valid plain data: {e}") from None
    if type(result) is dict and "fail" in result:
        raise NoAnswer(str(result["fail"]))
    err = result.get("err") if type(result) is dict else None
    if type(err) is list and len(err) == 2:
        name, msg = str(err[0]), str(err[1])
        cls = getattr(builtins, name, None)
        # StopIteration would silently end a loop over map(candidate, ...): never re-raise it
        if isinstance(cls, type) and issubclass(cls, Exception) and name not in _CONTROL_FLOW:
            try:
                exc = cls(msg)
            except Exception:
                exc = RemoteError(f"{name}: {msg}")
            raise exc
        raise RemoteError(f"{name}: {msg}")
    raise NoAnswer("malformed result")


class Remote:
    """A proxy for an attribute of the solution's module: calling it asks the memo."""

    def __init__(self, attr):
        self._attr = attr
        self.__name__ = attr.rsplit(".", 1)[-1]

    def __call__(self, *args, **kwargs):
        ctx = _STATE["ctx"]
        if ctx is None:
            raise RemoteError("the solution can only be called from inside a test")
        return ctx.call(self._attr, args, kwargs)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Remote(f"{self._attr}.{name}")

    def __repr__(self):
        return f"<solution.{self._attr}>"


class SolutionModule(types.ModuleType):
    """What ``import solution`` gives a pytest-style file: every attribute is a Remote."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Remote(name)


class _DiscoverAsserts(ast.NodeTransformer):
    """``assert cond, msg`` -> ``try: cond / except Exception: pass`` (discovery runs only)."""

    def visit_Assert(self, node):
        body = [ast.Expr(value=node.test)]
        handler = ast.ExceptHandler(type=ast.Name(id="Exception", ctx=ast.Load()), name=None, body=[ast.Pass()])
        return ast.copy_location(ast.Try(body=body, handlers=[handler], orelse=[], finalbody=[]), node)


def _compile_pair(tree, filename):
    real = compile(ast.fix_missing_locations(tree), filename, "exec")
    disc_tree = ast.fix_missing_locations(_DiscoverAsserts().visit(copy.deepcopy(tree)))
    return real, compile(disc_tree, filename, "exec")


def _segment(source, node, limit=120):
    text = ast.get_source_segment(source, node) or ast.dump(node)[:limit]
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Case:
    def __init__(self, id, label, real, disc, skip=None):
        self.id = id
        self.label = label
        self.real = real  # () -> None, the case as written
        self.disc = disc  # () -> None, the case with asserts disarmed
        self.skip = skip  # a reason: the case is reported skipped without running


def _contains_assert(node):
    return any(isinstance(n, ast.Assert) for n in ast.walk(node))


def check_cases(suite):
    """Cases of a HumanEval-style ``check(candidate)`` suite."""
    source, name = suite["source"], suite["name"]
    tree = ast.parse(source, name)
    checks = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    if not checks:
        raise ValueError(f"{name}: the test defines no check(candidate) function")
    check = checks[-1]
    body = list(check.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # docstring
    setup, parts = [], []
    for stmt in body:
        compound = not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        if isinstance(stmt, ast.Assert) or (compound and _contains_assert(stmt)):
            parts.append((list(setup), stmt))
        else:
            setup.append(stmt)
    if not parts:
        parts = [([], ast.If(test=ast.Constant(True), body=body or [ast.Pass()], orelse=[]))]
    for i, (pre, stmt) in enumerate(parts):
        fn = ast.FunctionDef(
            name=f"{_CASE_PREFIX}{i}", args=copy.deepcopy(check.args),
            body=copy.deepcopy(pre) + [copy.deepcopy(stmt)], decorator_list=[], returns=None, type_params=[],
        )
        tree.body.append(ast.copy_location(fn, check))
    real_code, disc_code = _compile_pair(tree, name)
    entry = suite["entry_point"]
    namespaces = []
    for code in (real_code, disc_code):
        ns = {"__name__": "__hidden_tests__", "__builtins__": builtins}
        if suite.get("prompt"):
            exec(compile(suite["prompt"], "<prompt>", "exec"), ns)
        ns[entry] = Remote(entry)
        exec(code, ns)
        namespaces.append(ns)
    cases = []
    for i, (_, stmt) in enumerate(parts):
        fns = [ns[f"{_CASE_PREFIX}{i}"] for ns in namespaces]
        cases.append(Case(
            f"{name}[{i + 1}]", _segment(source, stmt),
            lambda f=fns[0]: f(Remote(entry)), lambda f=fns[1]: f(Remote(entry)),
        ))
    return cases


def _marks(obj):
    return _mark_list(getattr(obj, "pytestmark", []))


def _mark_list(marks):
    return list(marks) if isinstance(marks, (list, tuple)) else [marks]


def _idval(value, argname, index):
    if value is None or type(value) in (bool, int, float, str):
        text = str(value)
        if len(text) <= 32 and text.isprintable():
            return text
    return f"{argname}{index}"


def _parametrize(marks):
    """[(id, kwargs, marks)] for the parametrize marks (product over stacked decorators)."""
    axes = []
    for m in marks:
        if getattr(m, "name", None) != "parametrize":
            continue
        argnames, argvalues = m.args[0], list(m.args[1])
        names = [n.strip() for n in argnames.split(",")] if isinstance(argnames, str) else list(argnames)
        ids = m.kwargs.get("ids")
        axis = []
        for j, v in enumerate(argvalues):
            extra, pid = [], None
            if type(v).__name__ == "ParameterSet":
                v, extra, pid = v.values, list(v.marks), v.id
                v = v[0] if len(names) == 1 else v
            values = (v,) if len(names) == 1 else tuple(v)
            if pid is None and isinstance(ids, (list, tuple)) and j < len(ids):
                pid = str(ids[j])
            if pid is None:
                pid = "-".join(_idval(x, n, j) for x, n in zip(values, names))
            axis.append((pid, dict(zip(names, values)), extra))
        axes.append(axis)
    if not axes:
        return [(None, {}, [])]
    out = []
    for combo in itertools.product(*axes):
        pid = "-".join(c[0] for c in combo)
        kwargs = {k: v for c in combo for k, v in c[1].items()}
        out.append((pid, kwargs, [m for c in combo for m in c[2]]))
    return out


def _skip_reason(marks):
    for m in marks:
        name = getattr(m, "name", None)
        if name == "skip":
            return "skip mark"
        if name == "skipif" and (not m.args or any(bool(a) for a in m.args)):
            return f"skipif mark ({m.kwargs.get('reason', '')})"
        if name == "xfail":
            return "xfail mark (not counted as passed)"
    return None


def pytest_cases(suite, solution_modules):
    """Cases of a pytest-style file, collected by this runner (no pytest machinery)."""
    source, name = suite["source"], suite["name"]
    module = suite.get("module") or "solution"
    if module not in solution_modules:
        solution_modules[module] = SolutionModule(module)
        sys.modules[module] = solution_modules[module]
    tree = ast.parse(source, name)
    real_code, disc_code = _compile_pair(tree, name)
    modname = "__hidden__." + os.path.splitext(os.path.basename(name))[0]
    spaces = []
    for code in (real_code, disc_code):
        ns = {"__name__": modname, "__file__": name, "__builtins__": builtins}
        exec(code, ns)
        spaces.append(ns)
    real_ns, disc_ns = spaces
    module_marks = _mark_list(real_ns.get("pytestmark", []))
    cases = []

    def add(qual, fn, get_real, get_disc, owner_marks):
        marks = _marks(fn) + owner_marks + module_marks
        params = [p for p in inspect.signature(fn).parameters if p != "self"]
        for pid, kwargs, extra in _parametrize(marks):
            cid = f"{name}::{qual}" + (f"[{pid}]" if pid is not None else "")
            missing = [p for p in params if p not in kwargs]

            def run(get, kwargs=kwargs, missing=missing):
                if missing:
                    raise TypeError(f"fixtures are not supported by the grader's runner: {', '.join(missing)}")
                get()(**kwargs)

            cases.append(Case(cid, qual, lambda r=run, g=get_real: r(g), lambda r=run, g=get_disc: r(g),
                              _skip_reason(marks + extra)))

    for key, obj in list(real_ns.items()):
        if key.startswith("test") and isinstance(obj, types.FunctionType) and obj.__module__ == modname:
            add(key, obj, lambda o=obj: o, lambda k=key: disc_ns[k], [])
        elif key.startswith("Test") and isinstance(obj, type) and obj.__module__ == modname and "__init__" not in vars(obj):
            for mname, meth in vars(obj).items():
                if mname.startswith("test") and isinstance(meth, types.FunctionType):
                    add(f"{key}::{mname}", meth, lambda c=obj, m=mname: _bound(c, m),
                        lambda k=key, m=mname: _bound(disc_ns[k], m), _marks(obj))
    return cases


def _bound(cls, name):
    inst = cls()
    if hasattr(inst, "setup_method"):
        inst.setup_method(getattr(inst, name))
    return getattr(inst, name)


def _on_alarm(signum, frame):
    raise _CaseTimeout()


def _is_skip(exc):
    names = {c.__name__ for c in type(exc).__mro__}
    return bool(names & {"Skipped", "SkipTest", "XFailed"})


def run_case(case, memo, discover, timeout):
    ctx = _Ctx(memo, discover)
    _STATE["ctx"] = ctx
    random.seed(0)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    outcome, detail = "passed", ""
    try:
        (case.disc if discover else case.real)()
    except _NeedResult:
        outcome = "incomplete"
    except _CaseTimeout:
        outcome, detail = "timeout", f"the test took longer than {timeout:g} s"
    except AssertionError as e:
        outcome, detail = "failed", f"AssertionError: {e}" if str(e) else "AssertionError"
    except BaseException as e:  # any other exception from a test is that test's failure
        if _is_skip(e):
            outcome, detail = "skipped", f"skipped: {e}"
        else:
            outcome, detail = "error", f"{type(e).__name__}: {e}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _STATE["ctx"] = None
    if ctx.needed:
        outcome = "incomplete"
    elif outcome == "passed" and ctx.calls == 0:
        outcome = "trivial"
    return outcome, detail[:500], ctx


def main():
    report_fd = os.dup(1)
    os.dup2(2, 1)  # tests' prints go to stderr, never into the report
    sys.path[:] = [p for p in sys.path if p not in ("", ".", os.getcwd())]
    sys.dont_write_bytecode = True
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    request = json.loads(sys.stdin.buffer.read())
    signal.signal(signal.SIGALRM, _on_alarm)
    memo = request.get("memo", {})
    timeout = float(request.get("case_timeout", 10.0))
    report = {"nonce": request.get("nonce"), "cases": [], "pending": [], "errors": []}
    cases = []
    modules = {}
    for suite in request["suites"]:
        try:
            if suite["kind"] == "check":
                cases += check_cases(suite)
            else:
                cases += pytest_cases(suite, modules)
        except BaseException as e:  # a suite that cannot load is reported, not fatal
            report["errors"].append(f"{suite.get('name')}: {type(e).__name__}: {e}"[:1000])
    pending = {}
    for case in cases:
        if case.skip:
            report["cases"].append({"id": case.id, "label": case.label, "outcome": "skipped",
                                    "detail": case.skip, "calls": 0})
            continue
        outcome, detail, ctx = run_case(case, memo, False, timeout)
        if outcome == "incomplete":
            _, _, dctx = run_case(case, memo, True, timeout)
            if dctx.pending:
                pending.update(dctx.pending)
            else:
                outcome, detail = "error", "the test's calls differ between runs (is it deterministic?)"
        report["cases"].append({"id": case.id, "label": case.label, "outcome": outcome, "detail": detail,
                                "calls": ctx.calls})
    report["pending"] = list(pending.values())
    data = json.dumps(report, separators=(",", ":")).encode()
    while data:
        data = data[os.write(report_fd, data):]
    sys.stdout.flush()
    os._exit(0)
