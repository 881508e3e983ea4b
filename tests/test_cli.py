"""fedrun end to end through the command line."""

import json
import subprocess
import sys

import pandas as pd
import pytest
from conftest import child_env, fedrun, job_folders, without

from fedprox_cli.common.metric_table import BUILT_IN as COLUMNS

TINY = ["dataset=digits", "T=3", "K=2", "n=4", "B=8", "eval_every=1"]


def test_run_writes_complete_folder(run_fedrun, tmp_path):
    out = tmp_path / "run"
    r = run_fedrun(*TINY, f"hydra.run.dir={out}")
    assert r.returncode == 0, r.stderr
    df = pd.read_csv(out / "metrics.csv")
    assert list(df.columns) == list(COLUMNS) and list(df["round"]) == [0, 1, 2, 3]
    assert df[list(COLUMNS)].notna().all().all()
    assert json.loads((out / "summary.json").read_text())["status"] == "finished"
    for f in ("config.yaml", "partition.npz", "metrics.png"):
        assert (out / f).stat().st_size > 0
    assert str(out / "metrics.csv") in r.stdout


def test_two_job_sweep(run_fedrun, tmp_path):
    r = run_fedrun("-m", *TINY, "algorithm=fedcanon", "seed=0,1", f"hydra.sweep.dir={tmp_path}")
    assert r.returncode == 0, r.stderr
    runs = sorted(p for p in tmp_path.iterdir() if (p / "metrics.csv").exists())
    assert len(runs) == 2
    a, b = (pd.read_csv(p / "metrics.csv") for p in runs)
    assert len(a) == len(b) == 4 and not a["train_loss"].equals(b["train_loss"])
    assert "2 of 2 jobs finished" in r.stdout


def test_train_samples_changes_only_the_train_metrics(run_fedrun, tmp_path):
    """metrics.train_samples estimates train_loss/objective/stationarity on a subset; training
    and the test metrics are the same as with exact evaluation."""
    r = run_fedrun("-m", *TINY, "metrics.train_samples=null,400", f"hydra.sweep.dir={tmp_path}")
    assert r.returncode == 0, r.stderr
    exact, sub = (pd.read_csv(j / "metrics.csv") for j in job_folders(tmp_path))
    for col in ("grad_evals", "test_loss", "test_acc", "hoyer"):
        pd.testing.assert_series_equal(exact[col], sub[col])
    assert not exact["train_loss"].equals(sub["train_loss"])
    assert ((sub["train_loss"] / exact["train_loss"] - 1).abs() < 0.1).all()


def _bad(run_fedrun, tmp_path, *args):
    out = tmp_path / "bad"
    r = run_fedrun(*TINY, *args, f"hydra.run.dir={out}")
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode == 2, r.stderr
    assert len(lines) == 1 and lines[0].startswith("fedrun: error:"), r.stderr
    assert "Traceback" not in r.stderr
    summary = out / "summary.json"
    assert not summary.exists() or json.loads(summary.read_text())["status"] != "finished"
    return lines[0]


def test_bad_inputs_one_line(run_fedrun, tmp_path):
    assert "algorithm/nope" in _bad(run_fedrun, tmp_path, "algorithm=nope")
    assert "foo" in _bad(run_fedrun, tmp_path, "foo=1")
    assert "K must be a positive integer" in _bad(run_fedrun, tmp_path, "K=0")
    assert "algorithm.alpha" in _bad(run_fedrun, tmp_path, "algorithm.alpha=-1")
    assert "exceeds" in _bad(run_fedrun, tmp_path, "n=5000")
    assert "h = 0 only" in _bad(run_fedrun, tmp_path, "algorithm=fedavg")


@pytest.mark.parametrize(
    "typo, hint",
    [
        ("regularizer.lamda=1", "did you mean regularizer.lam?"),
        ("Tt=3", "(did you mean T?)"),
        ("algorithm.alpah=0.1", "did you mean algorithm.alpha?"),
        ("nonsense=1", None),
    ],
)
def test_a_mistyped_key_gets_did_you_mean(tmp_path, typo, hint):
    """One line naming the closest key of the same node, in a run and a dry run alike; none
    where no key is close."""
    for extra in ([], ["dry_run=true"]):
        r = fedrun(*TINY, typo, *extra, f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
        line = r.stderr.strip()
        assert r.returncode == 2 and "\n" not in line, r.stderr
        assert (
            ("has no parameter" in line and "--help` describes them" in line)
            if "." in typo
            else "is not in struct" in line
        ), line
        assert (hint in line) if hint else "did you mean" not in line, line
        assert not (tmp_path / "run").exists()


def test_a_mistyped_key_in_a_config_dir_yaml_gets_the_same_line_naming_the_file(tmp_path):
    """The command line's words (what the option takes, did you mean), and the file it is in."""
    mine = tmp_path / "conf" / "algorithm" / "myavg.yaml"
    mine.parent.mkdir(parents=True)
    mine.write_text("name: fedavg\nbta: 0.05\nalpha: 1.0\n")
    for extra in ([], ["dry_run=true"]):
        r = fedrun(
            "--config-dir",
            str(tmp_path / "conf"),
            *TINY,
            "algorithm=myavg",
            "regularizer=none",
            *extra,
            f"hydra.run.dir={tmp_path / 'run'}",
            cwd=tmp_path,
        )
        assert r.returncode == 2 and r.stderr.strip().splitlines() == [
            "fedrun: error: algorithm fedavg has no parameter bta (it takes: alpha, beta; `fedrun "
            "algorithm=fedavg --help` describes them); did you mean algorithm.beta? "
            f"(set in {mine})"
        ], r.stderr
        assert not (tmp_path / "run").exists()


OPTIONAL = (
    "hydra_plugins.hydra_submitit_launcher",
    "submitit",
    "hydra_plugins.hydra_joblib_launcher",
    "hydra_plugins.hydra_optuna_sweeper",
    "optuna",
    "tensorboard",
    "mlflow",
    "wandb",
    "hydra_plugins.hydra_ray_launcher",
    "ray",
)


def test_a_single_run_needs_no_launcher_sweeper_or_tracker(tmp_path):
    """With every optional package missing, a run and a sweep on the basic launcher work, and
    no warning is printed (Hydra's plugin scan included)."""
    env = without(tmp_path, *OPTIONAL)
    r = fedrun(*TINY, "T=1", f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path, env=env)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    r = fedrun(
        "-m", *TINY, "T=1", "seed=0,1", f"hydra.sweep.dir={tmp_path / 's'}", cwd=tmp_path, env=env
    )
    assert r.returncode == 0 and "2 of 2 jobs finished" in r.stdout, r.stderr


@pytest.mark.parametrize(
    "missing, args, says",
    [
        (
            ("hydra_plugins.hydra_submitit_launcher",),
            ["-m", "hydra/launcher=submitit_slurm"],
            "hydra/launcher=submitit_slurm needs `pip install fedprox_cli[cluster]`",
        ),
        (
            ("hydra_plugins.hydra_submitit_launcher",),
            ["-m", "hydra/launcher=slurm", "dry_run=true"],
            "hydra/launcher=slurm needs `pip install fedprox_cli[cluster]`",
        ),
        (
            ("submitit",),
            ["-m", "hydra/launcher=local"],
            "hydra/launcher=local needs `pip install fedprox_cli[cluster]`",
        ),
        (
            ("hydra_plugins.hydra_joblib_launcher",),
            ["-m", "hydra/launcher=joblib"],
            "hydra/launcher=joblib needs `pip install fedprox_cli[cluster]`",
        ),
        (
            ("hydra_plugins.hydra_ray_launcher",),
            ["-m", "hydra/launcher=ray"],
            "hydra/launcher=ray needs `pip install fedprox_cli[ray]`",
        ),
        (
            ("ray",),
            ["-m", "hydra/launcher=ray", "dry_run=true"],
            "hydra/launcher=ray needs `pip install fedprox_cli[ray]`",
        ),
        (
            ("hydra_plugins.hydra_optuna_sweeper", "optuna"),
            ["-m", "hparams_search=fedcanon_digits"],
            "hydra/sweeper=optuna needs `pip install fedprox_cli[search]`",
        ),
        (
            ("optuna",),
            ["-m", "hparams_search=fedcanon_digits"],
            "hydra/sweeper=optuna needs `pip install fedprox_cli[search]`",
        ),
        (("mlflow",), ["logger=mlflow"], "logger=mlflow needs `pip install fedprox_cli[mlflow]`"),
        (
            ("tensorboard",),
            ["logger=tensorboard", "dry_run=true"],
            "logger=tensorboard needs `pip install fedprox_cli[tensorboard]`",
        ),
    ],
)
def test_a_missing_extra_is_one_line_naming_it(tmp_path, missing, args, says):
    r = fedrun(
        *args,
        *TINY,
        "T=1",
        f"hydra.run.dir={tmp_path / 'run'}",
        f"hydra.sweep.dir={tmp_path / 's'}",
        cwd=tmp_path,
        env=without(tmp_path, *missing),
    )
    assert r.returncode == 2 and r.stderr.startswith(f"fedrun: error: {says}"), r.stderr
    assert len(r.stderr.splitlines()) == 1, r.stderr
    assert not (tmp_path / "run").exists() and not (tmp_path / "s").exists()


def _loaded(tmp_path, code: str) -> list[str]:
    """The optional modules (and submodules) loaded after ``code`` runs in a fresh interpreter."""
    probe = (
        f"import sys\n{code}\nprint(sorted(m for m in sys.modules if m.split('.')[0] in "
        f"{sorted({m.split('.')[0] for m in OPTIONAL} - {'hydra_plugins'})} or m.startswith("
        f"('hydra_plugins.hydra_joblib_launcher._core', 'hydra_plugins.hydra_optuna_sweeper._impl'))))"
    )
    p = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    return eval(p.stdout.strip().splitlines()[-1])


def test_importing_fedrun_or_running_once_loads_no_optional_package(tmp_path):
    assert (
        _loaded(
            tmp_path,
            "import fedprox_cli, fedprox_cli.cli.main\n"
            "assert not [m for m in sys.modules if m.startswith('hydra_plugins.')], sys.modules",
        )
        == []
    )
    run = (
        f"sys.argv = ['fedrun', *{TINY}, 'T=1', 'hydra.run.dir={tmp_path / 'run'}']\n"
        "from fedprox_cli.cli.main import main\ntry:\n    main()\nexcept SystemExit as e:\n    assert e.code == 0"
    )
    assert _loaded(tmp_path, run) == []
