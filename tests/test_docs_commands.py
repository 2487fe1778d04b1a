"""The `practicum ...` commands the docs and the README show are commands the CLI takes, and the
names their Python examples import from practicum exist.

Every command line in a fenced block or an inline code span that starts with `practicum` (or
`.venv/bin/practicum`) is checked without running it: the subcommand exists and takes those
options and arguments; a path it names inside this repository (or ../shared) exists; a config it
names loads with its `--set` overrides; a checkpoint folder it names is one a run writes
(`step_` and six digits) and, where the docs name the run's folder, one the finished run still
keeps (its last `keep_checkpoints`).
A guide whose command the CLI would refuse is a guide that no longer runs.
"""
from __future__ import annotations

import ast
import importlib
import os
import re
import shlex
import tomllib
from pathlib import Path

import pytest
import typer
from typer.exceptions import TyperException

from practicum.checkpoints import Checkpoints
from practicum.cli import app
from practicum.config import load_config

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PRACTICUM_SHARED", REPO.parent / "shared"))
PAGES = sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
INLINE = re.compile(r"`([^`\n]+)`")
START = re.compile(r"^(?:[A-Z_]+=\S+\s+)*(?:\.venv/bin/)?practicum\s+(.*)$")
# a word that stands for what the reader supplies (`verify DOMAIN`, `envs list|show`, `<file>`)
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*$|[|<>]|\.\.\.|…")


def command_of(text: str) -> list[str] | None:
    """The arguments after `practicum` on a shell line (env assignments, comments, and what follows
    a redirection, pipe or `;` dropped; `[--opt]` taken as `--opt`), or None when the line is
    not a practicum command."""
    m = START.match(text.strip().removeprefix("$ "))
    if not m:
        return None
    lex = shlex.shlex(m.group(1).replace("[", " ").replace("]", " "), posix=True, punctuation_chars=";&|>")
    lex.whitespace_split = True
    lex.commenters = "#"
    try:
        words = list(lex)
    except ValueError:
        return None
    for i, w in enumerate(words):
        if w and set(w) <= set(";&|>"):
            return words[:i - 1] if i and words[i - 1] == "2" and w == ">" else words[:i]
    return words


def doc_commands() -> list[tuple[str, list[str]]]:
    """(where, words): a command line of a fenced block as `PAGE: line`, an inline one as
    `PAGE: \\`span\\``. Prose names a command without all it needs (`practicum eval`), so an inline
    span is held to what it says, not to what it leaves out."""
    found: list[tuple[str, list[str]]] = []
    for page in PAGES:
        text = page.read_text()
        for block in FENCE.findall(text):
            for line in block.replace("\\\n", " ").splitlines():
                if (words := command_of(line)) is not None:
                    found.append((f"{page.name}: {line.strip()}", words))
        for span in INLINE.findall(FENCE.sub("", text)):
            if (words := command_of(span)) is not None:
                found.append((f"{page.name}: `{span}`", words))
    return found


def plugin_examples() -> list[str]:
    """The domain plugins this repository ships as examples (a guide installs one, then uses it)."""
    names = []
    for f in sorted((REPO / "examples").glob("*/pyproject.toml")):
        group = tomllib.loads(f.read_text()).get("project", {}).get("entry-points", {}).get("practicum.domains", {})
        names += list(group)
    return names


def cli_with_example_plugins():
    """The CLI as click sees it, with the `verify NAME` command an installed example plugin adds
    (a copy: the app itself is left as it is)."""
    from practicum.cli_verify import _domain_command

    root = typer.main.get_command(app)
    for name in plugin_examples():
        one = typer.Typer()
        one.command(name)(_domain_command(name))
        root.commands["verify"].add_command(typer.main.get_command(one), name)
    return root


COMMANDS = doc_commands()
ROOT = cli_with_example_plugins()


def resolve(words: list[str]):
    """The click command the words name, its name, and the words left for it."""
    cmd, path = ROOT, ["practicum"]
    while hasattr(cmd, "commands") and words and words[0] in cmd.commands:
        cmd, path, words = cmd.commands[words[0]], path + [words[0]], words[1:]
    return cmd, " ".join(path), words


def test_the_docs_show_commands_and_every_top_level_command_is_shown():
    assert len(COMMANDS) >= 40, [c for c, _ in COMMANDS]
    shown = {words[0] for _, words in COMMANDS if words}
    assert set(ROOT.commands) <= shown, f"commands no guide shows: {sorted(set(ROOT.commands) - shown)}"


@pytest.mark.parametrize("where,words", COMMANDS, ids=[c for c, _ in COMMANDS])
def test_a_documented_command_is_one_the_cli_takes(where, words):
    cmd, name, rest = resolve(words)
    if hasattr(cmd, "commands"):  # a group: the words must name one of its commands (or ask for its help)
        assert not rest or rest[0] in ("--help", "-h") or PLACEHOLDER.search(rest[0]), \
            f"{where}: {name} has no command {rest[0]!r}"
        return
    try:
        ctx = cmd.make_context(name, list(rest))
    except typer.Exit:  # an eager option (--help) that stops before running
        return
    except TyperException as e:
        # click reads every option before it asks for missing ones: prose may leave those out, and
        # may name an option without its value (`verify finance --task`)
        if where.endswith("`") and (type(e).__name__ == "MissingParameter" or "requires an argument" in str(e)):
            return
        pytest.fail(f"{where}: {name} refuses it: {e}")
    assert not ctx.args, f"{where}: {name} would not use {ctx.args}"


# folders of this repository a guide can point into (runs/ is what a run writes; ./x is the reader's)
TRACKED_TOP = {p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith(".")} - {"runs"}


def _repo_paths(words: list[str]) -> list[Path]:
    paths = []
    for w in words:
        if w.startswith("-") or "=" in w or "/" not in w or "://" in w or PLACEHOLDER.search(w):
            continue
        if w.startswith("../shared/"):
            paths.append(SHARED / w.removeprefix("../shared/"))
        elif w.split("/")[0] in TRACKED_TOP:
            paths.append(REPO / w)
    return paths


@pytest.mark.parametrize("where,words", COMMANDS, ids=[c for c, _ in COMMANDS])
def test_a_documented_command_names_paths_that_exist_and_configs_that_load(where, words):
    for p in _repo_paths(words):
        assert p.exists(), f"{where}: {p} does not exist"
    config = next((REPO / w for w in words if w.endswith((".yaml", ".yml")) and (REPO / w).is_file()), None)
    if config is not None:
        sets = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "--set"]
        load_config(config, sets)  # a field the docs set that the config does not have is an error


def _run_dirs() -> dict[str, tuple[int, int, int]]:
    """run.dir -> (steps, checkpoint_every, keep_checkpoints) of every example config, and of every
    documented command that points a config at another folder (``--set run.dir=...``)."""
    dirs = {}
    for f in sorted((REPO / "examples").glob("*.yaml")):
        cfg = load_config(f)
        dirs[str(cfg.run.dir)] = (cfg.run.steps, cfg.run.checkpoint_every, cfg.run.keep_checkpoints)
    for _, words in COMMANDS:
        config = next((REPO / w for w in words if w.endswith((".yaml", ".yml")) and (REPO / w).is_file()), None)
        sets = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "--set"]
        if config is not None and any(x.startswith("run.dir=") for x in sets):
            cfg = load_config(config, sets)
            dirs[str(cfg.run.dir)] = (cfg.run.steps, cfg.run.checkpoint_every, cfg.run.keep_checkpoints)
    return dirs


CHECKPOINTS = [(where, words[i + 1]) for where, words in COMMANDS
               for i, w in enumerate(words[:-1]) if w == "--checkpoint"]


@pytest.mark.parametrize("where,path", CHECKPOINTS, ids=[w for w, _ in CHECKPOINTS])
def test_a_documented_checkpoint_is_one_a_finished_run_keeps(where, path):
    """Named as runs write them (step_ and six digits) and, where the docs name the run's folder,
    one of the checkpoints that run still has when it ends (it keeps the last keep_checkpoints)."""
    m = re.fullmatch(r"(.+)/checkpoints/step_(\d+)", path)
    assert m, f"{where}: {path} is not RUN/checkpoints/step_N"
    run_dir, step = m.group(1), int(m.group(2))
    assert Path(path).name == Checkpoints.folder_name(step), f"{where}: a run writes {Checkpoints.folder_name(step)}"
    if run_dir in (dirs := _run_dirs()):
        steps, every, keep = dirs[run_dir]
        saved = sorted({s for s in range(every, steps + 1, every)} | {steps})
        assert step in saved[-keep:], f"{where}: {run_dir} ends with checkpoints {saved[-keep:]}, not {step}"


def doc_imports() -> list[tuple[str, str, str]]:
    """(page, module, name) for every `from practicum... import name` of the guides' Python blocks."""
    found = []
    for page in PAGES:
        for block in re.findall(r"^```python\n(.*?)^```", page.read_text(), re.S | re.M):
            tree = compile(block, page.name, "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "practicum":
                    found += [(page.name, node.module, a.name) for a in node.names]
    return found


IMPORTS = doc_imports()


def test_the_guides_python_imports_names_practicum_has():
    assert len(IMPORTS) >= 5, IMPORTS  # the sandbox, terminal-task and tool guides import from practicum
    missing = [f"{page}: from {mod} import {name}" for page, mod, name in IMPORTS
               if not hasattr(importlib.import_module(mod), name)]
    assert not missing, missing
