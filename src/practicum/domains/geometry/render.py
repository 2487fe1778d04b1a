"""Render one answer to one geometry task from the command line, as an episode renders it.

``python -m practicum.domains.geometry.render --task T.json --answer A.txt --out part.png``
runs the answer's program in the sandbox, measures the part it exports and draws it with
:func:`practicum.render3d.render_png`, titled with the task and the score; ``--reference``
draws the task's own reference program instead of an answer. It prints the verdict, and exits
1 when no part was exported (nothing to draw).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from practicum.domains.geometry.env import Renders, to_task
from practicum.domains.geometry.tasks import load_task_file
from practicum.domains.geometry.verifier import LIMITS, GeometryVerdict, GeometryVerifier


async def render_answer(task_file: Path, reply: str | None, out: Path, size: tuple[int, int] = (640, 480),
                        sandbox: str = "auto") -> GeometryVerdict:
    """Verify ``reply`` (default: the task's reference) and draw its part to ``out``."""
    from practicum.domains import default_context

    spec = load_task_file(task_file)
    if reply is None:
        if spec.reference is None:
            raise SystemExit(f"{task_file}: the task has no reference program")
        reply = spec.reference
    sessions = default_context(sandbox=sandbox).sessions(LIMITS, 1)  # type: ignore[misc]
    try:
        verdict = await GeometryVerifier(sessions).verify(spec, reply)
    finally:
        await sessions.close()
    if verdict.mesh is not None:
        drawn = await Renders(out.parent, size).render(to_task(spec, "geometry", []), reply, verdict)
        if drawn is not None:
            Path(drawn).replace(out)
    return verdict


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", type=Path, required=True, help="a geometry task file (.json)")
    parser.add_argument("--answer", type=Path, help="the reply or program to draw")
    parser.add_argument("--reference", action="store_true", help="draw the task's reference program")
    parser.add_argument("--out", type=Path, required=True, help="the PNG to write")
    parser.add_argument("--size", default="640x480", help="WIDTHxHEIGHT in pixels")
    args = parser.parse_args(argv)
    if (args.answer is None) == (not args.reference):
        parser.error("give --answer FILE or --reference")
    width, height = (int(v) for v in args.size.lower().split("x"))
    reply = None if args.reference else args.answer.read_text()
    verdict = asyncio.run(render_answer(args.task, reply, args.out, (width, height)))
    print(f"score {verdict.score.value:.3f}: {verdict.score.explanation}")
    if verdict.mesh is None:
        print("no part was exported: nothing drawn", file=sys.stderr)
        return 1
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
