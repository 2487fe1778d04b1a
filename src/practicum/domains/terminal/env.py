"""The terminal environment: an agent works in a git repository through a shell, and hidden
tests decide.

A task is a Harbor-layout folder (:mod:`practicum.domains.terminal.tasks`). Each episode gets its
own sandbox session (:mod:`practicum.sandbox`), in one of two modes:

* the task has ``environment/Dockerfile``: the session runs over the task's image
  (:mod:`practicum.envs.images`, built once and cached) in container mode
  (:mod:`practicum.sandbox.container`): the agent and the verifier are root in a private,
  writable root filesystem; the workdir is left as the image made it and the git baseline is
  kept outside it (``/.practicum/baseline.git``); the verifier's ``PATH`` starts with the offline
  stand-ins of its bootstrap (apt-get, the uv installer, uvx) over a read-only toolchain;
* no Dockerfile: the workspace appears at the task's workdir (default ``/app``), seeded with
  ``environment/``, and is committed as a git baseline; programs run unprivileged.

Either way ``.practicum-setup.sh`` prepares the workspace if there is one. The agent's tools:

* ``bash(command)``: a persistent shell — the working directory and exported variables carry
  over between calls (each call runs in a fresh process of the session that restores them and
  saves them after; shell functions and unexported variables do not carry over). In a task with
  a Dockerfile (container mode), what a call leaves running in the background (``server &``)
  keeps running through the episode and its verification, as in Harbor's container; a call that
  times out has its own processes killed. Without a Dockerfile every process a call started is
  killed when it returns.
* ``read_file(path)``, ``write_file(path, content)``: files inside the workspace.
* ``submit()``: done.

Verification runs after the episode, in the same session but in a clean verifier step: the
agent has no more turns, ``/tests`` and ``/logs/verifier`` are emptied (a planted reward or test
helper is gone), ``tests/`` is copied in, ``bash /tests/test.sh`` runs with the workdir as its
working directory, and the reward is read from ``/logs/verifier/reward.txt`` or ``reward.json``.
The final ``git diff`` against the baseline is stored in ``Episode.info.extra["git_diff"]``,
with ``end`` (why the agent stopped), ``verifier`` (test.sh's status, exit code and output
tail) and, in container mode, ``image`` (which image, and how its FROM was mapped). There is no
network. A reference solution (``run_reference``) is copied to ``/solution`` (container mode)
and ``solve.sh`` runs from the workdir, as Harbor's oracle agent does.

A multi-step task runs its steps in order in the one session: each step's ``workdir/`` and
``setup.sh`` when it begins, its instruction as a user message, its tests when the agent submits
(or its agent time is up); a step below its ``min_reward`` or a rollout limit ends the episode,
and the verified steps' rewards roll up by ``multi_step_reward_strategy``
(:meth:`TerminalEnv._rolled_up`). ``/tests`` is emptied between steps.
"""

from __future__ import annotations

import asyncio
import functools
import os
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from practicum.domains.terminal.tasks import TaskStep, TerminalTask, load_tasks, parse_reward
from practicum.envs.agent import ToolEnvironment
from practicum.envs.base import Observation, cycle_index
from practicum.envs.dockerfile import DEFAULT_PATH, Run, parse_dockerfile
from practicum.envs.images import (
    SHIMS_INSIDE,
    Image,
    ImageBuildError,
    build_image,
    context_requirements,
    install_requests,
    toolchain_binds,
    verifier_requirements,
)
from practicum.errors import EnvironmentFailure, SandboxError, TaskError, VerifierFailure
from practicum.records import Message, Score, Task
from practicum.sandbox import Bind, Limits, get_sandbox
from practicum.tools import Tool, ToolError, tool

STATE_DIR = "/.practicum"  # the shell's saved working directory and environment
VERIFIER_DIRS = ("/tests", "/logs/verifier")
SCRATCH_DIRS = ("/tmp",)  # Harbor tasks expect a writable /tmp
GIT = "git -c safe.directory=* -c user.name=practicum -c user.email=practicum@localhost"
DIFF_CHARS = 100_000


def _shell_wrapper(command: str, workdir: str) -> str:
    """Run ``command`` in bash with the saved cwd and exports, then save them again."""
    return (
        f'cd "$(cat {STATE_DIR}/cwd 2>/dev/null || echo {shlex.quote(workdir)})" 2>/dev/null || cd {shlex.quote(workdir)}\n'
        f"[ -f {STATE_DIR}/env ] && . {STATE_DIR}/env\n"
        f"{command}\n"
        "__practicum_rc=$?\n"
        f"pwd > {STATE_DIR}/cwd; export -p > {STATE_DIR}/env\n"
        "exit $__practicum_rc\n"
    )


def _where(t: TerminalTask) -> str:
    return (f"You are root in a Linux machine, in {t.workdir}." if t.dockerfile is not None
            else f"You are in {t.workdir}, a git repository.")


def _step_prompt(instruction: str, where: str, index: int, steps: int) -> str:
    """The user message of a task, or of step ``index`` of a multi-step task's ``steps``."""
    text = instruction.strip()
    if steps:
        head = (f"This task has {steps} steps, given one at a time. Step 1 of {steps}:" if index == 0
                else f"Step {index} is done. Step {index + 1} of {steps}:")
        text = f"{head}\n\n{text}"
    return text + f"\n\n{where} Use the tools to inspect and change it; call submit when you are done" + \
        (" with this step." if steps else ".")


class TerminalSource:
    """Tasks from a folder of task folders; training cycles through them in seeded order."""

    def __init__(self, domain: str, root: str | Path, seed: int = 0) -> None:
        self.domain = domain
        self.root = Path(root)
        self.tasks = {t.name: t for t in load_tasks(self.root)}
        if not self.tasks:
            raise TaskError(f"{self.root}: no task folders")
        self.names = sorted(self.tasks)
        self.seed = seed

    def _task(self, t: TerminalTask) -> Task:
        where = _where(t)
        text = _step_prompt(t.instruction, where, 0, len(t.steps))
        # the reference answer: solve.sh, when it needs nothing else of solution/
        reference = (t.solution_script.read_text() if t.solution_script is not None and t.solution_files == ["solve.sh"]
                     and not t.steps else None)
        return Task(id=f"terminal/{t.name}", domain=self.domain, prompt=[Message(role="user", content=text)],
                    target=None, metadata={"task_dir": str(t.path), "category": t.category, "difficulty": t.difficulty,
                                           "reference": reference})

    def eval_tasks(self) -> list[Task]:
        return [self._task(self.tasks[n]) for n in self.names]

    def train_task(self, index: int) -> Task:
        return self._task(self.tasks[self.names[cycle_index(index, len(self.names), self.seed)]])

    def folder(self, task: Task) -> TerminalTask:
        return self.tasks[task.id.split("/", 1)[1].removesuffix("@impossible")]


class TerminalEnv(ToolEnvironment):
    """One episode of a terminal task (see the module docstring)."""

    output_chars = 3000  # most characters of a command's output shown to the model

    def __init__(self, domain: str, source: TerminalSource, sandbox: str = "auto",
                 command_timeout_s: float = 60.0) -> None:
        super().__init__(domain)
        self.source = source
        self.sandbox_name = sandbox
        self.command_timeout_s = command_timeout_s
        self.session = None
        self.folder: TerminalTask | None = None
        self.baseline = ""
        self.git = GIT  # how git reaches the baseline (the workspace's own repository, or one kept aside)
        self.image: Image | None = None  # container mode: the task's built image
        self.started = 0.0  # when the current step's agent began (the task's only step, or one of its steps)
        self.extra_info: dict = {}  # git diff and verifier output, set by score()
        self.step_index = 0  # a multi-step task: the step the agent is on
        self.step_scores: list[Score] = []  # a multi-step task: each verified step's score
        self.step_info: list[dict] = []  # ... and what its verification left (status, output)
        self.ending = False  # a rollout limit ends the episode: no further step begins

    # --- the world ------------------------------------------------------------------------------
    async def setup(self, task: Task) -> None:
        self.folder = t = self.source.folder(task)
        env = t.spec.environment
        limits = Limits(timeout_s=self.command_timeout_s, cpu_s=max(self.command_timeout_s, t.verifier_timeout_s),
                        memory_mb=min(env.memory_mb, 4096), processes=256, file_size_mb=min(env.storage_mb, 512),
                        workspace_mb=min(env.storage_mb, 1024), output_bytes=64 * 1024)
        try:
            if t.dockerfile is not None:  # container mode: the task's image, root, a writable /
                self.image, binds = await prepare_image(t, self.sandbox_name)
                self.session = await get_sandbox(self.sandbox_name).session(
                    limits, workdir=t.workdir, binds=binds,
                    container=self.image.container(keep_processes=True, extra_env=t.compose_env))
                self.git = f"{GIT} --git-dir={STATE_DIR}/baseline.git --work-tree={shlex.quote(t.workdir)}"
                r = await self.session.exec(["mkdir", "-p", STATE_DIR, *VERIFIER_DIRS, "/logs/agent"])
                if not r.ok:
                    raise EnvironmentFailure(f"{t.name}: cannot prepare the sandbox: {r.stderr[-300:]}")
            else:
                self.session = await get_sandbox(self.sandbox_name).session(
                    limits, workdir=t.workdir, extra_dirs=[*VERIFIER_DIRS, *SCRATCH_DIRS, STATE_DIR])
                await self._copy_in(t.environment_dir, t.environment_files, t.workdir)
            await self._seed(t)
            if t.steps:
                await self._begin_step(0)
        except (SandboxError, ImageBuildError) as e:
            raise EnvironmentFailure(f"{t.name}: cannot prepare the sandbox: {e}") from e
        self.started = time.monotonic()

    async def _begin_step(self, index: int) -> None:
        """Step ``index`` begins: its ``workdir/`` files are put in the workdir and its
        ``setup.sh`` (if any) runs there, as Harbor's step set-up hook does."""
        t = self.folder
        assert t is not None and self.session is not None
        step = t.steps[index]
        self.step_index = index
        await self._copy_in(step.path / "workdir", step.workdir_files, t.workdir)
        if step.setup_script is not None:
            r = await self.session.exec(["bash", "-c", f"cd {shlex.quote(t.workdir)} && bash ./{step.setup_script}"],
                                        timeout_s=max(120.0, self.command_timeout_s))
            if not r.ok:
                raise EnvironmentFailure(f"{t.name}: step {step.name!r}: workdir/setup.sh failed ({r.status}, exit "
                                         f"{r.exit_code}): {(r.stdout + r.stderr)[-500:]}")
        self.started = time.monotonic()

    @property
    def agent_timeout_s(self) -> float:
        """The wall time of the current step's agent (the task's, for a single-step task)."""
        t = self.folder
        assert t is not None
        return t.steps[self.step_index].agent_timeout_s if t.steps else t.agent_timeout_s

    async def _seed(self, t: TerminalTask) -> None:
        assert self.session is not None
        if t.setup_script is not None:
            await self.session.write_file(f"{STATE_DIR}/setup.sh", t.setup_script.read_bytes())
            r = await self.session.exec(["bash", f"{STATE_DIR}/setup.sh"], timeout_s=120)
            await self.session.exec(["rm", "-f", f"{STATE_DIR}/setup.sh"])
            if not r.ok:
                raise EnvironmentFailure(f"{t.name}: .practicum-setup.sh failed ({r.status}, exit {r.exit_code}): {r.stderr[-500:]}")
        has_own = "false" if self.image is not None else "[ -d .git ]"
        r = await self.session.exec(
            f"{has_own} || {{ {self.git} init -q && {self.git} add -A && {self.git} commit -q -m baseline "
            f"--allow-empty; }}; {self.git} rev-parse HEAD")
        if not r.ok:
            raise EnvironmentFailure(f"{t.name}: git baseline failed: {r.stderr[-500:]}")
        self.baseline = r.stdout.strip()

    async def _copy_in(self, src: Path, files: list[str], dest: str) -> None:
        assert self.session is not None
        executable = []
        for rel in files:
            p = src / rel
            try:
                await self.session.write_file(f"{dest}/{rel}", p.read_bytes())
            except OSError as e:  # the session's disk is full (what ran before filled it), or the path is refused
                raise EnvironmentFailure(f"copying {src.name}/{rel} into the session's {dest}: {e.strerror or e}") from e
            if os.access(p, os.X_OK):
                executable.append(f"{dest}/{rel}")
        if executable:
            await self.session.exec(["chmod", "+x", *executable])

    async def teardown(self) -> None:
        if self.session is not None:
            session, self.session = self.session, None
            await session.close()

    # --- tools ----------------------------------------------------------------------------------
    def make_tools(self) -> list[Tool]:
        env = self

        @tool
        async def bash(command: str) -> str:
            """Run a shell command in the workspace; the working directory and exported variables persist."""
            return await env.run_command(command)

        @tool
        async def read_file(path: str) -> str:
            """Read a text file of the workspace (relative to the working folder, or absolute inside it)."""
            try:
                data = await env._live().read_file(env._path(path), max_bytes=200_000)
            except (SandboxError, OSError) as e:  # missing file, a link out of the workspace...
                raise ToolError(str(e)) from None
            return data.decode(errors="replace")

        @tool
        async def write_file(path: str, content: str) -> str:
            """Write (create or replace) a text file of the workspace."""
            try:
                await env._live().write_file(env._path(path), content)
            except (SandboxError, OSError) as e:
                raise ToolError(str(e)) from None
            return f"wrote {len(content)} characters to {path}"

        return [bash, read_file, write_file]

    def _live(self):
        if self.session is None:
            raise EnvironmentFailure("the episode's sandbox session is gone")
        return self.session

    def _path(self, path: str) -> str:
        assert self.folder is not None
        return path if path.startswith("/") else f"{self.folder.workdir}/{path}"

    async def run_command(self, command: str) -> str:
        assert self.folder is not None
        left = self.agent_timeout_s - (time.monotonic() - self.started)
        r = await self._live().exec(["bash", "-c", _shell_wrapper(command, self.folder.workdir)],
                                    timeout_s=max(1.0, min(self.command_timeout_s, left)))
        out = (r.stdout + ("\n" if r.stdout and r.stderr else "") + r.stderr).rstrip()
        if len(out) > self.output_chars:
            out = out[: self.output_chars // 2] + f"\n[... {len(out) - self.output_chars} characters cut ...]\n" + out[-self.output_chars // 2:]
        head = f"exit code {r.exit_code}" if r.status == "ok" else f"{r.status}: {r.detail or 'no exit code'}"
        return f"{head}\n{out}" if out else head

    async def step(self, reply: str) -> Observation:
        assert self.folder is not None
        if time.monotonic() - self.started > self.agent_timeout_s:
            return await self._done("agent_timeout")  # this step's time is up; a next step may still begin
        return await super().step(reply)

    async def finish(self, reason: str) -> Observation:
        self.ending = True  # a rollout limit: the episode ends after this step's verification
        return await self._done(reason)

    async def _done(self, reason: str) -> Observation:
        """The agent is done with the task, or with one of its steps: verify. A multi-step task
        then goes on to its next step (a new user message) unless this was the last, the step
        missed its ``min_reward``, or a rollout limit ended the episode."""
        t = self.folder
        assert t is not None
        if not t.steps:
            return await super()._done(reason)
        step = t.steps[self.step_index]
        score = await self._verify_step(step, reason)
        self.step_scores.append(score)
        gate = _meets(score, step.spec.min_reward)
        self.step_info[-1]["passed_gate"] = gate
        last = self.step_index == len(t.steps) - 1
        if last or not gate or self.ending:
            if not last:
                self.extra_info["stopped"] = ("a rollout limit" if self.ending else
                                              f"step {step.name!r} scored below its min_reward {step.spec.min_reward}")
            return Observation(messages=[], done=True, score=self._rolled_up(reason), info=self._info())
        s = self._live()  # the next step's agent must not find this step's tests or reward
        await s.exec(["find", *VERIFIER_DIRS, "-mindepth", "1", "-delete"])
        await self._begin_step(self.step_index + 1)
        nxt = t.steps[self.step_index]
        return Observation(messages=[Message(role="user", content=_step_prompt(nxt.instruction, _where(t), self.step_index,
                                                                               len(t.steps)))], info=self._info())

    # --- verification -----------------------------------------------------------------------------
    async def score(self, reason: str) -> Score:
        t = self.folder
        assert t is not None
        await self._keep_diff(reason)
        overrides = (self.task.metadata if self.task else {}).get("tests_override") or {}  # an impossible variant's
        score, _ = await self._run_tests([(t.path / "tests", t.test_files)], overrides, t.verifier_timeout_s,
                                         t.spec.verifier.env)
        score.explanation = f"{reason}; {score.explanation}"
        return score

    async def _verify_step(self, step: TaskStep, reason: str) -> Score:
        """Run one step's tests: the task's ``tests/``, then the step's over them, in ``/tests``."""
        t = self.folder
        assert t is not None
        await self._keep_diff(reason)  # the workspace as this step left it (the last step's stays)
        score, info = await self._run_tests([(t.path / "tests", t.test_files), (step.path / "tests", step.test_files)],
                                            {}, step.verifier_timeout_s, {**t.spec.verifier.env, **step.spec.verifier.env})
        self.step_info.append({"step": step.name, "end": reason, "reward": score.value,
                               "components": dict(score.components), "verifier": info})
        self.extra_info["steps"] = self.step_info
        score.explanation = f"step {step.name}: {reason}; {score.explanation}"
        return score

    def _rolled_up(self, reason: str) -> Score:
        """A multi-step episode's score from its verified steps, by the task's
        ``multi_step_reward_strategy``, as Harbor rolls them up: ``final``, the last verified
        step's score; ``mean``, the mean over verified steps of the reward and of each named
        component (a step without that component counts 0). Steps with
        ``contributes_to_reward = false`` are left out; steps never reached do not count."""
        t = self.folder
        assert t is not None
        counted = [sc for st, sc in zip(t.steps, self.step_scores) if st.spec.contributes_to_reward]
        names = ", ".join(f"{st.name} {sc.value:g}" for st, sc in zip(t.steps, self.step_scores))
        per_step = {f"step:{st.name}": sc.value for st, sc in zip(t.steps, self.step_scores)}
        if not counted:  # only steps that do not count were verified (the episode stopped at a gate)
            return Score(value=0.0, components={"reward": 0.0, **per_step},
                         explanation=f"{reason}; no step that counts was verified ({names})")
        if t.reward_strategy == "final":
            last = counted[-1]
            return Score(value=last.value, components={**last.components, **per_step},
                         explanation=f"{reason}; final step's reward ({names})")
        keys = sorted({k for sc in counted for k in sc.components})
        components = {k: sum(sc.components.get(k, 0.0) for sc in counted) / len(counted) for k in keys}
        value = sum(sc.value for sc in counted) / len(counted)
        return Score(value=value, components={**components, "reward": value, **per_step},
                     explanation=f"{reason}; mean of {len(counted)} step(s) ({names})")

    async def _keep_diff(self, reason: str) -> None:
        """Keep the final ``git diff`` against the baseline in the episode's info.

        Everything is diffed (untracked files too) through a scratch index: the repository's own
        index is left exactly as the agent left it, for the tests to inspect."""
        s = self._live()
        idx = f"{STATE_DIR}/diff-index"
        own_index = f"{STATE_DIR}/baseline.git/index" if self.image is not None else ".git/index"
        diff = await s.exec(f"rm -f {idx}; [ -f {own_index} ] && cp {own_index} {idx}; "
                            f"GIT_INDEX_FILE={idx} {self.git} add -A >/dev/null 2>&1; "
                            f"GIT_INDEX_FILE={idx} {self.git} diff --cached {self.baseline} --; rm -f {idx}", timeout_s=60)
        self.extra_info.update({"git_diff": diff.stdout[:DIFF_CHARS], "end": reason})
        if self.image is not None:  # which image, and how its FROM was mapped
            self.extra_info["image"] = {"key": self.image.key, "base": self.image.base, "notes": list(self.image.notes)}

    async def _run_tests(self, layers: list[tuple[Path, list[str]]], overrides: dict[str, str], timeout_s: float,
                         verifier_env: dict[str, str]) -> tuple[Score, dict]:
        """Empty ``/tests`` and ``/logs/verifier`` (a planted reward or helper is gone), copy the
        layers of tests in (a later layer's file replaces an earlier's), run ``bash
        /tests/test.sh`` from the workdir and read the reward. Returns it with the verifier's
        status, exit code and output tail."""
        t, s = self.folder, self._live()
        assert t is not None
        await s.exec(["mkdir", "-p", *VERIFIER_DIRS])
        await s.exec(["find", *VERIFIER_DIRS, "-mindepth", "1", "-delete"])
        try:
            for folder, files in layers:
                await self._copy_in(folder, files, "/tests")
            for rel, text in overrides.items():
                await s.write_file(f"/tests/{rel}", text)
        except (EnvironmentFailure, OSError) as e:  # e.g. the agent filled the container's disk: the tests cannot run
            raise VerifierFailure(f"the tests could not be put in place: {e}") from e
        env = {**verifier_env}
        if self.image is not None:  # the offline stand-ins for the verifier's bootstrap come first
            image_path = dict(self.image.env).get("PATH", DEFAULT_PATH)
            env = {"PATH": f"{SHIMS_INSIDE}:{image_path}", **env}
        r = await s.exec(["bash", "/tests/test.sh"], timeout_s=timeout_s, env=env or None)
        info = {"status": r.status, "exit_code": r.exit_code, "output": (r.stdout + r.stderr)[-2000:]}
        self.extra_info["verifier"] = info
        score = parse_reward(await self._maybe_read("/logs/verifier/reward.txt"),
                             await self._maybe_read("/logs/verifier/reward.json"))
        score.explanation = f"test.sh {r.status} (exit {r.exit_code}); reward from {score.explanation}"
        score.components = {"reward": score.value, **score.components}
        return score, info

    async def _maybe_read(self, path: str) -> str | None:
        try:
            return (await self._live().read_file(path, max_bytes=100_000)).decode(errors="replace")
        except (SandboxError, OSError):
            return None

    def _info(self) -> dict:
        return {**super()._info(), **self.extra_info}


async def prepare_image(t: TerminalTask, sandbox: str = "auto") -> tuple[Image, list[Bind]]:
    """The task's image (built once, cached) and the read-only binds of its verifier toolchain."""
    assert t.dockerfile is not None
    try:  # a multi-step task's: every step's too
        texts = [(kind, p.read_text(errors="replace")) for kind, p in t.scripts()]
    except OSError as e:  # changed or unreadable since the task was loaded: this task's failure, not the run's
        raise ImageBuildError(f"{t.name}: cannot read its scripts: {e}") from e
    scripts = [text for kind, text in texts if kind == "test"]
    # what the reference solutions, the steps' set-up and the tests install at run time, which
    # Harbor's container fetches from the network: fetched ahead into the image, so the installs work offline
    # ... and what the project's requirements files name (tests that `pip install -r` them)
    reqs = await asyncio.to_thread(_context_requirements, str(t.build_context or t.environment_dir))
    image = await build_image(t.dockerfile, sandbox, timeout_s=t.spec.environment.build_timeout_sec,
                              context=t.build_context, prefetch=install_requests([text for _, text in texts], reqs))
    binds = await asyncio.to_thread(toolchain_binds, verifier_requirements([*scripts, *_separate_verifier_runs(t)]))
    return image, binds


@functools.lru_cache(maxsize=256)
def _context_requirements(context: str) -> list[str]:
    """:func:`context_requirements`, walked once per build context and process, not at every
    reset (a context holding a virtualenv took 0.34 s to walk)."""
    return context_requirements(Path(context))


def _separate_verifier_runs(t: TerminalTask) -> list[str]:
    """The RUN lines of a separate verifier's image (``tests/Dockerfile``, Harbor's
    ``environment_mode = "separate"``), which is not built here: the Python packages they install
    (``uv pip install pytest==8.4.1 pytest-json-ctrf==0.3.5``) go into the verifier's toolchain."""
    if not t.spec.verifier.separate or "Dockerfile" not in t.test_files:
        return []
    try:
        recipe = parse_dockerfile((t.path / "tests" / "Dockerfile").read_text(errors="replace"))
    except OSError as e:
        raise ImageBuildError(f"{t.name}: cannot read tests/Dockerfile: {e}") from e
    return [step.argv[-1] for step in recipe.steps if isinstance(step, Run)]


class TerminalDomain:
    def __init__(self, name: str, root: str | Path, seed: int = 0, sandbox: str = "auto",
                 command_timeout_s: float = 60.0) -> None:
        self.name = name
        self.source = TerminalSource(name, root, seed)
        self.sandbox = sandbox
        self.command_timeout_s = command_timeout_s

    def make_env(self) -> TerminalEnv:
        return TerminalEnv(self.name, self.source, self.sandbox, self.command_timeout_s)

    async def close(self) -> None:
        return None  # each episode's session is its environment's; images stay cached on disk


@dataclass(frozen=True)
class ReferenceRun:
    """What scoring a task's untouched workspace or its reference solution gave.

    ``score`` is None when there is nothing to score (no ``solution/solve.sh``); ``failed_step``
    names the step that went wrong (``build``, ``setup``, ``solution``, ``verifier``), None when
    every step ran; ``output`` is the last lines of that step's output (else the verifier's);
    ``solution_output``, the last lines of what ``solve.sh`` printed when it ran to its end (what
    to read when a reference that exited 0 still scores below 1)."""

    score: Score | None
    failed_step: str | None = None
    output: str = ""
    solution_output: str = ""


def _meets(score: Score, min_reward: float | dict[str, float] | None) -> bool:
    """Whether a step's score passes its ``min_reward`` gate: the reward at least a number, or
    each named component at least its own (a component the verifier did not write counts 0)."""
    if min_reward is None:
        return True
    if isinstance(min_reward, dict):
        return all(score.components.get(k, 0.0) >= v for k, v in min_reward.items())
    return score.value >= min_reward


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


async def run_reference(domain: TerminalDomain, task: Task, solve: bool) -> ReferenceRun:
    """Score a task's workspace untouched (``solve=False``) or after its reference solution:
    what ``practicum tasks check --run-solutions`` and the tests use."""
    env = domain.make_env()
    try:
        try:
            await env.reset(task)
        except EnvironmentFailure as e:  # the task's own image or set-up failed: the check reports it
            if isinstance(e.__cause__, ImageBuildError):
                return ReferenceRun(Score(value=0.0, explanation="the image build failed"), "build", _tail(str(e.__cause__)))
            return ReferenceRun(Score(value=0.0, explanation="set-up failed"), "setup", _tail(str(e)))
        folder = env.folder
        assert folder is not None
        label = "reference" if solve else "untouched"
        if solve:
            missing = ([f"steps/{s.name}/solution/solve.sh" for s in folder.steps if s.solution_script is None]
                       if folder.steps else ["solution/solve.sh"] if folder.solution_script is None else [])
            if missing:
                return ReferenceRun(None, None, f"no {', '.join(missing)}")
        solved = ""
        while True:  # once; a multi-step task's steps one after the other, as its agent would meet them
            if solve:
                step = folder.steps[env.step_index] if folder.steps else None
                sol_dir, sol_files = ((step.path / "solution", step.solution_files) if step is not None
                                      else (folder.path / "solution", folder.solution_files))
                # Harbor's oracle: the solution folder at /solution (container mode; elsewhere, the
                # only writable place outside the workspace), solve.sh run from the workdir
                where = "/solution" if env.image is not None else f"{STATE_DIR}/solution"
                await env._copy_in(sol_dir, sol_files, where)
                r = await env._live().exec(["bash", f"{where}/solve.sh"], timeout_s=env.agent_timeout_s,
                                           env={**folder.spec.solution.env} or None)
                await env._live().exec(["rm", "-rf", where])
                which = f"step {step.name}: " if step is not None else ""
                if r.status != "ok":
                    return ReferenceRun(Score(value=0.0, explanation=f"{which}solve.sh {r.status}"), "solution",
                                        _tail(which + r.stdout + r.stderr + (f"\n{r.detail}" if r.detail else "")))
                solved = _tail(f"{which}{r.stdout}{r.stderr}" + (f"\n(exit {r.exit_code})" if r.exit_code else ""), 10)
            try:
                if folder.steps:
                    obs = await env._done(label)
                    if not obs.done:
                        continue
                    assert obs.score is not None
                    score = obs.score
                else:
                    score = await env.score(label)
            except VerifierFailure as e:
                out = env.extra_info.get("verifier", {}).get("output", "")
                return ReferenceRun(Score(value=0.0, explanation=str(e)), "verifier", _tail(f"{out}\n{e}"), solved)
            except EnvironmentFailure as e:  # a next step's set-up failed
                return ReferenceRun(Score(value=0.0, explanation="set-up failed"), "setup", _tail(str(e)), solved)
            return ReferenceRun(score, None, _tail(env.extra_info.get("verifier", {}).get("output", "")), solved)
    finally:
        await env.close()


async def run_answer(domain: TerminalDomain, task: Task, script: str) -> ReferenceRun:
    """Score a shell script as the agent's work: it runs as one ``bash`` command from the task's
    workdir (as Harbor's oracle runs ``solve.sh``), then the hidden tests score the workspace.
    A multi-step task's script runs at its first step; its steps are then verified in order, with
    nothing run between them. What ``practicum verify terminal`` does."""
    env = domain.make_env()
    try:
        try:
            await env.reset(task)
        except EnvironmentFailure as e:
            return ReferenceRun(Score(value=0.0, explanation=f"set-up failed: {e}"), "setup", _tail(str(e)))
        folder = env.folder
        assert folder is not None
        where = f"{STATE_DIR}/answer.sh"
        await env._live().write_file(where, script)
        r = await env._live().exec(["bash", "-c", f"cd {shlex.quote(folder.workdir)} && bash {where}; rc=$?; rm -f {where}; exit $rc"],
                                   timeout_s=env.agent_timeout_s)
        try:
            if folder.steps:
                while not (obs := await env._done("answer")).done:
                    pass
                assert obs.score is not None
                score = obs.score
            else:
                score = await env.score("answer")
        except VerifierFailure as e:
            out = env.extra_info.get("verifier", {}).get("output", "")
            return ReferenceRun(Score(value=0.0, explanation=str(e)), "verifier", _tail(f"{out}\n{e}"))
        except EnvironmentFailure as e:  # a next step's set-up failed
            return ReferenceRun(Score(value=0.0, explanation=f"set-up failed: {e}"), "setup", _tail(str(e)))
        score.explanation = f"answer script {r.status} (exit {r.exit_code}); {score.explanation}"
        return ReferenceRun(score, None, _tail(env.extra_info.get("verifier", {}).get("output", "")))
    finally:
        await env.close()
