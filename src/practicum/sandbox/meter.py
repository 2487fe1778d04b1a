"""Sandbox CPU time, charged to the episode that caused it.

The rollout sets a :class:`Meter` for the duration of each call it makes into an episode's
environment (reset, step, finish); every sandbox execution made inside that call - a tool run,
the verifier's tests, a terminal task's set-up - adds its CPU seconds to it, whichever session
or pool it ran in (the meter travels in a context variable, so tasks the environment starts
inherit it). Nothing is charged outside a metered call. The fork-server backends measure an
execution's CPU time exactly (``ExecResult.cpu_s``, every process of it); a backend that cannot
measure it reports ``None`` and is counted as a run without seconds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any


@dataclass
class Meter:
    cpu_s: float = 0.0  # user + system CPU seconds of the executions charged
    runs: int = 0  # executions charged (measured or not)
    unmeasured: int = 0  # ... of which the backend reported no CPU time


_current: ContextVar[Meter | None] = ContextVar("practicum_sandbox_meter", default=None)


def charge(result: Any) -> None:
    """Add one execution (an ``ExecResult``) to the meter of the current call, if any."""
    meter = _current.get()
    if meter is None:
        return
    meter.runs += 1
    cpu = getattr(result, "cpu_s", None)
    if cpu is None:
        meter.unmeasured += 1
    else:
        meter.cpu_s += float(cpu)


@contextlib.contextmanager
def metering(meter: Meter) -> Iterator[Meter]:
    """Charge the sandbox executions made inside the block to ``meter``."""
    token = _current.set(meter)
    try:
        yield meter
    finally:
        _current.reset(token)
