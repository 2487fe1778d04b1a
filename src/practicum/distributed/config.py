"""The ``distributed:`` section of a run config (docs/distributed.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Placement(_Strict):
    """What one actor asks Ray for: it is placed on a node that has it."""

    num_cpus: float = Field(1.0, ge=0, description="Logical CPUs the actor holds.")
    num_gpus: float = Field(0.0, ge=0, description="GPUs the actor holds (fractions share one).")
    resources: dict[str, float] = Field(default_factory=dict, description="Custom resources, e.g. {sandbox_node: 1} to pin to nodes started with `ray start --resources`.")
    threads: int | None = Field(None, ge=1, description="torch threads in the actor (None: as many as its num_cpus, at least 1).")


class DistributedConfig(_Strict):
    backend: Literal["local", "ray"] = Field("local", description="local: everything in this process; ray: rollout workers, "
                                             "sandbox workers and the trainer as Ray actors, the orchestrator and the store in the driver.")
    address: str | None = Field(None, description="Ray cluster to join ('auto': the one this node belongs to, after `ray start`; "
                                "'ray://host:10001': a remote head). None: start a local Ray instance.")
    rollout_workers: int = Field(2, ge=1, description="Rollout workers, each with its own engine.")
    rollout: Placement = Field(default_factory=Placement, description="Placement of each rollout worker.")
    trainer: Placement = Field(default_factory=Placement, description="Placement of the trainer actor.")
    sandbox_workers: int = Field(0, ge=0, description="Sandbox workers, each holding pools of sandbox sessions (0: sandboxes run in the driver).")
    sandbox: Placement = Field(default_factory=Placement, description="Placement of each sandbox worker.")
    health_interval: float = Field(5.0, gt=0, description="Seconds between health checks of the workers.")
    health_timeout: float = Field(30.0, gt=0, description="A worker that does not answer a health check within this is replaced.")
    start_timeout: float = Field(600.0, gt=0, description="Seconds a new worker may take to load its model and the current weights.")
