"""The trainer as a Ray actor.

:class:`TrainerWorker` holds a :class:`~practicum.trainer.Trainer` in its own process (placed by
``distributed.trainer``: a GPU node, say); :class:`RemoteTrainer` is the driver's handle with the
trainer's interface as the loop uses it (``update``, ``export_weights``, ``save``, ``load``,
``version``). ``export_weights`` returns an object reference: the actor puts its weights in the
object store and the rollout workers fetch them from there, never through the driver.
Checkpoints are written by the actor to the run folder, which must be on storage the actor's
node can reach (one machine, or a shared filesystem).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from practicum.config import AlgorithmConfig, TrainerConfig
from practicum.distributed.config import DistributedConfig
from practicum.distributed.rollout import actor_options, ensure_ray, worker_threads


class TrainerWorker:
    def __init__(self, model_path: str, cfg: TrainerConfig, algo: AlgorithmConfig, device: str, threads: int,
                 seed: int) -> None:
        torch.set_num_threads(threads)
        torch.manual_seed(seed)  # LoRA's initialisation draws from torch's global RNG, as in the driver
        from practicum.trainer import Trainer

        self.trainer = Trainer(model_path, cfg, algo, device=device)

    def update(self, samples: list[Any], temperature: float, progress: float | None = None,
               per_domain: bool = False) -> tuple[dict[str, float], int]:
        stats = self.trainer.update(samples, temperature, progress, per_domain)
        return stats, self.trainer.version

    def export_weights(self) -> dict[str, torch.Tensor]:
        return {k: v.clone() for k, v in self.trainer.export_weights().items()}

    def save(self, path: str, extra: dict) -> None:
        self.trainer.save(Path(path), extra)

    def load(self, path: str) -> tuple[dict, int]:
        state = self.trainer.load(Path(path))
        return state, self.trainer.version

    def set_version(self, version: int) -> None:
        self.trainer.version = version

    def version(self) -> int:
        return self.trainer.version


class RemoteTrainer:
    """The driver's handle on a :class:`TrainerWorker` actor."""

    def __init__(self, model_path: str | Path, cfg: TrainerConfig, algo: AlgorithmConfig, dist: DistributedConfig,
                 device: str = "cpu", seed: int = 0) -> None:
        self.ray = ensure_ray(dist)
        cls = self.ray.remote(TrainerWorker).options(**actor_options(dist.trainer, None))
        self.actor = cls.remote(str(model_path), cfg, algo, device, worker_threads(dist.trainer), seed)
        self._version = self.ray.get(self.actor.version.remote(), timeout=dist.start_timeout)

    @property
    def version(self) -> int:
        return self._version

    @version.setter
    def version(self, v: int) -> None:
        self.ray.get(self.actor.set_version.remote(v))
        self._version = v

    def update(self, samples: list[Any], temperature: float = 1.0, progress: float | None = None,
               per_domain: bool = False) -> dict[str, float]:
        stats, self._version = self.ray.get(self.actor.update.remote(samples, temperature, progress, per_domain))
        return stats

    def export_weights(self) -> Any:
        """An object reference to the weights (the rollout workers fetch them from the store)."""
        return self.actor.export_weights.remote()

    def save(self, path: Path, extra: dict) -> None:
        self.ray.get(self.actor.save.remote(str(path), extra))

    def load(self, path: Path) -> dict:
        state, self._version = self.ray.get(self.actor.load.remote(str(path)))
        return state

    def close(self) -> None:
        try:
            self.ray.kill(self.actor, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
