"""engine_dtype / autocast_dtype ``auto``: bf16 only where the hardware computes it natively."""

from __future__ import annotations

import torch

from practicum import hardware
from practicum.config import ModelSection, TrainerConfig


def _cpuinfo(tmp_path, flags: str, key: str = "flags") -> str:
    p = tmp_path / "cpuinfo"
    p.write_text(f"processor\t: 0\nvendor_id\t: X\n{key}\t\t: {flags}\n\nprocessor\t: 1\n{key}\t\t: {flags}\n")
    return str(p)


def test_cpu_flags_decide_native_bf16(tmp_path):
    read = hardware.cpu_has_native_bf16.__wrapped__
    assert read(_cpuinfo(tmp_path, "fpu sse avx2 fma")) is False
    assert read(_cpuinfo(tmp_path, "fpu avx2 avx512f avx512_bf16")) is True
    assert read(_cpuinfo(tmp_path, "fpu avx512f amx_tile amx_bf16")) is True
    assert read(_cpuinfo(tmp_path, "fp asimd sve bf16", key="Features")) is True  # Arm
    assert read(str(tmp_path / "absent")) is False


def test_auto_follows_the_machine(monkeypatch):
    monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda: False)
    assert hardware.resolve_dtype("auto", "cpu") is torch.float32
    assert hardware.resolve_autocast("auto", "cpu") is None
    monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda: True)
    assert hardware.resolve_dtype("auto", "cpu") is torch.bfloat16
    assert hardware.resolve_autocast("auto", "cpu") is torch.bfloat16
    # a named dtype is taken as named, whatever the machine
    assert hardware.resolve_dtype("float32", "cpu") is torch.float32
    assert hardware.resolve_autocast("none", "cpu") is None


def test_defaults_are_auto():
    assert ModelSection().engine_dtype == "auto"
    assert TrainerConfig().autocast_dtype == "auto"


def test_in_own_thread_returns_raises_and_leaves_no_thread_behind():
    import threading

    import pytest

    before = threading.active_count()
    names = []
    assert hardware.in_own_thread(lambda: names.append(threading.current_thread().name) or 7, name="probe") == 7
    assert names[0].startswith("probe") and names[0] != threading.current_thread().name
    with pytest.raises(KeyError, match="missing"):
        hardware.in_own_thread(lambda: {}["missing"])
    assert threading.active_count() == before  # the thread (and any torch pool of it) is gone
