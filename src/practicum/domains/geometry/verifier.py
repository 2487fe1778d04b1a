"""The geometry verifier: run the model's program in a sandbox, then measure its mesh on the host.

::

    host (trusted)                                  sandbox session (the model's program)
    ──────────────                                  ─────────────────────────────────────
    write cad.py, run the program  ───────────────► from cad import *; ...; export(part)
                                                    (writes part.stl in its workspace)
    read part.stl (at most MAX_FILE_BYTES) ◄─────── the file, nothing else
    parse, check legality, measure, compare with the task's constraints

Nothing the program prints, returns or claims is read: only the bytes of ``part.stl``, parsed
by :mod:`.measure`'s own STL reader, and measured from scratch with trimesh and manifold3d.
What scores 0, with the reason in the explanation:

* the reply holds no program; the program fails, runs past the time limit, or is killed for
  memory (``Limits``); writing outside the workspace fails (the sandbox's file system is
  read-only there), so such a program fails or never exports;
* no ``part.stl`` after the run, a link or other non-file in its place, a file over
  ``MAX_FILE_BYTES`` (the sandbox also kills a program writing more than ``Limits.file_size_mb``),
  a file that is not STL, has too many faces or non-finite coordinates;
* a mesh that is not a valid solid (:func:`.measure.legality`).

A valid solid scores the fraction of the task's constraints it meets (partial credit, each
constraint weighing the same). Components: ``legal`` (1 or 0), ``constraints`` (the fraction
met), ``all_met`` (1 when every one is), and ``check:<name>`` (1 or 0) for each constraint and
``legal:<check>`` for each legality check. How it went is ``GeometryVerdict.outcome``
(``measured``, ``invalid_solid``, ``bad_file``, ``no_export``, ``crashed``, ``timeout``,
``memory``, ``no_program``); hack patterns in the source are flags (:func:`program_flags`),
which never change the score.
"""

from __future__ import annotations

import ast
import asyncio
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from practicum.domains.geometry import measure as M
from practicum.domains.geometry.tasks import Constraints, GeometryTask
from practicum.errors import EnvironmentFailure, SandboxError
from practicum.records import Score
from practicum.sandbox.base import Limits, SandboxSession

CAD_SOURCE = Path(__file__).with_name("cad.py")
OUTPUT = "part.stl"
MAX_FILE_BYTES = 20 * 1024 * 1024  # 400,000 binary STL faces: far beyond any task's part
COMPONENTS = ("legal", "constraints", "all_met")
LIMITS = Limits(timeout_s=20.0, cpu_s=20.0, memory_mb=1024, processes=16, file_size_mb=32, workspace_mb=64,
                output_bytes=16 * 1024)


class SessionOpener(Protocol):
    async def session(self, limits: Limits | None = None) -> SandboxSession: ...


@dataclass
class Check:
    name: str
    passed: bool
    measured: str
    wanted: str


@dataclass
class GeometryVerdict:
    score: Score
    flags: list[str] = field(default_factory=list)
    mesh: Any = None  # trimesh.Trimesh of the exported part, when one was read (for the render)
    facts: M.Facts | None = None
    checks: list[Check] = field(default_factory=list)
    # how it went: measured, invalid_solid, bad_file, no_export, crashed, timeout, memory, no_program
    outcome: str = "measured"
    run_seconds: float = 0.0

    def info(self) -> dict[str, Any]:
        """What an episode records besides the score (``Episode.info.extra["geometry"]``)."""
        out: dict[str, Any] = {"outcome": self.outcome, "run_seconds": round(self.run_seconds, 3),
                               "checks": {c.name: {"passed": c.passed, "measured": c.measured} for c in self.checks}}
        if self.facts is not None:
            f = self.facts
            out["measured"] = {"size": [round(v, 4) for v in f.size], "volume": round(f.volume, 3), "genus": f.genus,
                               "bodies": f.shells, "faces": f.faces, "min_wall": None if math.isnan(f.min_wall)
                               else round(f.min_wall, 4), "mirror_mismatch": {k: round(v, 5) for k, v in f.mirror_mismatch.items()}}
        return out


def zero(reason: str, outcome: str = "no_program", mesh: Any = None) -> GeometryVerdict:
    return GeometryVerdict(Score(value=0.0, components={"legal": 0.0, "constraints": 0.0, "all_met": 0.0},
                                 explanation=reason), mesh=mesh, outcome=outcome)


# --- the reply ----------------------------------------------------------------------------------

_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)(?:```|$)", re.S | re.I)


def extract_program(reply: str) -> str:
    """The program of a reply: the last fenced block that calls ``export``, else the last fenced
    block, else the whole reply."""
    blocks = [b for b in _FENCE.findall(reply) if b.strip()]
    if not blocks:
        return reply.strip()
    exporting = [b for b in blocks if "export" in b]
    return (exporting or blocks)[-1]


def program_flags(program: str) -> list[str]:
    """Informative hack patterns in the program's source (they never change the score):
    ``writes_outside_workspace`` (a string literal that is an absolute path outside
    ``/workspace`` or climbs out with ``..``), ``embedded_mesh`` (a literal of more than 4,000
    characters or more than 500 numbers: a pre-made mesh rather than a model),
    ``bypasses_export`` (names part.stl but never calls ``export``)."""
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # not Python, or nested past the parser
        return []
    flags = set()
    numbers = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str | bytes) and len(node.value) > 4000:
                flags.add("embedded_mesh")
            elif isinstance(node.value, int | float) and not isinstance(node.value, bool):
                numbers += 1
            if isinstance(node.value, str) and re.match(r"(/(?!workspace(/|$))[\w.]|\.\./)", node.value):
                flags.add("writes_outside_workspace")
    if numbers > 500:
        flags.add("embedded_mesh")
    calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    if "export" not in calls and OUTPUT in program:
        flags.add("bypasses_export")
    return sorted(flags)


# --- judging a mesh -----------------------------------------------------------------------------

def judge(constraints: Constraints, mesh: Any) -> GeometryVerdict:
    """Legality, then each constraint, of a parsed mesh (CPU-bound; pure)."""
    legal = M.legality(mesh)
    legal_parts = {f"legal:{k}": float(v) for k, v in legal.checks.items()}
    if not legal.ok:
        v = zero("not a valid solid: " + "; ".join(legal.reasons), outcome="invalid_solid", mesh=mesh)
        v.score.components.update(legal_parts)
        return v
    axes = tuple(constraints.symmetry)
    facts = M.measure(mesh, axes, wall=constraints.wall is not None)
    checks = compare(constraints, facts)
    met = sum(c.passed for c in checks)
    fraction = met / len(checks) if checks else 1.0
    components = {"legal": 1.0, "constraints": fraction, "all_met": float(met == len(checks)),
                  **{f"check:{c.name}": float(c.passed) for c in checks}, **legal_parts}
    failed = [f"{c.name}: measured {c.measured}, wanted {c.wanted}" for c in checks if not c.passed]
    text = f"valid solid; {met} of {len(checks)} constraints met" + (" (" + "; ".join(failed) + ")" if failed else "")
    return GeometryVerdict(Score(value=fraction, components=components, explanation=text), [], mesh, facts, checks,
                           outcome="measured")


def compare(c: Constraints, f: M.Facts) -> list[Check]:
    checks: list[Check] = []
    if c.bbox:
        size, want = f.size, c.bbox.size
        ok = all(abs(s - w) <= c.bbox.tol for s, w in zip(size, want))
        checks.append(Check("bbox", ok, " x ".join(f"{s:.2f}" for s in size),
                            " x ".join(f"{w:g}" for w in want) + f" (±{c.bbox.tol:g} mm)"))
    if c.volume:
        err = abs(f.volume - c.volume.value) / c.volume.value
        checks.append(Check("volume", err <= c.volume.rel_tol, f"{f.volume:.1f} mm^3",
                            f"{c.volume.value:.1f} mm^3 (±{c.volume.rel_tol:.1%})"))
    if c.holes is not None:
        checks.append(Check("holes", f.genus == c.holes, f"{f.genus} through-hole(s)", f"{c.holes}"))
    if c.bodies is not None:
        checks.append(Check("bodies", f.shells == c.bodies, f"{f.shells} piece(s)", f"{c.bodies}"))
    for axis in c.symmetry:
        mismatch = f.mirror_mismatch[axis]
        checks.append(Check(f"symmetry_{axis}", mismatch <= c.symmetry_tol, f"{mismatch:.2%} of the volume unmatched "
                            f"by its mirror image", f"at most {c.symmetry_tol:.0%}"))
    if c.wall:
        ok = abs(f.min_wall - c.wall.thickness) <= c.wall.tol
        checks.append(Check("wall", ok, f"thinnest wall {f.min_wall:.2f} mm", f"{c.wall.thickness:g} mm (±{c.wall.tol:g})"))
    return checks


def judge_file(constraints: Constraints, data: bytes) -> GeometryVerdict:
    """Parse, then judge, the bytes of an exported file."""
    if len(data) > MAX_FILE_BYTES:
        return zero(f"{OUTPUT} is larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB", outcome="bad_file")
    try:
        tris = M.parse_stl(data)
    except M.MeshError as e:
        return zero(f"{OUTPUT} could not be read: {e}", outcome="bad_file")
    return judge(constraints, M.to_trimesh(tris))


# --- running the program ------------------------------------------------------------------------

class GeometryVerifier:
    """Runs programs in sessions from ``sessions`` (a pool) and judges what they export."""

    def __init__(self, sessions: SessionOpener, limits: Limits = LIMITS) -> None:
        self.sessions = sessions
        self.limits = limits
        self.cad = CAD_SOURCE.read_text()

    async def verify(self, task: GeometryTask, reply: str) -> GeometryVerdict:
        program = extract_program(reply.encode("utf-8", "replace").decode("utf-8"))  # a lone surrogate: "?"
        if not program.strip():
            return zero("the reply holds no program")
        flags = program_flags(program)
        verdict = await self._run(task, program)
        verdict.flags = sorted(set(verdict.flags) | set(flags))
        return verdict

    async def _run(self, task: GeometryTask, program: str) -> GeometryVerdict:
        try:
            session = await self.sessions.session(self.limits)
        except SandboxError as e:
            raise EnvironmentFailure(f"no sandbox session for the geometry program: {e}") from e
        try:
            try:
                await session.write_file("cad.py", self.cad)
                result = await session.run_python(program, timeout_s=self.limits.timeout_s)
            except SandboxError as e:
                raise EnvironmentFailure(f"the sandbox failed while running the program: {e}") from e
            seconds = result.duration_s
            if result.status == "timeout":
                return _timed(zero(f"the program ran past its limit of {self.limits.timeout_s:g} s", outcome="timeout"), seconds)
            if result.status == "memory":
                return _timed(zero(f"the program was killed for using more than {self.limits.memory_mb} MB", outcome="memory"), seconds)
            if not result.ok:
                why = _last_error(result.stderr) or result.detail or f"exit code {result.exit_code}"
                return _timed(zero(f"the program failed: {why}", outcome="crashed"), seconds)
            try:
                data = await session.read_file(OUTPUT, max_bytes=MAX_FILE_BYTES + 1)
            except FileNotFoundError:
                return _timed(zero(f"the program did not export {OUTPUT} (call export(part) at the end)", outcome="no_export"), seconds)
            except (IsADirectoryError, SandboxError) as e:  # a folder, a link, a FIFO: the program's doing
                return _timed(zero(f"{OUTPUT} is not a regular file: {e}", outcome="bad_file"), seconds)
        finally:
            await session.close()
        verdict = await asyncio.to_thread(judge_file, task.constraints, data)
        return _timed(verdict, seconds)


def _timed(v: GeometryVerdict, seconds: float) -> GeometryVerdict:
    v.run_seconds = seconds
    return v


def _last_error(stderr: str) -> str:
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""
