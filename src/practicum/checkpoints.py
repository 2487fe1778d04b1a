"""Training checkpoints: the folders ``RUN/checkpoints/step_NNNNNN`` and what they hold.

A checkpoint is written by :meth:`practicum.trainer.Trainer.save` (weights or LoRA adapter,
optimizer, RNG states) plus a ``state.json`` with the loop's own state (the next step, training
time, the base model, the sampler). Only folders with a ``state.json`` count: one that a crash
left half-written is ignored, and the previous checkpoint is used.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch

from practicum.errors import CheckpointError


class Checkpoints:
    """The checkpoint folders of one run, newest last; keeps at most ``keep`` of them."""

    def __init__(self, run_dir: Path, keep: int) -> None:
        self.dir = run_dir / "checkpoints"
        self.keep = keep
        self.pinned: set[int] = set()  # steps whose checkpoint is never pruned (the drift guard's last good one)

    @staticmethod
    def folder_name(step: int) -> str:
        """The folder name of step ``step``'s checkpoint (``step_000040``): sorts by step."""
        return f"step_{step:06d}"

    def path(self, step: int) -> Path:
        return self.dir / self.folder_name(step)

    def all(self) -> list[Path]:
        if not self.dir.is_dir():
            return []
        return sorted(p for p in self.dir.glob("step_*") if (p / "state.json").is_file())

    def latest(self) -> Path | None:
        found = self.all()
        return found[-1] if found else None

    def save(self, trainer: Any, step: int, state: dict[str, Any]) -> Path:
        """Write step ``step``'s checkpoint through ``trainer.save`` and prune the oldest."""
        path = self.path(step)
        trainer.save(path, state)
        for old in self.all()[: -self.keep]:
            if int(old.name.split("_")[1]) not in self.pinned:
                shutil.rmtree(old, ignore_errors=True)
        return path


def load_checkpoint_weights(ckpt: Path) -> tuple[Path, dict[str, torch.Tensor]]:
    """The base model folder and the policy weights (LoRA merged) of a training checkpoint."""
    state_file = ckpt / "state.json"
    if not state_file.is_file():
        raise CheckpointError(f"{ckpt} is not a checkpoint folder (no state.json)")
    state = json.loads(state_file.read_text())
    base = Path(state["model_path"])
    if state.get("mode") == "lora":
        from peft import PeftModel
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
        merged = PeftModel.from_pretrained(model, ckpt / "adapter").merge_and_unload()
        return base, merged.state_dict()
    from safetensors.torch import load_file

    return base, load_file(str(ckpt / "model.safetensors"))
