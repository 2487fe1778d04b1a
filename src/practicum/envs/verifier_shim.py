#!/usr/bin/python3 -I
"""Offline stand-ins for the standard verifier bootstrap of Terminal-Bench 2.0 tasks.

Installed as ``/opt/practicum/bin/{curl,wget,uv,uvx,apt-get,apt,pip,pip3,pytest,python,python3}`` (links to
this one file; it looks at the name it was called by), first in the verifier's ``PATH``.
Standard library only: it runs on the sandbox's ``/usr/bin/python3``. What each does:

* ``curl``/``wget`` of the uv installer (``https://astral.sh/uv/.../install.sh``): prints (or
  writes, with ``-o``/``-O``) an installer that links ``uv`` and ``uvx`` into ``$HOME/.local/bin``
  and writes ``$HOME/.local/bin/env``, as the real installer does. Any other URL: the real tool.
  In an image build, the installer it gives copies that uv release's real binaries (fetched from
  PyPI by the builder, ``PRACTICUM_UV_RELEASES``) instead, so the image holds them.
* ``apt-get``/``apt``: ``update`` does nothing; ``install`` installs what the image build fetched
  ahead (the packages the task's scripts install), and otherwise succeeds when every package is
  already installed (``dpkg-query``), else says which are missing and fails. Other commands:
  the real tool.
* ``uvx [-w REQ]... [-p VERSION] CMD ARGS`` / ``uv run ... CMD ARGS`` / ``uv tool run``: runs CMD
  from the verifier toolchain (``/opt/practicum/toolchain``, the packages the task's test
  scripts name, installed ahead of time); each requested package must be there, at the
  requested version. ``-p`` is ignored: the tools run on this machine's Python.
* ``uv init``/``uv add``/``uv pip install``/``uv venv``/``uv sync``, ``pip install``: succeed when
  what they ask for is in the toolchain (``uv init`` writes a minimal ``pyproject.toml``); a
  ``pip install`` that names its own index or folder (``--index-url http://localhost:8080/simple``,
  a server the task runs) is the real pip's, and so is one whose packages the toolchain lacks
  but the image's wheels fetched ahead hold (``/var/cache/practicum/wheels``: the project's
  requirements files, what the solution writes into them), which it installs offline.
* ``pytest``: the toolchain's pytest.
* ``python``/``python3``: ``-m pip install`` as ``pip install`` above; anything else, the real one.
  After an install, a ``.pth`` in that interpreter's site-packages makes the toolchain importable
  (after the image's own packages), so ``pip install pytest && python3 -m pytest`` works.
"""

import os
import re
import sys

TOOLCHAIN = "/opt/practicum/toolchain"
SHIMS = "/opt/practicum/bin"
UV_INSTALLER = re.compile(r"astral\.sh/uv/(?:[^/\s]+/)?install\.sh")
PYTHON = "/usr/bin/python3"
RUNNER = (
    "import sys\n"
    f"sys.path.insert(0, {TOOLCHAIN!r})\n"
    "from importlib import metadata\n"
    "name = sys.argv[1]\n"
    "eps = [e for e in metadata.entry_points(group='console_scripts') if e.name == name]\n"
    "sys.argv = sys.argv[1:]\n"
    "if not eps:\n"
    "    sys.exit(f'practicum: {name!r} is not a command of the verifier toolchain')\n"
    "sys.exit(eps[0].load()())\n"
)


def say(msg):
    print(f"practicum (offline verifier): {msg}", file=sys.stderr)


def real_path(name):
    """The real ``name``: the first one on PATH that is not one of these stand-ins (on the
    standard PATH where there is none: uv runs the interpreters it finds without one)."""
    for d in (os.environ.get("PATH") or "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin").split(os.pathsep):
        p = os.path.join(d, name)
        if d and os.access(p, os.X_OK) and os.path.realpath(p) != os.path.realpath(__file__):
            return p
    return None


def real(name, args):
    """Run the real ``name`` in place of this process."""
    p = real_path(name)
    if p is not None:
        os.execv(p, [name, *args])
    say(f"{name}: not found")
    sys.exit(127)


def installer_script(build_from=None):
    """The uv installer's stand-in. Verifying: links to these stand-ins. Building an image
    (``build_from``: a folder holding that uv release's binaries, fetched from PyPI for the
    build): copies the real ``uv`` and ``uvx`` where the installer puts them, so the image has them."""
    put = (f'cp {build_from}/uv {build_from}/uvx "$HOME/.local/bin/"\n' if build_from else
           f'ln -sf {SHIMS}/uv "$HOME/.local/bin/uv"\n' f'ln -sf {SHIMS}/uvx "$HOME/.local/bin/uvx"\n')
    return (
        "#!/bin/sh\n"
        "# practicum: offline stand-in for the uv installer\n"
        "set -e\n"
        'mkdir -p "$HOME/.local/bin"\n'
        + put +
        "cat > \"$HOME/.local/bin/env\" <<'EOF'\n"
        '#!/bin/sh\ncase ":${PATH}:" in *:"$HOME/.local/bin":*) ;; *) export PATH="$HOME/.local/bin:$PATH" ;; esac\n'
        "EOF\n"
        'echo "installing to $HOME/.local/bin"\necho "everything\'s installed!"\n'
    )


def fetch(name, args, build_from=None):
    url = next((a for a in args if UV_INSTALLER.search(a)), None)
    if url is None:
        real(name, args)
    out = None
    for i, a in enumerate(args):
        if a in ("-o", "--output", "-O") and i + 1 < len(args) and not (name == "curl" and a == "-O"):
            out = args[i + 1]
        elif a.startswith("--output=") or a.startswith("--output-document="):
            out = a.split("=", 1)[1]
        elif name == "curl" and a == "-O":
            out = "install.sh"
    text = installer_script(build_from)
    if out in (None, "-"):
        sys.stdout.write(text)
    else:
        with open(out, "w") as f:
            f.write(text)
    return 0


def _norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _installed():
    found = {}
    if os.path.isdir(TOOLCHAIN):
        for entry in os.listdir(TOOLCHAIN):
            m = re.match(r"(.+?)-([^-]+)\.dist-info$", entry)
            if m:
                found[_norm(m.group(1))] = m.group(2)
    return found


_REQ = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._\-]*)(\[[^\]]*\])?\s*(==|>=|<=|~=|!=|>|<)?\s*([^\s;,]*)")


def missing_from(requirements, have):
    """The requirements ``have`` (name -> version) does not satisfy (pinned ones at their version)."""
    missing = []
    for req in requirements:
        m = _REQ.match(req.strip())
        if not m:
            continue
        name, op, ver = _norm(m.group(1)), m.group(3), m.group(4)
        if name not in have or (op == "==" and ver and have[name] != ver):
            missing.append(req)
    return missing


# the image's own wheels, fetched ahead for what the task installs (practicum.envs.images.PREFETCH_WHEELS)
PREFETCHED = "/var/cache/practicum/wheels"


def _prefetched():
    """Name -> version of the distributions fetched ahead into the image (wheels and sdists)."""
    found = {}
    try:
        names = os.listdir(PREFETCHED)
    except OSError:
        return found
    for entry in names:
        m = re.match(r"(.+?)-(\d[^-]*?)(?:-.*\.whl|\.tar\.gz|\.zip)$", entry)
        if m:
            found[_norm(m.group(1))] = m.group(2)
    return found


def check(requirements, what):
    """Every requirement must be in the toolchain (pinned ones at their version)."""
    have = _installed()
    missing = missing_from(requirements, have)
    if missing:
        say(f"{what}: {', '.join(missing)} not in the verifier toolchain (available offline: "
            f"{', '.join(f'{k}=={v}' for k, v in sorted(have.items())) or 'nothing'}); Practicum installs what "
            "the task's test scripts name (uvx -w, uv add, pip install) when it builds the task")
        sys.exit(1)


def run_tool(cmd, args):
    if cmd in ("python", "python3") or re.fullmatch(r"python3(\.\d+)?", cmd):
        env = dict(os.environ, PYTHONPATH=TOOLCHAIN + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""))
        os.execve(PYTHON, [PYTHON, *args], env)
    os.execv(PYTHON, [PYTHON, "-c", RUNNER, cmd, *args])


TAKES_VALUE = {"-w", "--with", "-p", "--python", "--from", "--with-requirements", "--index-url", "--extra-index-url",
               "--directory", "--project", "--env-file", "-C", "--config-setting", "--cache-dir", "--index",
               "--default-index", "--index-strategy", "-i", "--find-links", "-f", "--python-platform", "--keyring-provider",
               "--resolution", "--prerelease", "--exclude-newer", "--link-mode", "--with-editable", "--refresh-package"}


def split_options(args):
    """``(requested packages, the command and its arguments)`` for uvx / uv run."""
    wanted, i = [], 0
    while i < len(args) and args[i].startswith("-"):
        a = args[i]
        if a in ("-w", "--with") and i + 1 < len(args):
            wanted += [r for r in args[i + 1].split(",") if r]
        elif a.startswith("--with="):
            wanted += [r for r in a.split("=", 1)[1].split(",") if r]
        elif a == "--from" and i + 1 < len(args):
            wanted.append(args[i + 1])
        if a in TAKES_VALUE:
            i += 2
        else:
            i += 1
        if a == "--":
            break
    return wanted, args[i:]


def uvx(args):
    wanted, rest = split_options(args)
    if not rest:
        say("uvx: no command given")
        return 2
    cmd = rest[0]
    tool = re.split(r"[<>=!~@\[]", cmd, maxsplit=1)[0]
    check([*wanted, *([] if tool in ("python", "python3") else [cmd.replace("@", "==")])], "uvx")
    run_tool(tool, rest[1:])


def packages(args):
    out, skip = [], False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a in ("-r", "--requirement"):
            skip = True
            try:
                with open(args[i + 1]) as f:
                    out += [ln.split("#")[0].strip() for ln in f if ln.split("#")[0].strip()]
            except (OSError, IndexError):
                pass
            continue
        if a in ("-i", "--index-url", "--extra-index-url", "-c", "--constraint", "-t", "--target", "--python", "-p"):
            skip = True
            continue
        if not a.startswith("-"):
            out.append(a)
    return out


def uv(args):
    if not args or args[0] in ("--version", "-V", "version"):
        print("uv 0.9.5 (practicum offline stand-in)")
        return 0
    sub, rest = args[0], args[1:]
    if sub == "run":
        wanted, cmd = split_options(rest)
        check(wanted, "uv run")
        if not cmd:
            say("uv run: no command given")
            return 2
        run_tool(cmd[0], cmd[1:])
    if sub == "tool" and rest[:1] == ["run"]:
        return uvx(rest[1:])
    if sub == "init":
        if not os.path.exists("pyproject.toml"):
            name = re.sub(r"[^A-Za-z0-9]+", "-", os.path.basename(os.getcwd()) or "project").strip("-") or "project"
            with open("pyproject.toml", "w") as f:
                f.write(f'[project]\nname = "{name}"\nversion = "0.1.0"\nrequires-python = ">=3.8"\ndependencies = []\n')
        print("Initialized project (practicum offline stand-in)")
        return 0
    if sub == "add" or (sub == "pip" and rest[:1] == ["install"]):
        check(packages(rest[1:] if sub == "pip" else rest), f"uv {sub}")
        return 0
    if sub in ("venv", "sync", "lock", "python", "cache", "self"):
        return 0
    say(f"uv {sub}: not supported by the offline stand-in")
    return 2


def have_package(p, provided):
    """Installed, provided by an installed package (nodejs provides npm), or a command this
    machine already has under that name."""
    import shutil
    import subprocess

    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", p], capture_output=True, text=True)
    if r.returncode == 0 and "install ok installed" in r.stdout:
        return True
    return p in provided or shutil.which(p, path=os.pathsep.join(
        d for d in os.environ.get("PATH", "").split(os.pathsep) if d and os.path.realpath(d) != SHIMS)) is not None


def provided_names():
    import subprocess

    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}|${Provides}\n"], capture_output=True, text=True)
    names = set()
    for line in r.stdout.splitlines():
        status, _, provides = line.partition("|")
        if "install ok installed" in status:
            names.update(x.strip().split(" ")[0] for x in provides.split(",") if x.strip())
    return names


def apt(name, args):
    sub = next((a for a in args if not a.startswith("-")), None)
    build = os.environ.get("PRACTICUM_SHIM_MODE") == "build"
    if build and sub != "install":
        real(name, args)
    if sub in ("update", "upgrade", "clean", "autoclean", "autoremove"):
        say(f"{name} {sub}: nothing to do offline")
        return 0
    if sub != "install":
        real(name, args)
    at = args.index("install")
    pkgs = [a.split("=")[0].split(":")[0] for a in args[at + 1:] if not a.startswith("-")]
    provided = provided_names()
    missing = [p for p in pkgs if not have_package(p, provided)]
    if build:  # image build: install what the machine lacks, through the real apt-get
        if not missing:
            print(f"{', '.join(pkgs) or 'nothing'}: already on this machine")
            return 0
        real(name, [*args[:at + 1], *[a for a in args[at + 1:] if a.startswith("-")], *missing])
    if missing and offline_install(name, missing):  # fetched ahead into the image (the task's scripts name it)
        print(f"{', '.join(missing)}: installed from the packages fetched ahead")
        return 0
    if missing:
        say(f"{name} install: {', '.join(missing)} not installed in the task image, not fetched ahead, and the verifier "
            "has no network; install it in the task's Dockerfile (RUN apt-get install ...)")
        return 100
    print(f"{', '.join(pkgs) or 'nothing'}: already installed")
    return 0


def offline_install(name, pkgs):
    """Install ``pkgs`` with the real apt-get from the packages the image build fetched ahead (apt's
    cache); False when one of them (or of what it depends on) is not there."""
    import subprocess

    exe = real_path(name)
    if exe is None:
        return False
    r = subprocess.run([exe, "install", "-y", "-qq", "--no-download", *pkgs], capture_output=True, text=True,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    return r.returncode == 0


LOCAL_INDEX = re.compile(r"^(?:file:|/|\.|https?://(?:localhost|127\.0\.0\.1|\[::1\]|0\.0\.0\.0)(?:[:/]|$))")


def local_index(args):
    """Whether a pip command names an index or folder of its own on this machine (a local PyPI
    server the task runs, a wheel folder): a remote one is served from the toolchain as usual."""
    for i, a in enumerate(args):
        opt, eq, val = a.partition("=")
        if opt in ("-i", "--index-url", "--extra-index-url", "-f", "--find-links"):
            value = val if eq else (args[i + 1] if i + 1 < len(args) else "")
            if LOCAL_INDEX.match(value):
                return True
    return False


def pip(args, python="python3"):
    if args[:1] == ["install"] and local_index(args):  # the real pip, which reaches it
        real(python, ["-m", "pip", *args])
    if args[:1] == ["install"]:
        missing = missing_from(packages(args[1:]), _installed())
        if missing and not missing_from(missing, _prefetched()):
            # what the toolchain lacks was fetched ahead into the image (the project's requirements
            # files, what the solution writes into them): the image's pip installs it, offline
            real(python, ["-m", "pip", *args])
        check(packages(args[1:]), "pip install")
        expose_toolchain(python)
        return 0
    run_tool("python3", ["-m", "pip", *args])


def expose_toolchain(python):
    """After ``pip install``, what it installed is importable by ``python``, as after a real install:
    a ``.pth`` in that interpreter's site-packages adds the toolchain, after the image's own packages."""
    import subprocess

    exe = next((os.path.join(d, python) for d in os.environ.get("PATH", "").split(os.pathsep)
                if d and d != SHIMS and os.access(os.path.join(d, python), os.X_OK)), None)
    if exe is None:
        return
    try:
        purelib = subprocess.run([exe, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 capture_output=True, text=True, timeout=30).stdout.strip()
        if purelib:
            os.makedirs(purelib, exist_ok=True)
            with open(os.path.join(purelib, "zz-practicum-toolchain.pth"), "w") as f:
                f.write(TOOLCHAIN + "\n")
    except (OSError, subprocess.SubprocessError) as e:
        say(f"pip install: could not make the toolchain importable by {python}: {e}")


def python(name, args):
    """``python3 -m pip ...`` as the pip stand-in (for that interpreter); anything else: the real one."""
    if args[:2] == ["-m", "pip"]:
        return pip(args[2:], python=name)
    real(name, args)


def main():
    name = os.path.basename(sys.argv[0])
    args = sys.argv[1:]
    if os.environ.get("PRACTICUM_SHIM_MODE") == "build" and name not in ("apt-get", "apt"):
        url = next((a for a in args if UV_INSTALLER.search(a)), None) if name in ("curl", "wget") else None
        tools = os.environ.get("PRACTICUM_UV_RELEASES")
        if url is not None and tools:  # the uv installer, whose site the build cannot reach: uv from PyPI
            m = re.search(r"astral\.sh/uv/([^/\s]+)/install\.sh", url)
            return fetch(name, args, build_from=os.path.join(tools, m.group(1) if m else "latest"))
        real(name, args)  # an image build has the network: only package installs are filtered
    if name in ("curl", "wget"):
        return fetch(name, args)
    if name in ("apt-get", "apt"):
        return apt(name, args)
    if name == "uvx":
        return uvx(args)
    if name == "uv":
        return uv(args)
    if name in ("pip", "pip3"):
        return pip(args)
    if name in ("python", "python3"):
        return python(name, args)
    if name == "pytest":
        run_tool("pytest", args)
    say(f"unknown stand-in {name!r}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
