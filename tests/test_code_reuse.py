"""The code domain wired exactly as training wires it (``build_domain``, one pool size)
never lets one episode read another's hidden tests: not a later answer that reads its own
inherited memory, not a later episode's ``python`` tool (issue 8).

The task's hidden test holds a secret (``S3CR3T`` and 32 hex digits); its reference solution
returns it, so the first episode's verification puts the secret into a grader session. Later
answers and tool runs scan every anonymous mapping of their process for the pattern. Before the
fix (one pool for everything and a fork server that kept every request), such an answer scored
1 on most HumanEval problems and the tool printed other episodes' asserts.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
from pathlib import Path

import pytest

from practicum.config import DomainSection
from practicum.domains import build_domain
from practicum.sandbox.namespaced import NsjailSandbox

AVAILABLE, WHY = NsjailSandbox.available()
if not AVAILABLE and os.environ.get("CI") == "true":
    raise RuntimeError(f"CI=true but the isolated sandbox is unavailable: {WHY}")
pytestmark = pytest.mark.skipif(not AVAILABLE, reason=f"isolated sandbox unavailable: {WHY}")

SCAN_BODY = r'''
    import ctypes, re
    pat = re.compile(rb"S3CR3T[0-9a-f]{32}")
    for line in open("/proc/self/maps"):
        parts = line.split()
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        name = parts[5] if len(parts) > 5 else ""
        if parts[1].startswith("r") and name in ("", "[heap]", "[stack]"):
            for m in pat.findall(ctypes.string_at(lo, hi - lo)):
                return m.decode()
    return "nothing"
'''
MEMORY_READER = "def leak():" + SCAN_BODY  # an answer with no task logic
TOOL_SCAN = "def scan():" + SCAN_BODY + "\nprint('scan:', scan())\n"


def write_task(folder: Path, secret: str) -> Path:
    path = folder / "tasks.jsonl"
    task = {"id": "reuse/leak", "prompt": "def leak() -> str:\n    \"\"\"Return the secret.\"\"\"\n",
            "entry_point": "leak", "test": f"def check(candidate):\n    assert candidate() == {secret!r}\n",
            "correct_solution": f"def leak() -> str:\n    return {secret!r}\n"}
    path.write_text(json.dumps(task) + "\n")
    return path


@pytest.mark.parametrize("concurrency", [1, 2])
def test_later_episodes_read_nothing_of_earlier_hidden_tests(tmp_path, concurrency):
    secret = "S3CR3T" + secrets.token_hex(16)
    section = DomainSection.model_validate({
        "name": "code", "env": "code", "source": {"kind": "jsonl", "path": str(write_task(tmp_path, secret))},
        "eval_size": 1, "options": {"mode": "multi", "concurrency": concurrency, "max_runs": 4}})
    domain = build_domain(section, seed=0)
    task = domain.source.train_task(0)

    async def episode(answer: str | None, tool_code: str | None = None) -> tuple[float, str]:
        env = domain.make_env()
        await env.setup(task)  # type: ignore[union-attr]
        shown = ""
        if tool_code is not None:
            (python,) = [t for t in env.make_tools() if t.name == "python"]  # type: ignore[union-attr]
            shown = await python({"code": tool_code})
        env.submitted = answer  # type: ignore[union-attr]
        score = await env.score("submitted")  # type: ignore[union-attr]
        await env.teardown()  # type: ignore[union-attr]
        return score.value, shown

    async def main() -> list[tuple[float, str]]:
        try:
            first = await episode(f"def leak() -> str:\n    return {secret!r}\n")
            later = [await episode(MEMORY_READER, TOOL_SCAN) for _ in range(3)]
            return [first, *later]
        finally:
            await domain.close()

    (first, _), *later = asyncio.run(main())
    assert first == 1.0  # the hidden test really held the secret and ran
    for value, shown in later:
        assert "scan:" in shown, shown
        assert secret not in shown
        assert value == 0.0
