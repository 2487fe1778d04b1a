"""A model reply that is not what was asked is a score, never an exception out of a verifier.

Every installed domain's verifier (terminal's runs a whole episode and has its own tests) is
given replies a model or an endpoint can produce: empty, NUL bytes, lone surrogates (a JSON
reply can carry "\\ud800"), 2 MB of digits, JSON or Python nested past the parsers' depth, a
100,000-digit integer, a regex-hungry line, a loop. Each must come back as a verdict below 1
(or a RolloutFailure the loop records) within its time limit. Before, the scene verifier raised
RecursionError and ValueError, sql RecursionError, and code and geometry UnicodeEncodeError.
"""
from __future__ import annotations

import asyncio

import pytest

from practicum.cli_envs import _build
from practicum.domains import default_context, get_plugin, plugin_names
from practicum.errors import RolloutFailure

DEEP_JSON = "[" * 5000 + "]" * 5000
REPLIES = {
    "empty": "",
    "nul": "\x00\x00<answer>\x00</answer>",
    "surrogates": "\udcff\ud800 <answer>\u202e1</answer>",
    "huge": "9" * 2_000_000,
    "deep_json": "```json\n" + DEEP_JSON + "\n```",
    "deep_object": '{"a":' * 3000 + "1" + "}" * 3000,
    "deep_python": "```python\ndef f(x):\n    return " + "-(" * 3000 + "x" + ")" * 3000 + "\n```",
    "nul_python": "```python\ndef f(x):\n    return x\x00\n```",
    "big_int": "<answer>" + "9" * 100_000 + "</answer>",
    "regex_bait": "<answer>" + "a" * 50_000 + "!</answer>",
    "loop": "```python\nwhile True:\n    pass\n```",
}
DOMAINS = [n for n in plugin_names() if n != "terminal"]


@pytest.mark.parametrize("name", DOMAINS)
def test_every_verifier_scores_hostile_replies_without_raising(name):
    plugin, domain = get_plugin(name), _build(name, [])
    ctx = default_context()

    async def run() -> dict[str, object]:
        out: dict[str, object] = {}
        try:
            task = domain.source.train_task(0)
            for label, reply in REPLIES.items():
                try:
                    out[label] = await asyncio.wait_for(plugin.verify(task, reply, ctx), 120)
                except RolloutFailure as e:  # recorded by the loop, not a crash
                    out[label] = e
        finally:
            await domain.close()
        return out

    for label, verdict in asyncio.run(run()).items():
        if isinstance(verdict, RolloutFailure):
            continue
        score = verdict.score.value if hasattr(verdict, "score") else verdict.value
        assert 0.0 <= float(score) < 1.0, (name, label, verdict)
