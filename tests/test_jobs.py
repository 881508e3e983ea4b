"""A sweep's jobs composed once per set of config-group choices (``config/composer.Composer``): each
job's config, Hydra node included, equals Hydra's own composition of the job (what its launcher
runs), for value overrides of every kind; a job made from its base's scratch copy (no copy per
job) has Hydra's config, values, folder and Hydra record, whatever the job before it set; and a
dry run of many jobs keeps one job at a time and says how far it is."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.types import RunMode
from omegaconf import OmegaConf, open_dict

from fedprox_cli.cli import dryrun
from fedprox_cli.common.package import CONF_DIR
from fedprox_cli.config import jobs as jobs_module
from fedprox_cli.config import resolvers
from fedprox_cli.config.composer import Composer

PRE = ["hydra.sweep.dir=/tmp/fedrun-test-sweep"]
JOBS = [
    ["dataset=digits", "model=linear", "seed=3"],
    ["dataset=digits", "model=linear", "seed=4", "T=7"],
    ["dataset=digits", "algorithm=fedavg", "regularizer=none", "seed=5"],  # another base
    ["dataset=digits", "model=linear", "algorithm.beta=0.25", "seed=6"],
    ["dataset=digits", "model=linear", "+oracle.extra=1", "seed=7"],
    ["dataset=digits", "model=linear", "++T=9", "seed=8"],
    ["dataset=digits", "model=linear", "~oracle.memory_gb", "seed=9"],
    ["dataset=digits", "model=linear", "n=${K}", "seed=10"],
    ["dataset=digits", "model=linear", "data={root: /x}", "seed=11"],  # a dict: whole
    ["seed=12", "model=linear", "dataset=digits"],  # the group after a value
    ["dataset=digits", "model=linear", "algorithm.beta=${calc:1/0}", "seed=13"],  # fails
    ["dataset=digits", "model=linear", "partition.seed=5", "seed=14"],  # a key that follows seed
    ["dataset=digits", "model=linear", "seed=15"],  # T, beta, partition.seed back as composed
    ["dataset=digits", "model=linear", "data.root=${hydra:job.override_dirname}", "seed=16"],
    ["dataset=digits", "model=linear", "data.root=${hydra.job.num}", "seed=17"],  # a run fails
]
QUICK = {0, 1, 2, 3, 7, 9, 10, 11, 12, 13}  # the jobs that set values the base has
READS = {13}  # a job whose config reads Hydra's node (${hydra:...})


@pytest.fixture
def hydra_here():
    resolvers.register()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3", job_name="fedrun"):
        yield GlobalHydra.instance().hydra


def whole(gh, job):
    return gh.compose_config(
        "config", PRE + job, run_mode=RunMode.RUN, with_log_configuration=False
    )


@pytest.mark.parametrize("job", JOBS, ids=[" ".join(j) for j in JOBS])
def test_a_job_from_its_base_is_hydras_composition(hydra_here, job):
    composer = Composer(hydra_here, "config", PRE)
    composer(JOBS[0])  # a base composed for another job first
    mine, hydras = composer(job), whole(hydra_here, job)
    for cfg in (mine, hydras):
        cfg.hydra.runtime.cwd = ""  # where each was composed
    assert OmegaConf.to_container(mine) == OmegaConf.to_container(hydras)
    assert OmegaConf.is_struct(mine) and str(mine.hydra.sweep.subdir) == str(
        hydras.hydra.sweep.subdir
    )


def _values(cfg):
    try:
        return OmegaConf.to_container(cfg, resolve=True)
    except Exception as e:  # noqa: BLE001 -- both fail alike
        return type(e).__name__


def test_every_job_of_a_sweep_is_hydras_composition(hydra_here):
    """Each job, in sweep order (each one after jobs that set other keys on the same base), has
    the config, values, folder, choices and Hydra record of Hydra's own composition."""
    from hydra.core.hydra_config import HydraConfig

    master = hydra_here.compose_config(
        "config", PRE, run_mode=RunMode.MULTIRUN, with_log_configuration=False
    )
    quick = set()
    for job in jobs_module.compose_jobs(hydra_here, "config", master, JOBS):
        hydras = whole(hydra_here, JOBS[job.num])
        h = hydras.hydra
        h.job.num, h.job.id = job.num, f"dry_run_{job.num}"  # as the launcher numbers it
        folder = Path(str(h.sweep.dir)) / str(h.sweep.subdir)
        assert (job.folder, job.choices) == (folder, dict(h.runtime.choices))
        mine = HydraConfig.get()
        assert (mine.job.num, mine.job.id) == (h.job.num, h.job.id)
        if job.composed is not None or job.num in READS:
            assert OmegaConf.to_container(mine.job) == OmegaConf.to_container(h.job)
            assert OmegaConf.to_container(mine.overrides) == OmegaConf.to_container(h.overrides)
        HydraConfig.instance().set_config(hydras)  # Hydra's own job reads its own record
        with open_dict(hydras):
            del hydras["hydra"]
        assert job.plain == OmegaConf.to_container(hydras)
        values = _values(hydras)  # the error's name where it cannot be resolved
        assert job.resolved.values == (None if isinstance(values, str) else values)
        assert (job.resolved.error is None) == (not isinstance(values, str))
        assert OmegaConf.to_container(job.cfg) == OmegaConf.to_container(hydras)
        if job.composed is None:
            quick.add(job.num)
    assert quick == QUICK


def test_a_bad_value_override_is_hydras_error(hydra_here):
    composer = Composer(hydra_here, "config", PRE)
    with pytest.raises(Exception) as mine:
        composer(["dataset=digits", "nonsense_key=1"])
    with pytest.raises(Exception) as hydras:
        whole(hydra_here, ["dataset=digits", "nonsense_key=1"])
    assert type(mine.value) is type(hydras.value)


def test_a_dry_run_keeps_one_jobs_config_at_a_time(monkeypatch, capsys):
    """Each job is gone once the next one is composed; progress lines come as the jobs are
    checked (every job here: PROGRESS_S = 0)."""
    alive = []
    composed = jobs_module._composed

    def watched(*args):
        for job in composed(*args):
            alive.append(weakref.ref(job))
            yield job
            gc.collect()
            assert sum(r() is not None for r in alive) <= 1

    monkeypatch.setattr(jobs_module, "_composed", watched)
    monkeypatch.setattr(dryrun, "PROGRESS_S", 0.0)
    code = dryrun.dry_run(
        ["dataset=digits", "model=linear", "seed=range(0,6)", f"hydra.sweep.dir={PRE[0][16:]}"],
        multirun=True,
    )
    err = capsys.readouterr().err
    assert code == 0 and len(alive) == 6
    assert [line.split(" (")[0] for line in err.splitlines()] == [
        f"fedrun: checked {i} jobs" for i in range(1, 7)
    ]
