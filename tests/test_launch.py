"""A sweep launched composes each distinct set of config-group choices once, not each job
(``config/launch``: Hydra's basic sweeper and launcher get each job's config from the check's
``config/composer.Composer``), and its launcher keeps no job's configs until the sweep ends."""

from __future__ import annotations

from conftest import fedrun, job_folders
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.core_plugins import basic_launcher
from hydra.core import utils

from fedprox_cli.config import launch

BASE = ["dataset=digits", "model=linear", "n=4", "K=2", "B=16", "T=1", "regularizer=none"]


def counted(monkeypatch) -> list[list[str]]:
    """The overrides of every composition Hydra's config loader makes from now on."""
    calls: list[list[str]] = []
    compose = ConfigLoaderImpl.load_configuration

    def load_configuration(self, config_name, overrides, *args, **kwargs):
        calls.append(list(overrides))
        return compose(self, config_name, overrides, *args, **kwargs)

    monkeypatch.setattr(ConfigLoaderImpl, "load_configuration", load_configuration)
    return calls


def test_compositions_do_not_grow_with_the_jobs(tmp_path, monkeypatch):
    calls = counted(monkeypatch)
    made = []
    for seeds in ("0,1", "0,1,2,3,4,5"):
        calls.clear()
        sweep = tmp_path / f"s{len(seeds)}"
        r = fedrun(
            "-m", *BASE, "algorithm=fedcanon,fedavg", f"seed={seeds}", f"hydra.sweep.dir={sweep}"
        )
        assert r.returncode == 0, r.stderr
        assert len(job_folders(sweep)) == 2 * len(seeds.split(","))
        made.append(len(calls))
    assert made[0] == made[1], made  # the master's and one a base (2 algorithms), either size
    assert ConfigLoaderImpl.load_sweep_config is launch._HYDRAS  # Hydra's own again afterwards


def test_the_launcher_keeps_no_jobs_configs(tmp_path, monkeypatch):
    returns = []
    run_job = utils.run_job

    def kept(*args, **kwargs):  # what the launcher appends to the sweep's returns
        returns.append(run_job(*args, **kwargs))
        return returns[-1]

    monkeypatch.setattr(basic_launcher, "run_job", kept)
    monkeypatch.setattr(utils, "run_job", kept)  # where Hydra's plugin scan imports it from
    r = fedrun("-m", *BASE, "seed=0,1,2", f"hydra.sweep.dir={tmp_path / 's'}")
    assert r.returncode == 0, r.stderr
    assert len(returns) == 3
    for ret in returns:
        assert ret.cfg is None and ret.hydra_cfg is None
        assert isinstance(ret.return_value, float) and ret.overrides[-1].startswith("seed=")
