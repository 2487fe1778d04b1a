"""What this machine computes fast: the dtype choice behind ``engine_dtype: auto``.

bf16 halves memory traffic, but on a CPU without bf16 instructions (AVX512-BF16 or AMX on x86,
the BF16 extension on Arm) every bf16 matmul is emulated by converting to fp32 and back, and
measured on such a machine (AMD EPYC with AVX2 only) generation and training of the embedded
model ran about 4x slower in bf16 than in fp32. ``auto`` therefore means bf16 where the hardware
has it and fp32 where it does not.

And which thread computes: see :func:`in_own_thread`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import torch

T = TypeVar("T")

_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


@functools.cache
def cpu_has_native_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether the CPU has bf16 arithmetic instructions, read from the kernel's CPU flags."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return False
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            flags = set(value.split())
            return bool(flags & {"avx512_bf16", "amx_bf16", "bf16"})
    return False


def native_bf16(device: str | torch.device) -> bool:
    dev = torch.device(device)
    if dev.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if dev.type == "cpu":
        return cpu_has_native_bf16()
    return True  # mps, xpu and others: their backends run bf16 natively where they accept it


def resolve_dtype(name: str, device: str | torch.device) -> torch.dtype:
    """``auto`` → bf16 where the device computes it natively, else fp32; any other name as named."""
    if name == "auto":
        return torch.bfloat16 if native_bf16(device) else torch.float32
    return _DTYPES[name]


def resolve_autocast(name: str, device: str | torch.device) -> torch.dtype | None:
    """The trainer's autocast dtype: ``none`` → no autocast (fp32); ``auto`` → bf16 where native."""
    if name == "none":
        return None
    if name == "auto":
        return torch.bfloat16 if native_bf16(device) else None
    return _DTYPES[name]


def in_own_thread(fn: Callable[[], T], name: str = "practicum-oneoff") -> T:
    """Run ``fn`` in a thread of its own, wait for it, and return its result (or raise its error).

    For heavy one-off torch work (loading a model) in a process whose steady work runs on
    another thread (an engine's decode thread). torch's CPU kernels run on libgomp, which keeps
    a pool of worker threads for every thread that has ever run a parallel region; once the
    process holds more of them than it has CPUs, libgomp switches every pool to its "throttled"
    wait (100 spins, then sleep on a futex), so each of the hundreds of small parallel regions
    of a decode step pays a wake-up. A pool goes away with its thread: work done here leaves
    none behind. Measured (2-core machine, the embedded model, 16 concurrent requests to one
    HFEngine, five alternating pairs): the model loaded on the main thread 49-71 tokens/s,
    loaded through this function 68-91.
    """
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix=name) as one:  # its thread ends on leaving
        return one.submit(fn).result()
