"""Past one machine: rollout workers, sandbox workers and the trainer as Ray actors.

``distributed.backend: ray`` keeps the orchestrator and the store in the driver and moves the
heavy parts into actors (docs/distributed.md):

* :class:`~practicum.distributed.rollout.RayEngine` - an engine whose requests go to rollout
  workers, each an :class:`~practicum.engines.hf.HFEngine` in its own actor; weights travel
  through Ray's object store, and a worker gets traffic only once it holds the current version;
  health checks replace a worker that dies or hangs, and its in-flight requests fail as engine
  failures that the orchestrator retries (nothing is lost; the audit balances);
* :class:`~practicum.distributed.trainer.RemoteTrainer` - the trainer in an actor (its weights
  published straight from the actor to the object store, never through the driver);
* :class:`~practicum.distributed.sandbox.RemoteSessions` - sandbox sessions held by sandbox
  workers on CPU nodes, used by the domains as if they were local.

Ray is an optional dependency (``pip install 'practicum[ray]'``), imported only here.
"""

from practicum.distributed.config import DistributedConfig, Placement

__all__ = ["DistributedConfig", "Placement"]
