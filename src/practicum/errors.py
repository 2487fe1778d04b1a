"""The one exception module of Practicum.

Two kinds of failure exist, and they are kept apart on purpose:

* A **framework or user error** (a broken config, a missing model, a corrupt store) is raised
  and stops the run, with a message that says what to do.
* A **rollout failure** (the model wrote something unparseable, a tool failed, a verifier
  timed out) is *data*: it is recorded on the episode as an :class:`EpisodeError` record and
  counted in the metrics; the run goes on. The exceptions below whose names end in
  ``Failure`` exist so that environment code can raise them and the rollout loop can turn them
  into records. Anything else raised inside a rollout is a bug and propagates, except while an
  environment reads the model's reply: a reply can be anything, so that bug fails the episode as
  an :class:`EnvironmentFailure` (traceback logged) and the run goes on (:mod:`practicum.rollout`).

Tree::

    PracticumError
    ├── ConfigError            invalid YAML, unknown or invalid field, bad override
    │   └── PluginError        a domain plugin is not installed, or cannot be loaded
    ├── ModelError             a model cannot be found, converted or loaded
    ├── TaskError              a task file or generator is malformed
    ├── StoreError             the run folder or its SQLite store cannot be used
    ├── CheckpointError        a checkpoint is missing, partial or from another run
    ├── SandboxError           a sandbox backend cannot work here, or a path escapes a workspace
    ├── RolloutsFailing        every group of the last many failed: the run stops instead of drawing forever
    └── RolloutFailure         a failure of one episode (recorded, never fatal)
        ├── ModelOutputFailure the model's output is not what was asked
        ├── EnvironmentFailure the environment or a tool failed on this episode
        ├── VerifierFailure    the verifier could not score this episode
        └── EngineFailure      the engine could not generate this episode's turn
"""

from __future__ import annotations


class PracticumError(Exception):
    """Base class of every error Practicum raises on purpose."""


class ConfigError(PracticumError):
    """A config file or override is invalid. The message names the file and the field."""


class PluginError(ConfigError):
    """A domain plugin (entry-point group ``practicum.domains``) is not installed, or it fails to
    load. The message names the plugin, where it comes from, and what to do."""


class ModelError(PracticumError):
    """A model cannot be found, converted or loaded."""


class TaskError(PracticumError):
    """A task file, task folder or generator specification is malformed."""


class StoreError(PracticumError):
    """The run folder or its store cannot be opened, written or read."""


class CheckpointError(PracticumError):
    """A checkpoint is missing, incomplete, or does not belong to this run."""


class SandboxError(PracticumError):
    """A sandbox backend cannot be used here, or a request is invalid (a path that escapes the
    workspace). What a sandboxed *program* does is never an exception: see ExecResult."""


class RolloutsFailing(PracticumError):
    """The last ``async.stop_after_failed_groups`` groups in a row all failed (an engine, sandbox
    or verifier that is down): the run stops with the last group's errors instead of drawing
    groups that fail forever. Each failure is on record in the store."""


class RolloutFailure(PracticumError):
    """A failure confined to one episode. The rollout loop records it; the run goes on."""

    kind = "rollout"


class ModelOutputFailure(RolloutFailure):
    """The model's output could not be used (no answer, malformed tool call, too long)."""

    kind = "model_output"


class EnvironmentFailure(RolloutFailure):
    """The environment, a tool or a sandbox failed while serving this episode."""

    kind = "environment"


class VerifierFailure(RolloutFailure):
    """The verifier could not produce a score for this episode."""

    kind = "verifier"


class EngineFailure(RolloutFailure):
    """The engine failed to generate a turn (a crashed or unreachable inference server, an
    out-of-memory error). Raised at the engine boundary so that the orchestrator can retry."""

    kind = "engine"
