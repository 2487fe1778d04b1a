"""A Dockerfile read as Docker reads it, for building a task image without a container runtime.

:func:`parse_dockerfile` turns the text into an :class:`ImageRecipe`: the steps of the final
stage in order (``COPY``/``ADD`` of local files, ``RUN``, ``WORKDIR``), each with the working
folder, environment and user in force at that point, and the image's final working folder,
environment and user. :mod:`practicum.envs.images` executes a recipe into a cached layer.

What is interpreted, as Docker does it: line continuations and comments; ``ARG`` and ``ENV``
(both forms) with ``$VAR``/``${VAR}``/``${VAR:-default}`` substitution in later instructions;
``WORKDIR`` (relative ones join the previous; the folder is created); ``USER``; ``SHELL``;
``RUN`` in shell form (run by the current ``SHELL``, default ``/bin/sh -c``) and exec form, with
heredocs (``RUN <<EOF``); ``COPY``/``ADD`` with several sources, globs, ``--chown``, ``--chmod``,
directory *contents* copied, renames, absolute and relative destinations; local tar archives
unpacked by ``ADD``. ``FROM`` starts a stage (the last one is the image); its image name is
only recorded: every image is built over the machine's own root filesystem. Multi-stage builds:
``FROM image AS name``, ``FROM name`` (a stage that continues an earlier one) and ``COPY
--from=name`` (or ``--from=0``, the stage's index): an earlier stage that the image copies from is
built as an image of its own (:attr:`ImageRecipe.stages`).

What is refused with a reason (a :class:`DockerProblem`): ``ADD`` of a URL or git repository,
``COPY --from`` another image (except the tool images of :data:`TOOL_IMAGES`, whose files come
from PyPI), ``RUN --mount``, sources that leave the build context.
What is ignored: ``CMD``, ``ENTRYPOINT``, ``EXPOSE``, ``LABEL``, ``VOLUME``, ``HEALTHCHECK``,
``STOPSIGNAL``, ``ONBUILD``, ``MAINTAINER`` (nothing is started from the image but the agent's
shell and the verifier).
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from dataclasses import dataclass, field

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
IGNORED = frozenset({"CMD", "ENTRYPOINT", "EXPOSE", "LABEL", "VOLUME", "HEALTHCHECK", "STOPSIGNAL", "ONBUILD",
                     "MAINTAINER"})


@dataclass(frozen=True)
class DockerProblem:
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


@dataclass(frozen=True)
class Context:
    """What is in force when a step runs."""

    workdir: str
    env: tuple[tuple[str, str], ...]  # ENV and ARG values, in order of definition
    user: str
    shell: tuple[str, ...]

    @property
    def environ(self) -> dict[str, str]:
        return dict(self.env)


@dataclass(frozen=True)
class Copy:
    line: int
    sources: tuple[str, ...]  # relative to the build context; may hold glob patterns
    dest: str  # absolute, resolved against the workdir
    dest_is_dir: bool  # the destination ends with '/' or there are several sources
    chown: str | None
    chmod: str | None
    unpack: bool  # ADD: local tar archives are unpacked into dest
    context: Context
    tool: tuple[str, str] | None = None  # COPY --from a tool image (TOOL_IMAGES): (tool, version spec)
    stage: str | None = None  # COPY --from an earlier stage: its index (a key of ImageRecipe.stages); sources absolute


@dataclass(frozen=True)
class Run:
    line: int
    argv: tuple[str, ...]  # the whole command (shell form: SHELL + the text)
    context: Context
    text: str  # as written, for messages


@dataclass(frozen=True)
class MakeDir:
    """WORKDIR creates its folder."""

    line: int
    path: str
    context: Context


Step = Copy | Run | MakeDir


@dataclass
class ImageRecipe:
    base: str | None = None  # the last FROM's image (recorded, not pulled)
    steps: list[Step] = field(default_factory=list)
    workdir: str | None = None  # None: the Dockerfile sets none (Docker's default is /)
    env: dict[str, str] = field(default_factory=dict)  # ENV of the final image (not ARG)
    user: str = "root"
    problems: list[DockerProblem] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # instructions read and deliberately not acted on
    # the earlier stages this one copies from (COPY --from=stage), by index, each with its own stages
    stages: dict[str, ImageRecipe] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems


def logical_lines(text: str) -> list[tuple[int, str, list[str]]]:
    """``(first line number, instruction text, heredoc bodies)``: continuations joined,
    comments and blank lines dropped, heredoc bodies (``<<EOF`` ... ``EOF``) collected."""
    lines = text.splitlines()
    out: list[tuple[int, str, list[str]]] = []
    i, escape = 0, "\\"
    while i < len(lines):
        raw = lines[i]
        s = raw.strip()
        m = re.match(r"#\s*escape\s*=\s*(\S)", s)
        if not out and m:
            escape = m.group(1)
        if not s or s.startswith("#"):
            i += 1
            continue
        start, buf = i + 1, ""
        while True:
            s = lines[i].rstrip()
            if s.strip().startswith("#") and buf:  # comment lines inside a continuation are dropped
                i += 1
                if i >= len(lines):
                    break
                continue
            if s.endswith(escape):
                buf += s[:-1] + " "
                i += 1
                if i >= len(lines):
                    break
                continue
            buf += s
            i += 1
            break
        bodies: list[str] = []
        for hm in HEREDOC.finditer(buf):
            strip_tabs, word = hm.group(1) == "-", hm.group(3)
            body: list[str] = []
            while i < len(lines) and (lines[i].lstrip("\t") if strip_tabs else lines[i]) != word:
                body.append(lines[i].lstrip("\t") if strip_tabs else lines[i])
                i += 1
            i += 1  # the terminator
            bodies.append("\n".join(body) + "\n")
        out.append((start, buf.strip(), bodies))
    return out


# a here-document: ``<<EOF``, ``<<-EOF``, ``<<'EOF'``, ``<< "EOF"`` (BuildKit allows blanks after
# ``<<``, as the shell does); the word starts with a letter or ``_``, so ``$((1 << 2))`` is not one
HEREDOC = re.compile(r"(?<![<\w])<<(-?)[ \t]*([\"']?)([A-Za-z_][A-Za-z0-9_]*)\2")


def _heredoc_script(rest: str, bodies: list[str]) -> str:
    """The shell script of ``RUN`` with here-documents, as BuildKit runs it: a line that is only
    a here-document runs its body; otherwise the command line runs with each body and its
    terminator after it (quoting and ``<<-`` kept, so the shell expands or strips as written)."""
    words = list(HEREDOC.finditer(rest))
    if len(words) == 1 and rest.strip() == words[0].group(0):
        if not bodies[0].startswith("#!"):
            return bodies[0]
        # a script with its own interpreter line runs as a file, as BuildKit runs it
        end = "PRACTICUM_SCRIPT_END"
        return (f'f=$(mktemp) && cat > "$f" <<\'{end}\'\n{bodies[0]}{end}\n'
                f'chmod +x "$f" && "$f"; status=$?; rm -f "$f"; exit $status\n')
    return rest + "\n" + "".join(body + m.group(3) + "\n" for m, body in zip(words, bodies))


def substitute(value: str, variables: dict[str, str]) -> tuple[str, set[str]]:
    """Docker's variable substitution: ``$V``, ``${V}``, ``${V:-default}``, ``${V:+alt}``;
    ``\\$`` stays literal. Returns the text and the names that were unset."""
    missing: set[str] = set()

    def repl(m: re.Match[str]) -> str:
        if m.group(0).startswith("\\"):
            return m.group(0)[1:]
        name = m.group(1) or m.group(4)
        op, word = m.group(2), m.group(3) or ""
        val = variables.get(name)
        if op == ":-":
            return val if val else word
        if op == ":+":
            return word if val else ""
        if val is None:
            missing.add(name)
            return ""
        return val

    return re.sub(r"\\\$|\$\{(\w+)(?:(:-|:\+)([^}]*))?\}|\$(\w+)", repl, value), missing


def _split_words(rest: str) -> list[str]:
    try:
        return shlex.split(rest, posix=True)
    except ValueError:
        return rest.split()


def _json_array(rest: str) -> list[str] | None:
    if not rest.startswith("["):
        return None
    try:
        v = json.loads(rest)
    except json.JSONDecodeError:
        return None
    return [str(x) for x in v] if isinstance(v, list) else None


def _assignments(rest: str, word: str) -> list[tuple[str, str | None]]:
    """``K=V`` pairs (quotes removed); the legacy ``ENV K V`` form; ``ARG K`` (no default: None)."""
    first = rest.split(None, 1)[0] if rest.split() else ""
    if "=" not in first:
        if word == "ENV":
            k, _, v = rest.partition(" ")
            return [(k, v.strip())]
        return [(first, None)]
    out: list[tuple[str, str | None]] = []
    for tok in _split_words(rest):
        k, sep, v = tok.partition("=")
        out.append((k, v if sep else None))
    return out


def parse_dockerfile(text: str, build_args: dict[str, str] | None = None) -> ImageRecipe:
    """The recipe of the final stage of ``text`` (see the module docstring), with the recipes of
    the earlier stages it copies from."""
    done: list[tuple[str | None, ImageRecipe]] = []  # the finished stages: (name, recipe)
    recipe = ImageRecipe()
    name: str | None = None
    variables: dict[str, str] = {}  # ARG and ENV in force
    env: dict[str, str] = {}  # ENV only
    global_args: dict[str, str] = {}  # ARGs before the first FROM
    args = dict(build_args or {})
    workdir: str | None = None
    user, shell = "root", ("/bin/sh", "-c")
    stage = 0

    def ctx() -> Context:
        merged = {"PATH": DEFAULT_PATH, **variables}
        return Context(workdir or "/", tuple(merged.items()), user, shell)

    def problem(line: int, msg: str) -> None:
        recipe.problems.append(DockerProblem(line, msg))

    def finish() -> None:
        recipe.workdir, recipe.env, recipe.user = workdir, env, user
        done.append((name, recipe))

    def earlier(ref: str) -> int | None:
        """The index of the earlier stage ``ref`` names (its AS name, any case, or its index)."""
        if ref.isdigit():
            return int(ref) if int(ref) < len(done) else None
        return next((i for i, (n, _) in enumerate(done) if n is not None and n == ref.lower()), None)

    for line, inst, bodies in logical_lines(text):
        word, _, rest = inst.partition(" ")
        word, rest = word.upper(), rest.strip()
        if word == "FROM":
            if stage > 0:
                finish()
            stage += 1
            words = [w for w in rest.split() if not w.startswith("--")]
            image = substitute(words[0], global_args)[0] if words else ""
            name = words[2].lower() if len(words) >= 3 and words[1].upper() == "AS" else None
            parent = earlier(image)
            if parent is not None and not image.isdigit():  # FROM an earlier stage: it goes on from there
                prev = done[parent][1]
                recipe = ImageRecipe(base=prev.base, steps=list(prev.steps), problems=list(prev.problems),
                                     stages=dict(prev.stages))
                env, workdir, user = dict(prev.env), prev.workdir, prev.user
                variables = {"PATH": DEFAULT_PATH, **prev.env}
            else:
                recipe = ImageRecipe(base=image)
                # a new stage starts from its base image: nothing of the previous stage stays
                env, workdir, user = {}, None, "root"
                # what every base image's ENV defines, so that ENV PATH="/x:${PATH}" extends it, as in Docker
                variables = {"PATH": DEFAULT_PATH}
            shell = ("/bin/sh", "-c")
            continue
        if word == "ARG":
            for k, v in _assignments(rest, word):
                value = args.get(k, global_args.get(k) if v is None else substitute(v, variables)[0])
                if stage == 0:
                    global_args[k] = value or ""
                elif value is not None:
                    variables[k] = value
            continue
        if stage == 0:
            if word not in IGNORED:
                problem(line, f"{word} before the first FROM")
            continue
        if word == "ENV":
            for k, v in _assignments(rest, word):
                value = substitute(v or "", variables)[0]
                variables[k] = env[k] = value
        elif word == "WORKDIR":
            value, missing = substitute(rest.strip("\"'"), variables)
            if missing:
                problem(line, f"WORKDIR uses {', '.join(sorted(missing))}, which no earlier ARG or ENV sets")
                continue
            workdir = posixpath.normpath(posixpath.join(workdir or "/", value))
            recipe.steps.append(MakeDir(line, workdir, ctx()))
        elif word == "USER":
            user = substitute(rest, variables)[0].strip() or "root"
        elif word == "SHELL":
            arr = _json_array(rest)
            if not arr:
                problem(line, "SHELL must be a JSON array, e.g. SHELL [\"/bin/bash\", \"-c\"]")
            else:
                shell = tuple(arr)
        elif word == "RUN":
            if re.match(r"--mount\b", rest):
                problem(line, "RUN --mount (cache, secret or bind mounts) is not supported")
                continue
            while rest.startswith("--"):  # --network=..., --security=...: no effect here
                rest = rest.split(None, 1)[1] if " " in rest else ""
            arr = _json_array(rest)
            if arr is not None:
                recipe.steps.append(Run(line, tuple(arr), ctx(), rest))
            else:
                script = _heredoc_script(rest, bodies) if bodies else rest
                recipe.steps.append(Run(line, (*shell, script), ctx(), rest))
        elif word in ("COPY", "ADD"):
            step = _copy(word, rest, line, ctx(), variables, bodies, problem, earlier)
            if step is not None:
                if step.stage is not None:
                    source = done[int(step.stage)][1]
                    recipe.stages[step.stage] = source
                    recipe.problems += [p for p in source.problems if p not in recipe.problems]
                recipe.steps.append(step)
        elif word in IGNORED:
            recipe.ignored.append(word)
        else:
            problem(line, f"unknown instruction {word}")
    if stage == 0:
        problem(1, "no FROM instruction")
    recipe.workdir, recipe.env, recipe.user = workdir, env, user
    return recipe


def _copy(word: str, rest: str, line: int, context: Context, variables: dict[str, str], bodies: list[str],
          problem, earlier=lambda ref: None) -> Copy | None:
    flags: dict[str, str] = {}
    words = _json_array(rest)
    if words is None:
        words = _split_words(rest)
        while words and words[0].startswith("--"):
            k, _, v = words.pop(0)[2:].partition("=")
            flags[k] = v
    if bodies:
        problem(line, f"{word} with a heredoc is not supported")
        return None
    tool = stage = None
    if "from" in flags:
        image = substitute(flags.pop("from"), variables)[0]
        index = earlier(image)
        if index is not None:
            stage = str(index)
        else:
            tool = tool_image(image)
            if isinstance(tool, str):
                problem(line, f"{word} --from={image}: {tool}")
                return None
    unknown = set(flags) - {"chown", "chmod", "link", "parents"}
    if unknown:
        problem(line, f"{word}: unsupported option(s) {', '.join('--' + u for u in sorted(unknown))}")
        return None
    words = [substitute(w, variables)[0] for w in words]
    if len(words) < 2:
        problem(line, f"{word} needs at least one source and a destination")
        return None
    *sources, dest = words
    for s in sources:
        if re.match(r"^[a-z]+://", s) or s.startswith("git@"):
            problem(line, f"{word} {s}: fetching a URL or repository at build time is not supported (no network)")
            return None
        norm = posixpath.normpath(s.lstrip("/"))
        if norm == ".." or norm.startswith("../"):
            problem(line, f"{word} {s}: the source leaves the build context (environment/)")
            return None
    if stage is not None:
        if word == "ADD":
            problem(line, "ADD --from is not Docker's; use COPY --from")
            return None
        sources = [posixpath.normpath(posixpath.join("/", s)) for s in sources]  # paths in that stage's filesystem
    if tool is not None:
        files = TOOL_IMAGES[tool[0]][1]
        sources = [posixpath.normpath("/" + src.lstrip("/")) for src in sources]
        unknown_files = [src for src in sources if src not in files]
        if unknown_files:
            problem(line, f"{word} --from: the {tool[0]} image is served with {', '.join(files)} only, not "
                          f"{', '.join(unknown_files)}")
            return None
    dest_is_dir = dest.endswith("/") or len(sources) > 1 or any(_is_glob(s) for s in sources)
    absolute = posixpath.normpath(posixpath.join(context.workdir, dest))
    return Copy(line, tuple(sources), absolute, dest_is_dir or dest in (".", "./"), flags.get("chown"),
                flags.get("chmod"), word == "ADD", context, tool, stage)


# Images that ship a tool for ``COPY --from=IMAGE`` (uv's documentation installs it so: ``COPY
# --from=ghcr.io/astral-sh/uv:0.8.15 /uv /uvx /bin/``): the same binaries come from the tool's
# PyPI wheel of the tag's version (:func:`practicum.envs.images.tool_files`), as registries are
# what the build reaches. Name -> (image pattern with the tag as group "tag", files it serves).
TOOL_IMAGES: dict[str, tuple[re.Pattern[str], tuple[str, ...]]] = {
    "uv": (re.compile(r"^(?:ghcr\.io/)?astral-sh/uv(?::(?P<tag>[^@]+))?(?P<digest>@\S+)?$"), ("/uv", "/uvx")),
}


def tool_image(image: str) -> tuple[str, str] | str:
    """(tool, pip version spec) for an image of :data:`TOOL_IMAGES`, else why it cannot be copied from."""
    for name, (pattern, _) in TOOL_IMAGES.items():
        m = pattern.match(image)
        if m is None:
            continue
        tag = m.group("tag") or "latest"
        if m.group("digest"):
            return f"an image pinned by digest cannot be matched to a {name} release; pin its version tag instead"
        if tag == "latest":
            return name, ""
        if re.fullmatch(r"\d+\.\d+\.\d+", tag):
            return name, f"=={tag}"
        if re.fullmatch(r"\d+\.\d+", tag):
            return name, f"=={tag}.*"
        return f"tag {tag!r}: only the {name} binaries' own images (latest, X.Y, X.Y.Z) are served"
    return ("copying from another image is not supported (images are never pulled; the binaries of "
            + ", ".join(f"{n}'s images" for n in TOOL_IMAGES) + " are served from PyPI)")


def _is_glob(s: str) -> bool:
    return any(c in s for c in "*?[")

