"""Analysis output is the data: in every output of fedrun-table and fedrun-report a config key's
column holds that key's values, whatever the key is named (a key ``n`` is never overwritten by
the seed count of the table's CSV), for every key name the config can have."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from fedprox_cli.analysis import groups, table
from fedprox_cli.analysis.run import CHOICE, Run, is_replicate
from fedprox_cli.cli import status
from fedprox_cli.common.flatten import flatten

CONF = Path(__file__).resolve().parents[1] / "conf"


def _keys(node, prefix: str = "") -> set[str]:
    data = OmegaConf.to_container(node, resolve=False)
    data = {k: v for k, v in data.items() if k not in ("defaults", "hydra")}
    return {prefix + k for k in flatten(data)}


def every_key() -> list[str]:
    """Every key name a run's flat config can have: conf/config.yaml's, every group option's
    (nested options too) under its group, the presets' globals, and each group's choice key."""
    keys = _keys(OmegaConf.load(CONF / "config.yaml"))
    for group in sorted(p for p in CONF.iterdir() if p.is_dir() and p.name != "hydra"):
        keys.add(CHOICE + group.name)
        for option in group.rglob("*.yaml"):
            at_top = "@package _global_" in option.read_text()
            prefix = "" if at_top else f"{group.name}."
            keys |= _keys(OmegaConf.load(option), prefix)
    return sorted(keys)


KEYS = every_key()


def _run(i: int, config: dict) -> Run:
    metrics = pd.DataFrame({"round": [0, 5], "test_acc": [0.1, 0.5 + i / 10]})
    return Run(Path(f"r{i}"), config, metrics, "finished")


def test_the_config_has_keys_named_like_the_outputs_columns():
    """The enumeration reaches the keys at risk (``n`` beside the table's statistics)."""
    assert {"n", "T", "seed", "algorithm.name", CHOICE + "algorithm", "metrics.train_samples"} <= (
        set(KEYS)
    )
    assert len(KEYS) > 70 and not any(k.startswith("algorithm.algorithm") for k in KEYS)


GROUPING = [k for k in KEYS if not is_replicate(k) and not groups.is_run_control(k, "last")]


@pytest.mark.parametrize("key", GROUPING)
def test_every_grouping_key_keeps_its_values_in_the_table_csv(key):
    """Every key that can tell groups apart (all but seeds and run control, which never do)."""
    runs = [_run(i, {key: value, "seed": i % 2}) for i, value in enumerate([3, 3, 4, 4])]
    csv = pd.read_csv(io.StringIO(table.render(runs, table.Spec(column=None), "csv")))
    name = groups.columns([key], reserved=table.STATS)[key]
    assert sorted(csv[name]) == [3, 4]  # the key's values, untouched
    assert list(csv.columns) == [name, *table.STATS]
    assert set(csv["metric:seeds"]) == {2}


def test_the_issues_case_n_with_seeds_in_every_format():
    """``n=3,4`` with two seeds each: the CSV's ``n`` is 3 and 4, the seed count apart."""
    runs = [
        _run(i, {"n": n, "seed": s, "algorithm.name": "fedcanon"})
        for i, (n, s) in enumerate([(3, 0), (3, 1), (4, 0), (4, 1)])
    ]
    spec = table.Spec()
    csv = pd.read_csv(io.StringIO(table.render(runs, spec, "csv")))
    assert list(csv.columns) == ["n", "algorithm", *table.STATS]
    assert list(csv["n"]) == [3, 4] and list(csv["metric:seeds"]) == [2, 2]
    md = table.render(runs, spec).splitlines()
    assert md[0].startswith("| n | ") and md[2].startswith("| 3 |") and md[3].startswith("| 4 |")
    assert "\n3 & " in table.render(runs, spec, "latex")


def test_two_keys_of_one_short_name_get_two_columns():
    """``algorithm.name`` and the group choice ``algorithm`` both read ``algorithm`` in short."""
    runs = [
        _run(0, {"algorithm.name": "fedavg", CHOICE + "algorithm": "fedavg"}),
        _run(1, {"algorithm.name": "fedavg", CHOICE + "algorithm": "fig2/fedavg"}),
        _run(2, {"algorithm.name": "fedcanon", CHOICE + "algorithm": "fedcanon"}),
    ]
    csv = pd.read_csv(io.StringIO(table.render(runs, table.Spec(column=None), "csv")))
    assert list(csv[CHOICE + "algorithm"]) == ["fedavg", "fig2/fedavg", "fedcanon"]
    assert list(csv["algorithm.name"]) == ["fedavg", "fedavg", "fedcanon"]


@pytest.mark.parametrize("key", [*status.OWN, "n", "T"])
def test_the_report_keeps_a_key_named_like_its_own_columns(tmp_path, key):
    """fedrun-report's status, rounds, metrics, error and code columns never take a key's
    place (a key ``status`` is a column of its own, holding the key's values)."""
    for i, value in enumerate([3, 4]):
        d = tmp_path / f"r{i}"
        d.mkdir()
        (d / "config.yaml").write_text(json.dumps({key: value}))
        (d / "summary.json").write_text(json.dumps({"status": "finished", "round": 5, "T": 5}))
    columns, rows = status.rows([tmp_path])
    name = groups.columns([key], reserved=status.OWN)[key]
    assert name in columns and name not in status.OWN
    assert [r[name] for r in rows] == [3, 4]
    assert [r["status"] for r in rows] == ["finished", "finished"]


def test_column_names_are_unique_and_apart_from_the_reserved():
    keys = np.random.default_rng(0).permutation(KEYS).tolist()
    names = groups.columns(keys, reserved=table.STATS)
    assert len(set(names.values())) == len(keys)
    assert not set(names.values()) & set(table.STATS)
