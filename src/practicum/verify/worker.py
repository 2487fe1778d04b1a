"""The solution's worker: imports the solution and answers calls, in the solution's own sandbox.

Runs in sandbox session A, whose workspace holds only ``solution.py`` and this script; the
hidden tests never enter it. It reads its whole request from stdin *before* importing the
solution (``{"file", "module", "calls": [[attr, args, kwargs], ...], "call_timeout"}``), keeps
a private duplicate of stdout as its channel and points fd 1 at stderr, so whatever the
solution prints goes to stderr and never into the channel. Then it answers each call in order,
one JSON line per message on the channel::

    {"ev": "ready"}                     the solution imported
    {"ev": "import_error", ...}         it raised while importing (SystemExit, skip, ...)
    {"id": i, "ok": <encoded value>}    call i returned plain data (see codec.py)
    {"id": i, "err": [type, message]}   call i raised an Exception (the tests may expect one)
    {"id": i, "fail": message, "type": t}  call i gave no answer: it timed out, returned
                                        something that is not plain data, or raised a
                                        BaseException that is not an Exception (SystemExit,
                                        a test-skip exception...)
    {"ev": "write", "path": ...}        the solution opened a file for writing (audit hook)
    {"ev": "spawn", "what": ...}        it started a process
    {"ev": "eq_override", "type": ...}  it returned an object whose class overrides equality
    {"ev": "done"}

Nothing here is trusted: the solution runs in this process and can rewrite any of it. The
host reads these lines defensively and the harness decodes values strictly; the events only
feed the informative hack flags. Standard library only (copied into the sandbox with codec.py).
"""

import importlib.util
import json
import os
import signal
import sys

from practicum.verify.codec import CodecError, decode, encode  # host-only

_BUILTINS = (bool, int, float, complex, str, bytes, list, tuple, dict, set, frozenset)
_CMP = ("__eq__", "__ne__", "__hash__", "__lt__", "__le__", "__gt__", "__ge__")
_MAX_EVENTS = 64


class _CallTimeout(BaseException):
    pass


class _Channel:
    def __init__(self, fd):
        self.fd = fd
        self.events = 0

    def send(self, msg):
        data = (json.dumps(msg, separators=(",", ":"), allow_nan=False) + "\n").encode()
        while data:
            n = os.write(self.fd, data)
            data = data[n:]

    def event(self, msg):
        if self.events < _MAX_EVENTS:
            self.events += 1
            self.send(msg)


def plain(value, module_name, chan, depth=0):
    """Convert a return value to exact builtin types where that is faithful.

    Subclasses of builtin types from libraries (namedtuple, OrderedDict, IntEnum...) become
    their builtin base; numpy scalars and arrays become Python numbers and lists. A subclass
    defined by the solution that overrides comparison or hashing is refused: its equality is
    whatever the solution says, so it cannot be checked.
    """
    if depth > 100:
        raise CodecError("return value nested too deeply")
    t = type(value)
    if value is None or t in (bool, int, float, complex, str, bytes):
        return value
    if t is list or t is tuple or t is set or t is frozenset:
        return t(plain(v, module_name, chan, depth + 1) for v in value)
    if t is dict:
        return {plain(k, module_name, chan, depth + 1): plain(v, module_name, chan, depth + 1) for k, v in value.items()}
    if t.__module__.split(".")[0] == "numpy" and hasattr(value, "tolist"):
        return plain(value.tolist(), module_name, chan, depth + 1)
    for base in _BUILTINS:
        if isinstance(value, base):
            for cls in t.__mro__:
                if cls in _BUILTINS or cls is object:
                    break
                own = [m for m in _CMP if m in vars(cls)]
                if own and cls.__module__ in (module_name, "__main__"):
                    chan.event({"ev": "eq_override", "type": t.__qualname__, "methods": own})
                    raise CodecError(
                        f"returned an object of class {t.__qualname__}, a subclass of {base.__name__} that "
                        f"overrides {', '.join(own)}; return plain {base.__name__} values"
                    )
            if base is bool:
                return bool(value)
            if base in (int, float, complex, str, bytes):
                return plain(base(value), module_name, chan, depth + 1)
            if base is dict:
                return plain(dict(value.items()), module_name, chan, depth + 1)
            return plain(base(iter(value)), module_name, chan, depth + 1)
    raise CodecError(f"returned an object of class {t.__module__}.{t.__qualname__}, which is not plain data")


def _audit_hook(chan, workspace):
    busy = [False]
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC

    def hook(event, args):
        if busy[0]:
            return
        busy[0] = True
        try:
            if event == "open":
                path, mode, flags = args
                writing = (mode is not None and any(c in mode for c in "wax+")) or (
                    mode is None and isinstance(flags, int) and flags & write_flags
                )
                if writing and isinstance(path, (str, bytes)):
                    p = os.fsdecode(path)
                    chan.event({"ev": "write", "path": os.path.abspath(os.path.join(workspace, p))})
            elif event in ("os.remove", "os.rename", "os.replace", "os.rmdir", "shutil.rmtree"):
                p = args[0] if args and isinstance(args[0], (str, bytes)) else ""
                chan.event({"ev": "write", "path": os.path.abspath(os.path.join(workspace, os.fsdecode(p)))})
            elif event in ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork"):
                chan.event({"ev": "spawn", "what": event})
        finally:
            busy[0] = False

    return hook


def _exit():
    """Flush what the solution printed (to stderr) and leave without running its atexit hooks."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # the solution may have replaced or closed the stream
            pass
    os._exit(0)


def _on_alarm(signum, frame):
    raise _CallTimeout()


def _resolve(module, attr):
    obj = module
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def main():
    chan = _Channel(os.dup(1))
    os.dup2(2, 1)
    request = json.loads(sys.stdin.buffer.read())
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.dont_write_bytecode = True
    workspace = os.getcwd()
    module_name = request.get("module", "solution")
    call_timeout = float(request.get("call_timeout", 5.0))
    signal.signal(signal.SIGALRM, _on_alarm)
    sys.addaudithook(_audit_hook(chan, workspace))

    try:
        path = os.path.join(workspace, request.get("file", "solution.py"))
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        signal.setitimer(signal.ITIMER_REAL, call_timeout)
        spec.loader.exec_module(module)
        signal.setitimer(signal.ITIMER_REAL, 0)
    except BaseException as e:  # the solution's import is untrusted code: any outcome is data
        signal.setitimer(signal.ITIMER_REAL, 0)
        if isinstance(e, _CallTimeout):
            name, msg = "TimeoutError", f"importing took longer than {call_timeout:g} s"
        else:
            name, msg = _describe(e)
        chan.send({"ev": "import_error", "type": name, "msg": msg})
        _exit()
    chan.send({"ev": "ready", "cwd": workspace})

    for i, call in enumerate(request["calls"]):
        try:
            attr, args, kwargs = call
            args, kwargs = _decode_args(args, kwargs)
            fn = _resolve(module, attr)
            signal.setitimer(signal.ITIMER_REAL, call_timeout)
            try:
                value = fn(*args, **kwargs)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except _CallTimeout:
            chan.send({"id": i, "fail": f"the call took longer than {call_timeout:g} s", "type": "Timeout"})
            continue
        except Exception as e:  # an exception the solution raised is this call's result
            chan.send({"id": i, "err": list(_describe(e))})
            continue
        except BaseException as e:  # SystemExit, skips...: no answer
            name, msg = _describe(e)
            chan.send({"id": i, "fail": f"{name}: {msg}", "type": name})
            continue
        try:
            signal.setitimer(signal.ITIMER_REAL, call_timeout)
            try:
                out = encode(plain(value, module_name, chan))
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except BaseException as e:  # not plain data (or its conversion misbehaved): no answer
            chan.send({"id": i, "fail": _describe(e)[1] or "the result is not plain data", "type": "NotPlainData"})
            continue
        chan.send({"id": i, "ok": out})
    chan.send({"ev": "done"})
    _exit()


def _describe(exc):
    name = type(exc).__name__
    try:
        return name, str(exc)[:500]
    except BaseException:  # a solution's exception may refuse to be printed
        return name, "<unprintable>"


def _decode_args(args, kwargs):
    a = decode(args)
    k = decode(kwargs)
    if type(a) is not tuple or type(k) is not dict:
        raise CodecError("malformed call")
    return a, k

