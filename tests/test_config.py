"""Run configs: YAML in, validated models out; every bad input names the file and the field."""

from __future__ import annotations

import pytest
import yaml
from pydantic import BaseModel

from practicum.config import RunConfig, describe, load_config
from practicum.errors import ConfigError

MINIMAL = {"domains": [{"name": "arith", "source": {"kind": "reasoning_gym", "dataset": "chain_sum"}}]}


def test_quickstart_loads_with_the_values_of_the_file(quickstart_path):
    """examples/quickstart.yaml validates, and every value written in it reaches the config."""
    raw = yaml.safe_load(quickstart_path.read_text())
    cfg = load_config(quickstart_path)
    assert isinstance(cfg, RunConfig)
    dumped = cfg.model_dump(mode="json")

    def check(node, written, where):
        if isinstance(written, dict):
            for k, v in written.items():
                check(node[k], v, f"{where}.{k}")
        elif isinstance(written, list):
            assert len(node) == len(written), where
            for i, (n, w) in enumerate(zip(node, written)):
                check(n, w, f"{where}.{i}")
        else:
            assert node == written, where

    check(dumped, raw, "config")
    assert cfg.base_dir == str(quickstart_path.parent)


@pytest.mark.parametrize("name", ["mixed.yaml", "eval_domains.yaml"])
def test_cross_domain_examples_build_every_domain_with_its_held_out_size(quickstart_path, name):
    """examples/mixed.yaml (five domains, sql and longctx among them) and examples/eval_domains.yaml
    validate, every domain builds, and each holds out the few tasks the files ask for, so the
    commands of docs/domains.md stay a few minutes long."""
    from practicum.domains import build_domain

    cfg = load_config(quickstart_path.parent / name)
    envs = {d.env for d in cfg.domains}
    assert {"math", "gym", "code", "sql", "longctx"} <= envs
    for d in cfg.domains:
        dom = build_domain(d, cfg.run.seed, cfg.base_dir)
        assert 2 <= len(dom.source.eval_tasks()) <= 4, d.name


def test_dotted_overrides_apply(quickstart_path):
    """`--set`-style overrides reach sections, list items and nested sections, parsed as YAML."""
    cfg = load_config(
        quickstart_path,
        ["trainer.lr=3e-5", "domains.0.eval_size=10", "rollout.group_size=4", "trainer.lora.r=4",
         "run.time_limit_minutes=null", "eval.before=false"],
    )
    assert cfg.trainer.lr == pytest.approx(3e-5)
    assert cfg.domains[0].eval_size == 10
    assert cfg.rollout.group_size == 4
    assert cfg.trainer.lora.r == 4
    assert cfg.run.time_limit_minutes is None
    assert cfg.eval.before is False
    # untouched values stay as written
    assert cfg.rollout.prompts_per_step == yaml.safe_load(quickstart_path.read_text())["rollout"]["prompts_per_step"]


def test_override_creates_a_section_absent_from_the_file(write_yaml):
    """An override may set a field of a section the file leaves at its defaults."""
    cfg = load_config(write_yaml(MINIMAL), ["algorithm.kl_coef=0.05"])
    assert cfg.algorithm.kl_coef == pytest.approx(0.05)


def test_an_override_of_an_aliased_section_changes_only_the_path_it_names(tmp_path):
    """A YAML alias shares one mapping between places; `--set` on one of them leaves the others
    as written (found with benchmarks/multidomain.yaml's shaping: `gcd: *tags` shared by four
    domains, where an override of gcd's weights changed every domain's)."""
    path = tmp_path / "c.yaml"
    two = {"domains": [{**MINIMAL["domains"][0], "name": n} for n in ("a", "b")]}
    path.write_text(yaml.safe_dump(two) + "curriculum:\n  shaping:\n    a: &tags {format: 0.5}\n    b: *tags\n")
    raw = yaml.safe_load(path.read_text())
    assert raw["curriculum"]["shaping"]["a"] is raw["curriculum"]["shaping"]["b"]  # what an alias is
    cfg = load_config(path, ["curriculum.shaping.b.format=0.1", "curriculum.shaping.b.correctness=0"])
    assert cfg.curriculum.shaping["b"].format == pytest.approx(0.1) and cfg.curriculum.shaping["b"].correctness == 0
    assert cfg.curriculum.shaping["a"].format == pytest.approx(0.5) and cfg.curriculum.shaping["a"].correctness == 1.0


def _error(path, overrides=None) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides)
    return str(info.value)


def test_unknown_field_names_file_and_field(write_yaml):
    """A misspelt field is an error (never a silent default) naming the file and the dotted field."""
    path = write_yaml({**MINIMAL, "trainer": {"lrr": 1e-5}})
    msg = _error(path)
    assert str(path) in msg and "trainer.lrr" in msg and "unknown field" in msg


def test_wrong_type_names_file_and_field(write_yaml):
    """A value of the wrong type names the file and the field."""
    path = write_yaml({**MINIMAL, "rollout": {"group_size": "many"}})
    msg = _error(path)
    assert str(path) in msg and "rollout.group_size" in msg


def test_out_of_range_value_names_file_and_field(write_yaml):
    """Constraints (group_size >= 2) are checked on load."""
    path = write_yaml({**MINIMAL, "rollout": {"group_size": 1}})
    msg = _error(path)
    assert str(path) in msg and "rollout.group_size" in msg


def test_missing_required_field_names_file_and_field(write_yaml):
    """Missing required fields are named, at the top level and inside a list item."""
    path = write_yaml({"trainer": {"lr": 1e-5}})
    msg = _error(path)
    assert str(path) in msg and "domains" in msg
    path = write_yaml({"domains": [{"name": "arith", "source": {"dataset": "chain_sum"}}]}, "nokind.yaml")
    msg = _error(path)
    assert str(path) in msg and "domains.0.source.kind" in msg


def test_source_needs_its_kind_specific_field(write_yaml):
    """A reasoning_gym source without a dataset is rejected, naming the source."""
    path = write_yaml({"domains": [{"name": "arith", "source": {"kind": "reasoning_gym"}}]})
    msg = _error(path)
    assert str(path) in msg and "domains.0.source" in msg and "dataset" in msg


def test_invalid_yaml_names_the_file(write_yaml):
    """Unparseable YAML is a ConfigError naming the file (and where YAML gave up)."""
    path = write_yaml("trainer:\n  lr: [1e-5\nrollout: {\n")
    msg = _error(path)
    assert str(path) in msg and "YAML" in msg and "line" in msg


def test_top_level_must_be_a_mapping(write_yaml):
    """A YAML list at the top level is rejected with the file's name."""
    path = write_yaml("- trainer\n- rollout\n")
    assert str(path) in _error(path)


def test_missing_file_is_a_config_error(tmp_path):
    """A config path that does not exist raises ConfigError naming it."""
    path = tmp_path / "nope.yaml"
    assert str(path) in _error(path)


@pytest.mark.parametrize(
    "override, field",
    [
        ("trainer.lr=abc", "trainer.lr"),  # wrong type
        ("trainer.lrr=1", "trainer.lrr"),  # unknown field
        ("domains.5.eval_size=10", "domains.5"),  # list index out of range
        ("domains.x.eval_size=10", "domains.x"),  # not an index
        ("trainer.lr.x=1", "trainer.lr"),  # a scalar used as a section
        ("trainer.lr=[1", "trainer.lr"),  # value is not valid YAML
        ("trainer.lr", "trainer.lr"),  # no '='
    ],
)
def test_bad_override_names_file_and_field(write_yaml, override, field):
    """Each kind of bad override raises ConfigError naming the config file and the field."""
    path = write_yaml({**MINIMAL, "trainer": {"lr": 1e-5}})
    msg = _error(path, [override])
    assert field in msg
    assert str(path) in msg


def _fields_of(obj: BaseModel, prefix: str = "") -> list[str]:
    """Dotted names of every field of a config instance (list items as name[])."""
    out = []
    for name, info in type(obj).model_fields.items():
        if info.exclude:
            continue
        value = getattr(obj, name)
        name = info.alias or name  # `async` is spelt async_ in Python
        if isinstance(value, BaseModel):
            out += _fields_of(value, f"{prefix}{name}.")
        elif isinstance(value, list) and value and isinstance(value[0], BaseModel):
            out += _fields_of(value[0], f"{prefix}{name}[].")
        else:
            out.append(f"{prefix}{name}")
    return out


def test_describe_lists_and_documents_every_field(quickstart_path):
    """config.describe() has one documented line per field of a loaded config, and no extras."""
    lines = describe()
    documented = {}
    for line in lines:
        if line.endswith(": list of sections"):
            continue
        name, rest = line.split(" (default ", 1)
        documented[name] = rest.split("): ", 1)[1] if "): " in rest else ""
    expected = _fields_of(load_config(quickstart_path))
    assert len(expected) > 40  # the walk really went through every section
    assert sorted(documented) == sorted(expected)
    undocumented = [n for n, d in documented.items() if not d.strip()]
    assert not undocumented


def test_the_engines_cache_room_is_config():
    """``model.kv_room`` / ``kv_row_room`` reach the hf engine's options (what the loop, the CLI
    and Ray's rollout workers build it with); a negative one names the field."""
    from practicum.config import validate_config
    from practicum.engines.hf import ROOM, ROW_ROOM

    base = MINIMAL
    cfg = validate_config({**base, "model": {"kv_room": 0, "kv_row_room": 2}})
    assert cfg.model.hf_options() == {"max_batch": 64, "prefix_cache_mb": 1024, "kv_room": 0, "kv_row_room": 2}
    defaults = validate_config(base).model.hf_options()
    assert (defaults["kv_room"], defaults["kv_row_room"]) == (ROOM, ROW_ROOM)  # the engine's own defaults
    with pytest.raises(ConfigError, match="kv_row_room"):
        validate_config({**base, "model": {"kv_row_room": -1}})
