"""The typed run config (config/schema.py, config/validate.typed): the schema in the ConfigStore
agrees with conf/config.yaml and every preset, typing does not touch the recorded config (its
digest), and a RunConfig built in Python is checked like one from the command line."""

from dataclasses import fields

import pytest
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from fedprox_cli.common.errors import UserError
from fedprox_cli.common.package import CONF_DIR
from fedprox_cli.config import schema
from fedprox_cli.config.compose import compose
from fedprox_cli.config.validate import resolved, typed
from fedprox_cli.runs.checkpoint import digest

PRESETS = sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml"))


def _schema():
    return ConfigStore.instance().load("fedrun_schema.yaml").node


@pytest.mark.parametrize("preset", [None] + PRESETS)
def test_every_preset_fits_the_schema_in_the_config_store(preset):
    cfg = compose(["dataset=digits"] + ([f"experiment={preset}"] if preset else []))
    merged = OmegaConf.merge(_schema(), cfg)  # an unknown key or a wrong type would raise here
    assert set(merged) == {f.name for f in fields(schema.RunConfig)}  # and no schema key is missing
    for section, cls in (
        ("data", schema.Data),
        ("oracle", schema.Oracle),
        ("metrics", schema.Metrics),
    ):
        assert set(cfg[section]) == {f.name for f in fields(cls)}


def test_typed_values_and_the_record_untouched():
    cfg = compose(
        ["dataset=digits", "participation=1", "B=full", "algorithm=fedavg", "oracle.memory_gb=2"]
    )
    before = (OmegaConf.to_yaml(cfg), digest(resolved(cfg)))
    s = typed(cfg, compose(["dataset=digits", "algorithm=fedavg"]))
    assert isinstance(s, schema.RunConfig) and isinstance(s.oracle, schema.Oracle)
    assert s.participation == 1.0 and isinstance(s.participation, float)  # the schema's type
    assert isinstance(s.oracle.memory_gb, float)
    assert s.batch is None and s.B == "full"
    assert s.algorithm == schema.Choice(
        "fedavg", {k: v for k, v in cfg.algorithm.items() if k != "name"}
    )
    assert s.partition.params["seed"] == s.seed  # interpolations resolved
    assert (
        OmegaConf.to_yaml(cfg),
        digest(resolved(cfg)),
    ) == before  # the recorded config (and digest) as composed


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(T=0), "T must be a positive integer, got 0"),
        (dict(B=0), "B must be a positive integer or 'full', got 0"),
        (dict(resume="yes"), "resume must be true or false, got 'yes'"),
        (dict(participation=True), "participation must be in (0, 1], got True"),
        (
            dict(oracle=dict(chunk=0)),
            "oracle.chunk must be a positive integer, auto or null, got 0",
        ),
        (
            dict(metrics=dict(train_samples=-1)),
            "metrics.train_samples must be a positive integer or null",
        ),
        (dict(compile=True, engine="loop"), "compile=true compiles the vmap engine"),
    ],
)
def test_a_run_config_built_in_python_is_checked(change, message):
    base = typed(compose(["dataset=digits"]))
    kw = {f.name: getattr(base, f.name) for f in fields(base)}
    with pytest.raises(UserError) as e:  # a section (oracle=Oracle(...)) checks itself when built
        schema.RunConfig(
            **{
                **kw,
                **{
                    k: type(kw[k])(**{**vars(kw[k]), **v}) if isinstance(v, dict) else v
                    for k, v in change.items()
                },
            }
        )
    assert str(e.value).startswith(message)
    assert schema.RunConfig(**{f.name: getattr(base, f.name) for f in fields(base)}) == base


@pytest.mark.parametrize(
    "override, hint",
    [
        (
            "+regularizer.lamda=1",
            "(it takes: lam; `fedrun regularizer=l1 --help` describes them); did you mean regularizer.lam?",
        ),
        (
            "+algorithm.alpah=0.1",
            "(it takes: alpha, beta; `fedrun algorithm=fedcanon --help` describes them); did you mean algorithm.alpha?",
        ),
        ("+eval_evry=2", "(see fedrun --help); did you mean eval_every?"),
        ("+oracle.chnk=3", "did you mean oracle.chunk?"),
    ],
)
def test_a_mistyped_key_names_the_closest_one(override, hint):
    with pytest.raises(UserError) as e:
        typed(compose(["dataset=digits", override]), compose(["dataset=digits"]))
    assert hint in str(e.value)


@pytest.mark.parametrize(
    "overrides, composes",
    [
        (["dataset=digits", "model=linear", "T=3", "oracle.chunk=4", "hydra.run.dir=x"], False),
        (
            ["algorithm=fedavg", "algorithm.beta=0.1"],
            True,
        ),  # a group's value: its default's type is checked
        (["+foo=1"], True),
        (["++T=2"], True),
        (["~metrics"], True),
        (["+model@x=mlp"], True),
    ],
)
def test_the_reference_config_is_composed_only_where_it_can_differ(
    monkeypatch, overrides, composes
):
    """config.compose.reference_for: the validation reads the reference's keys and its groups'
    values; a config whose overrides add or delete no key and set no group's value is its own
    reference (one Hydra composition fewer per run), and validates as it would against one."""
    from fedprox_cli.config import compose as cc

    monkeypatch.setattr(cc, "reference_config", lambda choices: "composed")
    cfg = compose(["dataset=digits", "model=linear"])
    choices = {"algorithm": "fedcanon", "dataset": "digits", "model": "linear", "regularizer": "l1"}
    got = cc.reference_for(cfg, choices, overrides)
    assert got == "composed" if composes else got is cfg
    if not composes:
        typed(cfg, got)
