"""Task images: a task's Dockerfile built once into a cached copy-on-write layer, and the
offline verifier toolchain its tests ask for.

``build_image(task)`` executes the final stage of ``environment/Dockerfile``
(:mod:`practicum.envs.dockerfile`) in a container-mode sandbox session
(:mod:`practicum.sandbox.container`) whose writes go to a host folder: that folder is the
image's layer, cached under ``$PRACTICUM_HOME/images/<key>`` where the key hashes the
Dockerfile, every file of the build context, the machine's package state and this builder's
version. Sessions of the task then run over that layer (:class:`Image.container`).

* ``FROM`` names an image that is never pulled: every image is built over this machine's own
  root filesystem (Debian 12 with its Python 3.11, gcc, git, curl...); the name is recorded.
* ``COPY``/``ADD`` copy from the build context (``environment/``) exactly as Docker does:
  a folder's contents, several sources into a folder, a file renamed, absolute destinations
  outside the workdir, relative ones against it, ``--chown``/``--chmod``, local tar archives
  unpacked by ``ADD``.
* ``RUN`` lines run once, at build time, as root, in the working folder and environment in
  force, with this machine's network (which reaches only the package registries: ``apt-get``
  and ``pip`` work through their ordinary clients; a package the machine has is a no-op). The
  agent and the verifier never have a network.
* ``COPY --from=stage``: the earlier stage is built first as an image of its own (cached under
  ``<key>-s<index>``), and its layer is shown to the build read-only (:func:`_stage_copy_script`).
* After the last line, what the task's solution and tests install at run time (``apt-get
  install``, ``pip install``: :func:`install_requests`) is downloaded, never installed, so that
  those installs work offline (:func:`_prefetch_steps`).
* A build that fails raises :class:`ImageBuildError` naming the Dockerfile line, the command
  and the last lines of its output; nothing half-built is cached.

The verifier toolchain (:func:`verifier_toolchain`): Terminal-Bench 2.0's ``test.sh`` files
bootstrap their tools from the internet (``apt-get install curl``, the uv installer by
``curl``, ``uvx -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 pytest --ctrf ...``). The packages
those lines name are installed here, ahead of time, into a cached folder that sessions see
read-only at ``/opt/practicum/toolchain``; the verifier's ``PATH`` starts with stand-ins
(``/opt/practicum/bin``: ``curl``/``wget`` for the uv installer, ``uv``, ``uvx``, ``apt-get``,
``apt``, ``pip``, ``pip3``, ``pytest``) that serve those lines offline (see
``verifier_shim.py``); anything else goes to the real tool.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import glob
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from practicum.envs.dockerfile import DEFAULT_PATH, Copy, ImageRecipe, MakeDir, Run, parse_dockerfile
from practicum.errors import PracticumError
from practicum.sandbox.base import Bind, Container, Limits

BUILDER_VERSION = "8"  # 4: ENV PATH extends the base PATH; uv from its installer; COPY --from uv. 5: python link test.
# 6: the packages the task's scripts install, fetched ahead; /etc/pip.conf. 7: with setuptools and wheel; no no-index.
# 8: the real apt-get downloads (upgrades of installed packages included)
TOOLCHAIN_INSIDE = "/opt/practicum/toolchain"
SHIMS_INSIDE = "/opt/practicum/bin"
CONTEXT_INSIDE = "/.practicum-context"
STAGES_INSIDE = "/.practicum-stages"  # the layers of the earlier stages a build copies from
SHIM_SOURCE = Path(__file__).with_name("verifier_shim.py")
SHIM_NAMES = ("curl", "wget", "uv", "uvx", "apt-get", "apt", "pip", "pip3", "pytest", "python", "python3")
# An image build's: what its network cannot reach (the uv installer's site) and installs of what the machine
# has. Not python: uv, looking for interpreters in a RUN line, resolves the link and ran the stand-in itself.
BUILD_SHIM_NAMES = ("curl", "wget", "apt-get", "apt")
# Environment of every build step, as the python images and a non-interactive build have it.
BUILD_ENV = {"DEBIAN_FRONTEND": "noninteractive", "PIP_BREAK_SYSTEM_PACKAGES": "1", "PIP_ROOT_USER_ACTION": "ignore"}
# Mount points the build session's sandbox created in the layer; not part of the image.
NOT_IMAGE = (CONTEXT_INSIDE.lstrip("/"), STAGES_INSIDE.lstrip("/"), "opt/practicum", "dev", "proc")


class ImageBuildError(PracticumError):
    """A task image could not be built (the message names the step and its output)."""


@dataclass(frozen=True)
class Image:
    """A built task image: what a session needs to run over it."""

    key: str
    layer: Path | None  # None: the Dockerfile changes nothing (FROM/WORKDIR/ENV only)
    workdir: str | None
    env: tuple[tuple[str, str], ...]
    base: str | None
    notes: tuple[str, ...] = ()

    def container(self, keep_processes: bool = False, extra_env: dict[str, str] | None = None) -> Container:
        """The container-mode options of a session of this image (``keep_processes``: see
        :class:`~practicum.sandbox.base.Container`; ``extra_env``: set over the image's, as a compose
        file's ``environment`` is)."""
        env = tuple({**dict(self.env), **(extra_env or {})}.items())
        return Container(layers=(str(self.layer),) if self.layer else (), env=env, keep_processes=keep_processes)


def home() -> Path:
    from practicum.models import practicum_home

    return practicum_home()


# Where the machine's clients find the certificates its network needs (a registry proxy with its
# own authority): the build's RUN lines reach that network, so they get them too. pip reads the
# machine's /etc/pip.conf anyway; uv, which carries its own roots, reads SSL_CERT_FILE ("invalid
# peer certificate: UnknownIssuer" from `uv run` in a RUN line without it).
TLS_VARIABLES = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT",
                 "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO")


SYSTEM_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"  # Debian's trust store, with the authorities the machine adds


def _host_tls() -> dict[str, str]:
    """The machine's certificate settings (:data:`TLS_VARIABLES`) that name a file or folder the
    build sees; where SSL_CERT_FILE is not set, the system's bundle (what curl and apt trust)."""
    tls = {"SSL_CERT_FILE": SYSTEM_BUNDLE} if os.path.isfile(SYSTEM_BUNDLE) else {}
    return {**tls, **{k: v for k in TLS_VARIABLES if (v := os.environ.get(k)) and os.path.exists(v)}}


def _host_state() -> str:
    """What of the machine a layer depends on: its package database."""
    h = hashlib.sha256()
    for p in ("/var/lib/dpkg/status", "/etc/os-release"):
        with contextlib.suppress(OSError):
            h.update(Path(p).read_bytes())
    return h.hexdigest()[:16]


def _context_hash(context: Path) -> str:
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(context):
        dirnames.sort()
        for name in sorted(filenames):
            p = Path(dirpath) / name
            rel = p.relative_to(context).as_posix()
            st = p.lstat()
            h.update(f"{rel}\0{st.st_mode & 0o7777}\0".encode())
            if p.is_symlink():
                h.update(os.readlink(p).encode())
            elif p.is_file():
                h.update(p.read_bytes())
    return h.hexdigest()


@contextlib.contextmanager
def _locked(path: Path):
    """Exclusive across processes (flock) and threads of this one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with _THREAD_LOCKS.setdefault(str(path), threading.Lock()), open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


_THREAD_LOCKS: dict[str, threading.Lock] = {}
_BUILDS: dict[str, asyncio.Lock] = {}
_FAILED: dict[str, str] = {}  # image key -> why its build failed (in this process)


def image_key(dockerfile: Path, context: Path | None = None, prefetch: tuple[list[str], list[str]] = ([], [])) -> str:
    h = hashlib.sha256(f"{BUILDER_VERSION}\0{_host_state()}\0".encode())
    h.update(dockerfile.read_bytes())
    h.update(_context_hash(context or dockerfile.parent).encode())
    if prefetch[0] or prefetch[1]:
        h.update(f"\0prefetch\0{prefetch[0]}\0{prefetch[1]}".encode())
    return h.hexdigest()[:24]


async def build_image(dockerfile: Path, sandbox: str = "auto", timeout_s: float = 600.0,
                      log=None, context: Path | None = None,
                      prefetch: tuple[list[str], list[str]] = ([], [])) -> Image:
    """The image of ``dockerfile``, built now or from cache. The build context is ``context``,
    else the Dockerfile's folder (a task's compose file can name another: :mod:`practicum.domains.terminal.tasks`).
    ``prefetch``: the Debian packages and Python requirements that the task's scripts install
    at run time (:func:`install_requests`), downloaded into the image (:func:`_prefetch_steps`)."""
    context = context or dockerfile.parent
    try:
        text = dockerfile.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ImageBuildError(f"{dockerfile}: cannot read: {e}") from None
    recipe = parse_dockerfile(text)
    if recipe.problems:
        raise ImageBuildError(f"{dockerfile}: " + "; ".join(str(p) for p in recipe.problems))
    key = image_key(dockerfile, context, prefetch)
    return await _image(recipe, context, key, sandbox, timeout_s, log, prefetch, image_key(dockerfile, context))


async def _image(recipe: ImageRecipe, context: Path, key: str, sandbox: str, timeout_s: float, log,
                 prefetch: tuple[list[str], list[str]] = ([], []), stage_key: str = "") -> Image:
    """The image of ``recipe``, built now or from cache under ``key``; first the earlier stages
    it copies from (``COPY --from=stage``), each an image of its own under ``stage_key``-s<index>."""
    notes = (f"FROM {recipe.base} is mapped to this machine's own root filesystem",) if recipe.base else ()
    env = tuple({**BUILD_ENV, **recipe.env}.items())
    stage_layers: dict[str, Path | None] = {}
    for index, stage in recipe.stages.items():
        if any(isinstance(s, Copy) and s.stage == index for s in recipe.steps):
            built = await _image(stage, context, f"{stage_key or key}-s{index}", sandbox, timeout_s, log,
                                 stage_key=f"{stage_key or key}-s{index}")
            stage_layers[index] = built.layer
            notes += (f"stage {index} ({stage.base or 'no base'}), which the image copies from, was built first",)
    base_steps = _base_mapping(recipe)
    if base_steps:
        notes += (f"{recipe.base}: `python` is linked to this machine's python3, as the python images have it",)
        recipe.steps[:0] = base_steps
    if prefetch[0] or prefetch[1]:
        notes += (f"fetched ahead for installs offline: {', '.join([*prefetch[0], *prefetch[1]])}",)
        recipe.steps += _prefetch_steps(*prefetch)
    changes = [s for s in recipe.steps if not isinstance(s, MakeDir)]
    if not changes:
        return Image(key, None, recipe.workdir, env, recipe.base, notes)
    root = home() / "images"
    final = root / key
    if (final / "complete").exists():
        return Image(key, final, recipe.workdir, env, recipe.base, notes)
    async with _BUILDS.setdefault(key, asyncio.Lock()):  # one build per image in this process
        if key in _FAILED:  # a failed build is not retried by the same process
            raise ImageBuildError(_FAILED[key])
        lock = await asyncio.to_thread(_acquire, root / f"{key}.lock")  # ... and across processes
        try:
            if not (final / "complete").exists():
                await _build(recipe, context, root, key, sandbox, timeout_s, log, stage_layers)
        except ImageBuildError as e:
            _FAILED[key] = str(e)
            raise
        finally:
            _release(lock)
    return Image(key, final, recipe.workdir, env, recipe.base, notes)


def _acquire(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    f = open(path, "w")  # noqa: SIM115 - held until _release
    fcntl.flock(f, fcntl.LOCK_EX)
    return f


def _release(f) -> None:
    fcntl.flock(f, fcntl.LOCK_UN)
    f.close()


async def _build(recipe: ImageRecipe, context: Path, root: Path, key: str, sandbox: str, timeout_s: float, log,
                 stage_layers: dict[str, Path | None] | None = None) -> None:
    final = root / key
    build = Path(tempfile.mkdtemp(prefix=f"{key}.build-", dir=root))
    try:
        await _execute(recipe, context, build, sandbox, timeout_s, log, stage_layers or {})
        for rel in NOT_IMAGE:
            p = build / "upper" / "_root" / rel
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
        shutil.rmtree(build / "work", ignore_errors=True)
        (build / "complete").write_text(f"{time.time()}\n")
        if final.exists():
            shutil.rmtree(final)
        build.rename(final)
    finally:
        if build.exists():
            shutil.rmtree(build, ignore_errors=True)


PYTHON_IMAGE = re.compile(r"(^|/)python[:\-@]|(^|/)python$")


def _base_mapping(recipe: ImageRecipe) -> list[Run]:
    """Steps that make this machine's root look like the image FROM names, where it differs in
    a way tasks rely on: the official python images have ``python`` (not only ``python3``)."""
    if not recipe.base or not PYTHON_IMAGE.search(recipe.base.split(" ")[0]):
        return []
    from practicum.envs.dockerfile import Context

    ctx = Context("/", (("PATH", DEFAULT_PATH),), "root", ("/bin/sh", "-c"))
    # not `command -v python`: the build's PATH starts with the stand-ins, one of which is named python
    script = "[ -e /usr/local/bin/python ] || [ -e /usr/bin/python ] || ln -s /usr/bin/python3 /usr/local/bin/python"
    return [Run(0, ("/bin/sh", "-c", script), ctx, "link python to python3")]


def _stage_context(context: Path) -> Path:
    """A copy of the build context owned by the container's root (so that files the host's
    root alone may read are readable by the build, as Docker's context is)."""
    from practicum.sandbox.container import ROOT_BASE

    staged = Path(tempfile.mkdtemp(prefix="practicum-context-"))
    os.chmod(staged, 0o755)
    shutil.copytree(context, staged / "c", symlinks=True)
    for dirpath, dirnames, filenames in os.walk(staged):
        for name in [*dirnames, *filenames]:
            os.lchown(os.path.join(dirpath, name), ROOT_BASE, ROOT_BASE)
    os.chown(staged / "c", ROOT_BASE, ROOT_BASE)
    return staged


def tool_files(tool: str, spec: str) -> Path:
    """A folder holding the files a tool image of :data:`~practicum.envs.dockerfile.TOOL_IMAGES`
    serves (``uv``, ``uvx``), from the tool's PyPI wheel for this machine (``spec``: ``==0.8.15``,
    ``==0.8.*``, or ``""`` for the newest), cached under ``$PRACTICUM_HOME/images/tools``."""
    root = home() / "images" / "tools"
    root.mkdir(parents=True, exist_ok=True)
    pinned = root / f"{tool}-{spec.removeprefix('==')}"
    if re.fullmatch(r"==\d+\.\d+\.\d+", spec) and (pinned / "complete").exists():
        return pinned  # an exact version is fetched once per machine
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                            "--dest", tmp, f"{tool}{spec}"], capture_output=True, text=True, timeout=600)
        wheels = sorted(Path(tmp).glob(f"{tool}-*.whl"))
        if r.returncode != 0 or not wheels:
            raise ImageBuildError(f"cannot fetch {tool}{spec} from the package registry: {r.stderr.strip()[-500:]}")
        version = wheels[0].name.split("-")[1]
        folder = root / f"{tool}-{version}"
        if not (folder / "complete").exists():
            part = Path(tempfile.mkdtemp(dir=root))
            with zipfile.ZipFile(wheels[0]) as z:
                for info in z.infolist():
                    name = info.filename
                    if name.startswith(f"{tool}-{version}.data/scripts/") and not name.endswith("/"):
                        target = part / Path(name).name
                        target.write_bytes(z.read(info))
                        target.chmod(0o755)
            (part / "complete").write_text(f"{wheels[0].name}\n")
            shutil.rmtree(folder, ignore_errors=True)
            part.rename(folder)
    return folder


UV_INSTALLER_URL = re.compile(r"astral\.sh/uv/(?:(\d+\.\d+\.\d+)/)?install\.sh")
UV_RELEASES = ".practicum-tools/uv-releases"  # in the staged context: one folder per uv version a RUN installs


def _serve_tools(recipe: ImageRecipe, staged: Path) -> None:
    """Each COPY --from a tool image: its files put in the staged context, and the step made a
    COPY of them from there. Each uv release a RUN line fetches with uv's installer
    (``curl -LsSf https://astral.sh/uv/0.9.7/install.sh | sh``, a site the build cannot reach):
    its binaries put in the staged context, where the curl stand-in's installer copies them
    from (``PRACTICUM_UV_RELEASES``)."""
    for step in recipe.steps:
        if isinstance(step, Run):
            for m in UV_INSTALLER_URL.finditer(" ".join(step.argv)):
                version = m.group(1)
                _stage_files(tool_files("uv", f"=={version}" if version else ""), ("uv", "uvx"), staged,
                             f"{UV_RELEASES}/{version or 'latest'}", step.line)
    for i, step in enumerate(recipe.steps):
        if isinstance(step, Copy) and step.tool is not None:
            folder = tool_files(*step.tool)
            rel = f".practicum-tools/{folder.name}"
            _stage_files(folder, tuple(src.lstrip("/") for src in step.sources), staged, rel, step.line)
            recipe.steps[i] = dataclasses.replace(step, sources=tuple(f"{rel}/{s.lstrip('/')}" for s in step.sources),
                                                  tool=None)


def _stage_files(folder: Path, names: tuple[str, ...], staged: Path, rel: str, line: int) -> None:
    """Copy ``names`` of ``folder`` to ``staged/rel``, owned (with the folders on the way) by the
    container's root, as the staged context is."""
    from practicum.sandbox.container import ROOT_BASE

    target = staged / rel
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        if not (folder / name).is_file():
            raise ImageBuildError(f"Dockerfile line {line}: {folder.name} has no {name}")
        shutil.copy2(folder / name, target / name)
        os.lchown(target / name, ROOT_BASE, ROOT_BASE)
    d = target
    while d != staged:
        os.chown(d, ROOT_BASE, ROOT_BASE)
        d = d.parent


async def _execute(recipe: ImageRecipe, context: Path, build: Path, sandbox: str, timeout_s: float, log,
                   stage_layers: dict[str, Path | None]) -> None:
    from practicum.sandbox import get_sandbox

    staged = _stage_context(context)
    try:
        await asyncio.to_thread(_serve_tools, recipe, staged / "c")
    except (ImageBuildError, OSError, subprocess.SubprocessError) as e:
        shutil.rmtree(staged, ignore_errors=True)
        raise e if isinstance(e, ImageBuildError) else ImageBuildError(f"serving a tool image: {e}") from e
    limits = Limits(timeout_s=timeout_s, cpu_s=timeout_s, memory_mb=4096, processes=512, file_size_mb=4096,
                    workspace_mb=4096, output_bytes=256 * 1024, network=True)
    stage_binds = [Bind(str(layer / "upper"), f"{STAGES_INSIDE}/{index}") for index, layer in stage_layers.items()
                   if layer is not None]
    session = await get_sandbox(sandbox).session(
        limits, workdir="/", binds=[Bind(str(staged / "c"), CONTEXT_INSIDE), Bind(str(shims_dir(BUILD_SHIM_NAMES)), SHIMS_INSIDE),
                                    *stage_binds],
        container=Container(upper=str(build)))
    try:
        for step in recipe.steps:
            env = {**BUILD_ENV, **_host_tls(), **step.context.environ}
            # apt-get/apt skip what the machine already has (a package, a package that provides
            # it, or a command of that name), so that an image's installs do not fight the base
            env["PATH"] = f"{SHIMS_INSIDE}:{env.get('PATH', '')}"
            env["PRACTICUM_SHIM_MODE"] = "build"
            env["PRACTICUM_UV_RELEASES"] = f"{CONTEXT_INSIDE}/{UV_RELEASES}"
            if isinstance(step, MakeDir):
                argv, what = ["mkdir", "-p", step.path], f"WORKDIR {step.path}"
            elif isinstance(step, Copy) and step.stage is not None:
                argv = ["/bin/sh", "-c", _stage_copy_script(step, stage_layers.get(step.stage) is not None)]
                what = f"COPY --from={step.stage} {' '.join(step.sources)} {step.dest}"
            elif isinstance(step, Copy):
                argv = ["/bin/sh", "-c", _copy_script(step, staged / "c")]
                what = f"{'ADD' if step.unpack else 'COPY'} {' '.join(step.sources)} {step.dest}"
            else:
                assert isinstance(step, Run)
                argv, what = list(step.argv), f"RUN {step.text[:200]}"
            cwd = "/" if isinstance(step, MakeDir) else step.context.workdir
            wrapped = ["/bin/sh", "-c", 'cd "$1" && shift && exec "$@"', "sh", cwd, *argv]
            if log is not None:
                log(what)
            r = await session.exec(wrapped, env=env, timeout_s=timeout_s)
            if not r.ok:
                tail = "\n".join((r.stdout + r.stderr).rstrip().splitlines()[-15:])
                why = f"exit {r.exit_code}" if r.status == "ok" else f"{r.status}: {r.detail}"
                raise ImageBuildError(f"Dockerfile line {step.line}: {what} failed ({why}):\n{tail}")
    finally:
        await session.close()
        shutil.rmtree(staged, ignore_errors=True)


def _copy_script(step: Copy, context: Path) -> str:
    """The shell commands of one COPY/ADD, sources expanded on the host side (as Docker does
    against its context); missing sources fail the step with Docker's message."""
    q = shlex.quote
    lines = ["set -e"]
    dest = step.dest
    matched: list[str] = []
    for src in step.sources:
        rel = os.path.normpath(src.lstrip("/")) if src.strip("/") not in ("", ".") else "."
        hits = sorted(glob.glob(rel, root_dir=context)) if any(c in rel for c in "*?[") else (
            [rel] if os.path.lexists(context / rel) else [])
        if not hits:
            return f"echo 'COPY failed: file not found in build context: {src}' >&2; exit 1"
        matched += hits
    into_dir = step.dest_is_dir or len(matched) > 1
    for rel in matched:
        host = context / rel
        inside = f"{CONTEXT_INSIDE}/{rel}" if rel != "." else CONTEXT_INSIDE
        if host.is_dir() and not host.is_symlink():
            lines.append(f"mkdir -p {q(dest)}")
            lines.append(f"cp -R --preserve=mode,timestamps --no-dereference {q(inside)}/. {q(dest)}/")
            targets = [dest]
        elif step.unpack and _is_tar(host):
            lines.append(f"mkdir -p {q(dest)}")
            lines.append(f"tar -xf {q(inside)} -C {q(dest)} --no-same-owner")
            targets = [dest]
        else:
            name = os.path.basename(rel)
            if into_dir:
                lines.append(f"mkdir -p {q(dest)}")
                target = f"{dest.rstrip('/')}/{name}"
            else:  # a file: into dest when dest is an existing folder, else renamed to dest
                lines.append(f"if [ -d {q(dest)} ]; then t={q(dest.rstrip('/') + '/' + name)}; else mkdir -p "
                             f"\"$(dirname {q(dest)})\"; t={q(dest)}; fi")
                target = "$t"
            lines.append(f"cp --preserve=mode,timestamps --no-dereference {q(inside)} " +
                         (q(target) if target != "$t" else '"$t"'))
            targets = [target]
        for t in targets:
            t_arg = '"$t"' if t == "$t" else q(t)
            if step.chown:
                lines.append(f"chown -R {q(step.chown)} {t_arg}")
            if step.chmod:
                lines.append(f"chmod -R {q(step.chmod)} {t_arg}")
    return "\n".join(lines)


def _stage_copy_script(step: Copy, has_layer: bool) -> str:
    """The shell commands of one ``COPY --from=stage``: each source as that stage left it - its
    layer's copy (``/.practicum-stages/<index>``: ``<top>/...`` for the machine's top folders
    that the layer overlays, ``_root/...`` for the rest), else, where the stage did not change it,
    the machine's own (every stage is built over the same root filesystem). A path the stage
    deleted (a whiteout) is not found."""
    q = shlex.quote
    layer = f"{STAGES_INSIDE}/{step.stage}"
    lines = ["set -e", "found() { [ -e \"$1\" ] || [ -L \"$1\" ]; }"]
    into_dir = step.dest_is_dir or len(step.sources) > 1
    dest = step.dest
    for src in step.sources:
        top, _, rest = src.lstrip("/").partition("/")
        candidates = [f"{layer}/{top}/{rest}".rstrip("/"), f"{layer}/_root/{src.lstrip('/')}".rstrip("/")] if has_layer else []
        lines.append("s=")
        for c in candidates:
            lines.append(f"[ -z \"$s\" ] && found {q(c)} && s={q(c)} || true")
        lines.append(f"[ -z \"$s\" ] && found {q(src)} && s={q(src)} || true")
        lines.append(f"if [ -z \"$s\" ] || [ -c \"$s\" ]; then echo 'COPY --from={step.stage}: {src} not found in that stage' >&2; exit 1; fi")
        name = os.path.basename(src.rstrip("/")) or "."
        lines.append(f"if [ -d \"$s\" ] && [ ! -L \"$s\" ]; then mkdir -p {q(dest)}; "
                     f"cp -R --preserve=mode,timestamps --no-dereference \"$s\"/. {q(dest)}/; t={q(dest)}; "
                     + (f"else mkdir -p {q(dest)}; t={q(dest.rstrip('/') + '/' + name)}; " if into_dir else
                        f"elif [ -d {q(dest)} ]; then t={q(dest.rstrip('/') + '/' + name)}; "
                        f"else mkdir -p \"$(dirname {q(dest)})\"; t={q(dest)}; ")
                     + "cp --preserve=mode,timestamps --no-dereference \"$s\" \"$t\"; fi")
        if step.chown:
            lines.append(f"chown -R {q(step.chown)} \"$t\"")
        if step.chmod:
            lines.append(f"chmod -R {q(step.chmod)} \"$t\"")
    return "\n".join(lines)


def _is_tar(p: Path) -> bool:
    try:
        return tarfile.is_tarfile(p)
    except OSError:
        return False


# --- the verifier toolchain -----------------------------------------------------------------------

_REQ = r"[A-Za-z0-9][A-Za-z0-9._\-\[\],]*(?:[<>=!~]=?[^\s'\";|&]+)?"


def _command_lines(scripts: list[str]):
    """The words of each line of shell ``scripts``, continuations joined, comments dropped."""
    for text in scripts:
        for line in re.sub(r"\\\n", " ", text).splitlines():
            code = line.split("#", 1)[0]
            try:
                yield shlex.split(code)
            except ValueError:
                yield code.split()


def verifier_requirements(scripts: list[str]) -> list[str]:
    """The Python packages that verifier scripts install at run time: ``uvx``/``uv run``
    ``-w``/``--with`` options, the tool ``uvx`` runs, ``uv add``, ``pip install``, ``uv pip
    install``. ``pytest`` is always included."""
    found: list[str] = ["pytest"]
    for words in _command_lines(scripts):
        in_uv = False  # -w/--with are uvx's and uv run's options (`figlet -w 200` is not a package)
        for i, w in enumerate(words):
            if w in ("&&", "||", ";", "|"):
                in_uv = False
            elif os.path.basename(w) == "uvx" or (os.path.basename(w) == "uv" and words[i + 1:i + 2] in (["run"], ["tool"])):
                in_uv = True
            elif not in_uv:
                continue
            elif w in ("-w", "--with") and i + 1 < len(words):
                found += [r for r in words[i + 1].split(",") if r]
            elif w.startswith("--with="):
                found += [r for r in w.split("=", 1)[1].split(",") if r]
        _installs(words, found)
    out: list[str] = []
    for r in found:
        r = r.strip()
        if re.fullmatch(_REQ, r) and r not in out:
            out.append(r)
    return out


def _installs(words: list[str], found: list[str]) -> None:
    """Packages after ``pip install``, ``uv add``, ``uv pip install`` and the tool of ``uvx``."""
    n = len(words)
    for i, w in enumerate(words):
        base = os.path.basename(w)
        start = None
        if base in ("pip", "pip3") and i + 1 < n and words[i + 1] == "install":
            start = i + 2
        elif base == "uv" and i + 1 < n and words[i + 1] == "add":
            start = i + 2
        elif base == "uv" and i + 2 < n and words[i + 1] == "pip" and words[i + 2] == "install":
            start = i + 3
        elif w == "-m" and i + 2 < n and words[i + 1] == "pip" and words[i + 2] == "install":
            start = i + 3
        elif base == "uvx":
            j = i + 1
            while j < n and words[j].startswith("-"):
                j += 2 if words[j] in _UV_VALUED else 1
            if j < n:
                found.append(words[j])
            continue
        if start is None:
            continue
        skip = False
        for x in words[start:]:
            if x in ("&&", "||", ";", "|") or re.match(r"\d*[<>]|&>", x):  # the command ends, or a redirection
                break
            if skip:  # the value of an option that takes one (-r requirements.txt, --index-url URL)
                skip = False
            elif x in _PIP_VALUED:
                skip = True
            elif not x.startswith("-"):
                found.append(x)


# uvx / uv run options whose value is the next word (`uvx --index URL -w torch pytest`: the tool is pytest)
_UV_VALUED = frozenset(("-w", "--with", "-p", "--python", "--from", "--with-requirements", "--index-url",
                        "--extra-index-url", "--index", "--default-index", "--index-strategy", "-i", "--find-links",
                        "-f", "--directory", "--project", "--env-file", "-C", "--config-setting", "--cache-dir",
                        "--python-platform", "--keyring-provider", "--resolution", "--prerelease", "--exclude-newer",
                        "--link-mode", "--with-editable", "--refresh-package"))

# pip install options whose value is the next word: never a package
_PIP_VALUED = frozenset(("-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-i", "--index-url",
                         "--extra-index-url", "-f", "--find-links", "-t", "--target", "--prefix", "--root",
                         "--python-version", "--platform", "--implementation", "--abi", "--src", "--upgrade-strategy",
                         "--no-binary", "--only-binary", "--progress-bar", "--python", "-p", "--group"))


# --- packages the task's own scripts install, fetched ahead --------------------------------------

# Too large to fetch for every image that names them (PyPI's torch is a CUDA build of several GB);
# a task that needs one installs it in its Dockerfile, where the build has the network.
NOT_PREFETCHED = frozenset(("torch", "torchvision", "torchaudio", "tensorflow", "jax", "jaxlib"))
PREFETCH_WHEELS = "/var/cache/practicum/wheels"  # in the image: pip's find-links (the image's /etc/pip.conf)
_DEB = re.compile(r"[a-z0-9][a-z0-9+.\-]+")


REQUIREMENTS_FILE = re.compile(r"(?:^|/)requirements[\w.\-]*\.txt$")
# a here-document written to a requirements file: `cat > service/requirements.txt <<'EOF'` (either order)
_HEREDOC_REQS = re.compile(
    r"""(?:>\s*['"]?(?P<a>[^\s'"<>;&|]*requirements[\w.\-]*\.txt)['"]?\s*<<-?\s*['"]?(?P<d1>\w+)['"]?"""
    r"""|<<-?\s*['"]?(?P<d2>\w+)['"]?\s*>\s*['"]?(?P<b>[^\s'"<>;&|]*requirements[\w.\-]*\.txt)['"]?)[^\n]*\n""")


def requirement_lines(text: str) -> list[str]:
    """The requirements of a requirements file: no comments, options (``-r``, ``--index-url``),
    URLs or local paths."""
    out = []
    for line in text.splitlines():
        r = line.split(" #", 1)[0].split("#", 1)[0].strip() if not line.lstrip().startswith("#") else ""
        if r and not r.startswith("-") and "://" not in r and not r.startswith((".", "/")) and re.fullmatch(_REQ, r.replace(" ", "")):
            out.append(r.replace(" ", ""))
    return out


def written_requirements(scripts: list[str]) -> list[str]:
    """Requirements that ``scripts`` write into a requirements file with a here-document (a
    solution that fixes ``service/requirements.txt``, which the tests then ``pip install -r``)."""
    out: list[str] = []
    for text in scripts:
        for m in _HEREDOC_REQS.finditer(text):
            delim = m.group("d1") or m.group("d2")
            body = text[m.end():]
            end = re.search(rf"^\s*{re.escape(delim)}\s*$", body, re.M)
            out += requirement_lines(body[: end.start()] if end else "")
    return out


def context_requirements(context: Path, limit: int = 20) -> list[str]:
    """The requirements of the requirements files in a build context (``requirements.txt``,
    ``requirements-dev.txt``...), at most ``limit`` files: what the task's project installs."""
    out: list[str] = []
    files = sorted(Path(d) / f for d, _dirs, names in os.walk(context)  # links to folders are not followed
                   for f in names if REQUIREMENTS_FILE.search(f) and os.path.isfile(os.path.join(d, f)))
    for p in files[:limit]:
        try:
            out += requirement_lines(p.read_text(errors="replace"))
        except OSError:
            continue
    return out


def install_requests(scripts: list[str], requirements: list[str] | None = None) -> tuple[list[str], list[str]]:
    """The Debian packages and the Python requirements that ``scripts`` install at run time
    (``apt-get``/``apt install``, the pip forms of :func:`verifier_requirements`, and what they
    write into requirements files), with ``requirements`` (the build context's requirements
    files), each once, in order: what a task's solution and tests would fetch from the network."""
    debs: list[str] = []
    reqs: list[str] = [*written_requirements(scripts), *(requirements or [])]
    for words in _command_lines(scripts):
        found: list[str] = []
        _installs([w for w in words if os.path.basename(w) != "uvx"], found)
        reqs += [r for r in found if re.fullmatch(_REQ, r) and not r.endswith((".txt", ".toml", ".cfg", ".whl"))]
        for i, w in enumerate(words):
            if os.path.basename(w) not in ("apt-get", "apt"):
                continue
            rest = words[i + 1:]
            j = next((k for k, x in enumerate(rest) if not x.startswith("-")), None)
            if j is None or rest[j] != "install":
                continue
            for x in rest[j + 1:]:
                if x in ("&&", "||", ";", "|") or re.match(r"\d*[<>]|&>", x):
                    break
                name = x.split("=", 1)[0].split(":", 1)[0]
                if not x.startswith("-") and _DEB.fullmatch(name):
                    debs.append(name)
    pip_names = [re.split(r"[<>=!~\[ ;]", r, maxsplit=1)[0].lower() for r in reqs]
    reqs = [r for r, n in zip(reqs, pip_names, strict=True) if n not in NOT_PREFETCHED]
    return list(dict.fromkeys(debs)), list(dict.fromkeys(reqs))


def _prefetch_steps(debs: list[str], reqs: list[str]) -> list[Run]:
    """Build steps, after the Dockerfile's, that download (never install) what the task's scripts
    install at run time, for the agent and the verifier, which have no network: the Debian
    packages (with what they depend on) into apt's own cache, where ``apt-get install`` finds
    them offline; the Python ones (with setuptools and wheel, for builds from source) into a
    folder that the image's ``/etc/pip.conf`` gives pip as ``find-links``. One that cannot be fetched (not in Debian 12, not on PyPI for this Python) is
    left out with a line in the build log: its install fails at run time as it would offline."""
    from practicum.envs.dockerfile import Context

    q = shlex.quote
    lines = ["export DEBIAN_FRONTEND=noninteractive"]
    if debs:  # a Dockerfile that ends with `rm -rf /var/lib/apt/lists/*` leaves apt knowing no package
        lines.append("ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1 || apt-get update -qq >/dev/null 2>&1 "
                     "|| echo 'prefetch: apt-get update failed' >&2")
    if debs:
        # the real apt-get (not the build's stand-in, which skips what the machine has): at run time the
        # agent's apt-get is the real one, which also upgrades an installed package that has a newer
        # version (ca-certificates), so its archive must be there too. All together, as a script
        # installs them; one at a time when that fails, so one unknown name keeps no other out.
        apt = "/usr/bin/apt-get install --download-only -y -qq"
        lines.append(f"{apt} {' '.join(q(d) for d in debs)} >/dev/null 2>&1 || for d in {' '.join(q(d) for d in debs)}; "
                     f"do {apt} \"$d\" >/dev/null 2>&1 || echo \"prefetch: Debian package $d not available\" >&2; done")
    lines.append(f"mkdir -p {PREFETCH_WHEELS}")
    if reqs:  # what pip's build isolation installs to build a package from source (`python -m build`)
        reqs = [*reqs, *(r for r in ("setuptools", "wheel") if r not in reqs)]
    for r in reqs:
        lines.append(f"python3 -m pip download --quiet --no-cache-dir --disable-pip-version-check -d {PREFETCH_WHEELS} {q(r)} "
                     f">/dev/null 2>&1 || echo 'prefetch: Python package {r} not available' >&2")
    # pip in the image finds that folder; its index, unreachable, is given up at once (no retries), so
    # an install of something else fails quickly - and an index the task serves itself
    # (`pip install --index-url http://localhost:8080/simple`) still works
    lines.append(f"printf '[global]\\nfind-links = {PREFETCH_WHEELS}\\nretries = 0\\ntimeout = 10\\n' > /etc/pip.conf")
    ctx = Context("/", (("PATH", DEFAULT_PATH),), "root", ("/bin/sh", "-c"))
    return [Run(0, ("/bin/sh", "-c", "\n".join(lines)), ctx, "fetch the packages the task's scripts install")]


def toolchain_python() -> tuple[int, int]:
    """The Python version of the interpreter the verifier's tools run on inside."""
    from practicum.sandbox.container import server_python

    out = subprocess.run([server_python(), "-c", "import sys; print(*sys.version_info[:2])"],
                         capture_output=True, text=True, check=True).stdout.split()
    return int(out[0]), int(out[1])


def verifier_toolchain(requirements: list[str]) -> Path:
    """A folder holding ``requirements`` (installed with pip, once, cached), for the verifier."""
    major, minor = toolchain_python()
    key = hashlib.sha256(f"{BUILDER_VERSION}\0{major}.{minor}\0{sorted(requirements)}".encode()).hexdigest()[:20]
    root = home() / "toolchains"
    final = root / key
    with _locked(root / f"{key}.lock"):
        if (final / "complete").exists():
            return final
        tmp = Path(tempfile.mkdtemp(prefix=f"{key}.build-", dir=root))
        try:
            cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                   "--no-warn-script-location", "--target", str(tmp / "site"), *requirements]
            if (major, minor) != sys.version_info[:2]:
                cmd[4:4] = ["--python-version", f"{major}.{minor}", "--only-binary=:all:"]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            if r.returncode != 0:
                tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-10:])
                raise ImageBuildError(f"the verifier toolchain ({' '.join(requirements)}) could not be installed "
                                      f"with pip:\n{tail}")
            for dirpath, _dirs, filenames in os.walk(tmp):  # readable by the sandbox's root
                os.chmod(dirpath, 0o755)
                for name in filenames:
                    p = os.path.join(dirpath, name)
                    if not os.path.islink(p):
                        os.chmod(p, os.stat(p).st_mode | 0o444)
            (tmp / "requirements.txt").write_text("\n".join(requirements) + "\n")
            (tmp / "complete").write_text("ok\n")
            if final.exists():
                shutil.rmtree(final)
            tmp.rename(final)
            os.chmod(final, 0o755)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return final


def shims_dir(names: tuple[str, ...] = SHIM_NAMES) -> Path:
    """The folder of verifier stand-ins (bound read-only at /opt/practicum/bin); ``names``: which
    (an image build takes only :data:`BUILD_SHIM_NAMES`)."""
    digest = hashlib.sha256(SHIM_SOURCE.read_bytes() + "\0".join(names).encode()).hexdigest()[:12]
    d = home() / "verifier-bin" / digest
    if (d / "complete").exists():
        return d
    with _locked(home() / "verifier-bin" / f"{digest}.lock"):
        if not (d / "complete").exists():
            d.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(SHIM_SOURCE, d / "practicum-shim")
            os.chmod(d / "practicum-shim", 0o755)
            for name in names:
                with contextlib.suppress(FileNotFoundError):
                    (d / name).unlink()
                (d / name).symlink_to("practicum-shim")
            os.chmod(d, 0o755)
            (d / "complete").write_text("ok\n")
    return d


def toolchain_binds(requirements: list[str]) -> list[Bind]:
    return [Bind(str(verifier_toolchain(requirements) / "site"), TOOLCHAIN_INSIDE), Bind(str(shims_dir()), SHIMS_INSIDE)]
