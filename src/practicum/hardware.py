"""What this machine computes fast: the dtype choice behind ``engine_dtype: auto``.

bf16 halves memory traffic, but on a CPU without bf16 instructions (AVX512-BF16 or AMX on x86,
the BF16 extension on Arm) every bf16 matmul is emulated by converting to fp32 and back, and
measured on such a machine (AMD EPYC with AVX2 only) generation and training of the embedded
model ran about 4x slower in bf16 than in fp32. ``auto`` therefore means bf16 where the hardware
has it and fp32 where it does not.
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

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
