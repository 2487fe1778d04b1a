"""Metric sinks: JSONL (one object per line, always) and TensorBoard (when installed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class MetricsWriter:
    def __init__(self, run_dir: Path) -> None:
        self.jsonl = open(run_dir / "metrics.jsonl", "a", buffering=1)
        self.tb = None
        try:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(str(run_dir / "tensorboard"))
        except ImportError:  # tensorboard is a declared dependency, but keep the core usable without it
            pass

    def write(self, step: int, kind: str, values: dict[str, Any]) -> None:
        self.jsonl.write(json.dumps({"step": step, "kind": kind, **values}) + "\n")
        if self.tb is not None:
            for k, v in values.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    self.tb.add_scalar(f"{kind}/{k}", v, step)
            self.tb.flush()

    def close(self) -> None:
        self.jsonl.close()
        if self.tb is not None:
            self.tb.close()
