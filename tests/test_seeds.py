"""Seed-batched runs (``seeds=R``, fedprox_cli/runs/seeds.py): R runs in one process, their clients'
gradients in one vmap call, write the same run folders as R separate runs -- for every
algorithm, with every per-run random stream in play (partition, init, mini-batches, client
sampling, SCAFFNEW's coin, compressor draws)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from conftest import child_env, fedrun, job_folders

from fedprox_cli import algorithms
from fedprox_cli.common.run_files import read_summary
from fedprox_cli.config.compose import compose
from fedprox_cli.engine.lockstep import Lockstep
from fedprox_cli.runs import runner

BASE = [
    "dataset=digits",
    "n=4",
    "K=2",
    "B=8",
    "T=3",
    "eval_every=1",
    "device=cpu",
    "engine=vmap",
    "checkpoint_every=0",
    "progress_every_s=0",
]
RANDOM = {  # each algorithm with the per-run random draws it can make
    "fedavg": ["participation=0.5"],
    "scaffold": ["participation=0.5"],
    "fedmid": ["participation=0.5"],
    "fedda": ["participation=0.5"],
    "feddr": ["participation=0.5"],
    "fedadmm": ["participation=0.5"],
    "scaffnew": ["algorithm.p=0.5"],
    "fedcef": ["compressor=randk"],
}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def overrides(name: str) -> list[str]:
    return [
        *BASE,
        f"algorithm={name}",
        *(["regularizer=none"] if algorithms.build(name).smooth_only else []),
        *RANDOM.get(name, []),
    ]


def numbers(run: Path) -> pd.DataFrame:
    """A run's metrics without its timing column."""
    return pd.read_csv(run / "metrics.csv").drop(columns="time_s")


def config_without_seeds(run: Path) -> dict:
    c = yaml.safe_load((run / "config.yaml").read_text())
    c.pop("seeds")
    return c


@pytest.mark.parametrize("name", algorithms.names())
def test_seed_batched_runs_equal_separate_runs(name, tmp_path):
    ov = overrides(name)
    assert (
        runner.run(compose([*ov, "seed=5", "seeds=3"]), tmp_path / "batched", progress=False) == 0
    )
    for s in (5, 6, 7):
        assert runner.run(compose([*ov, f"seed={s}"]), tmp_path / f"alone{s}", progress=False) == 0
        batched, alone = tmp_path / "batched" / f"seed_{s}", tmp_path / f"alone{s}"
        a, b = numbers(alone), numbers(batched)
        assert len(a) == 4 and a.notna().all().all()
        # bitwise: every row of the joined vmap call is computed as on its own (exact on this CPU)
        pd.testing.assert_frame_equal(a, b, check_exact=True)
        assert config_without_seeds(alone) == config_without_seeds(batched)
        pa, pb = np.load(alone / "partition.npz"), np.load(batched / "partition.npz")
        assert all(np.array_equal(pa[k], pb[k]) for k in pa.files)
        sb = read_summary(batched)
        assert (
            sb["status"] == "finished"
            and sb["engine"]["engine"] == "vmap"
            and "seeds=3" in sb["engine"]["source"]
        )
    # the seeds differ: the three runs are not copies of one
    assert not numbers(tmp_path / "alone5").equals(numbers(tmp_path / "alone6"))


def test_the_joined_call_is_one_call_per_local_step(tmp_path, monkeypatch):
    made = []
    real = Lockstep._compute
    monkeypatch.setattr(
        Lockstep,
        "_compute",
        lambda self, runs, waiting: (made.append(len(runs)), real(self, runs, waiting))[1],
    )
    assert runner.run(compose([*BASE, "seeds=4", "T=2"]), tmp_path / "b", progress=False) == 0
    assert made == [4] * (2 * 2)  # T rounds x K steps, each one call for the 4 runs


def test_joined_calls_split_to_max_rows_and_failures_stay_with_their_run():
    lock = Lockstep(max_rows=5)
    f = lock.member(lambda X, Y: (X * 2, Y.sum(1)))
    got = {}

    def round_of(r):
        def one():
            X = torch.full((r + 2, 3), float(r))
            got[r] = [f(X, X.clone()) for _ in range(2)]
            if r == 1:
                raise ValueError("run 1 fails after its calls")

        return one

    failed = lock.rounds({r: round_of(r) for r in range(3)})
    assert lock.joined == 4  # per step: rows 2 + 3 in one call, 4 in another
    assert list(failed) == [1] and isinstance(failed[1], ValueError)
    for r in range(3):
        for G, L in got[r]:
            assert torch.equal(G, torch.full((r + 2, 3), 2.0 * r)) and torch.equal(
                L, torch.full((r + 2,), 3.0 * r)
            )
    assert f(torch.ones(1, 3), torch.ones(1, 3))[1].item() == 3.0  # outside rounds: on its own


def test_finished_runs_are_left_alone_and_the_others_resume(tmp_path):
    out, keep = tmp_path / "b", ["checkpoint_every=1", "keep_checkpoint=true"]
    assert runner.run(compose([*BASE, *keep, "seed=1", "T=2"]), out / "seed_1", progress=False) == 0
    before = {p: p.read_bytes() for p in (out / "seed_1").iterdir() if p.is_file()}
    # seed 1 finished on its own: left alone; seed 2 runs
    assert runner.run(compose([*BASE, *keep, "seed=1", "seeds=2", "T=2"]), out, progress=False) == 0
    assert {p: p.read_bytes() for p in (out / "seed_1").iterdir() if p.is_file()} == before
    assert read_summary(out / "seed_2")["status"] == "finished"
    # extending T resumes both from their checkpoints, with the numbers of a straight run
    assert runner.run(compose([*BASE, *keep, "seed=1", "seeds=2", "T=4"]), out, progress=False) == 0
    assert runner.run(compose([*BASE, "seed=2", "T=4"]), tmp_path / "straight", progress=False) == 0
    pd.testing.assert_frame_equal(
        numbers(out / "seed_2"), numbers(tmp_path / "straight"), check_exact=True
    )
    assert read_summary(out / "seed_1")["round"] == 4


def test_refusals_change_nothing(tmp_path, capsys):
    out = tmp_path / "b"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert runner.run(compose([*BASE, "seeds=2"]), out, progress=False) == 2
    assert "notes.txt" in capsys.readouterr().err and sorted(p.name for p in out.iterdir()) == [
        "notes.txt"
    ]
    assert (
        runner.run(compose([*BASE, "seeds=2", "engine=loop"]), tmp_path / "c", progress=False) == 2
    )
    assert "engine=vmap or auto" in capsys.readouterr().err
    assert runner.run(compose([*BASE, "seeds=0"]), tmp_path / "c", progress=False) == 2
    assert "seeds must be a positive integer" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()


def test_fedrun_seeds_from_the_command_line(tmp_path):
    env = child_env(OMP_NUM_THREADS="1")
    p = fedrun(*BASE, "seeds=2", "T=2", f"hydra.run.dir={tmp_path / 'r'}", env=env)
    assert p.returncode == 0, p.stderr
    assert "seed_<s> for s = 0..1" in p.stdout
    assert [read_summary(tmp_path / "r" / f"seed_{s}")["status"] for s in (0, 1)] == [
        "finished"
    ] * 2
    p = fedrun(*BASE, "seeds=3", "T=2", "dry_run=true", f"hydra.run.dir={tmp_path / 'r'}", env=env)
    assert "3 runs: seed 0 finished already, seed 1 finished already, seed 2 new" in p.stdout, (
        p.stdout
    )
    assert "work: 16 client steps (" in p.stdout and " and 3 evaluations (" in p.stdout, (
        p.stdout
    )  # seed 2's only
    sweep = ["-m", *BASE, "seeds=2", "T=1", "K=1,2", f"hydra.sweep.dir={tmp_path / 's'}"]
    p = fedrun(*sweep, "dry_run=true", env=env)
    assert (
        p.returncode == 0 and "2 runs: new" in p.stdout and "work: 24 client steps" in p.stdout
    ), p.stdout
    assert not (tmp_path / "s").exists()
    p = fedrun(*sweep, env=env)
    assert p.returncode == 0, p.stderr
    assert (
        "2 of 2 jobs finished" in p.stdout
    )  # jobs, each of seeds=2 runs (the report lists the jobs Hydra launched)
    jobs = job_folders(tmp_path / "s")
    assert sorted((tmp_path / "s").glob("*/seed_*")) == [
        j / f"seed_{s}" for j in sorted(jobs) for s in (0, 1)
    ]
    rows = [
        r for r in map(str.split, p.stdout.splitlines()) if r and "/seed_" in r[0]
    ]  # the job table: run by run
    assert [(r[0].rsplit("/", 1)[1], r[1], r[2], r[-2:]) for r in rows] == [
        (f"seed_{s}", "finished", "1/1", [f"K={k}", f"seed={s}"]) for k in (1, 2) for s in (0, 1)
    ], p.stdout


def test_a_sweeper_gets_the_mean_over_the_seeds(tmp_path):
    from fedprox_cli.cluster.launchers import sweep_value

    cfg = compose([*BASE, "seeds=2", "T=2"])
    assert runner.run(cfg, tmp_path, progress=False) == 0
    finals = [read_summary(tmp_path / f"seed_{s}")["final"]["objective"] for s in (0, 1)]
    assert sweep_value(cfg, tmp_path, 0) == pytest.approx(sum(finals) / 2)


def test_an_interrupted_batch_resumes_to_the_numbers_of_separate_runs(tmp_path):
    import signal
    import time

    env = child_env(OMP_NUM_THREADS="1")
    args = [
        sys.executable,
        "-m",
        "fedprox_cli",
        *BASE,
        "seeds=2",
        "T=200",
        "eval_every=10",
        "checkpoint_every=50",
        f"hydra.run.dir={tmp_path / 'b'}",
    ]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    first = tmp_path / "b" / "seed_0" / "metrics.csv"
    deadline = time.monotonic() + 120
    while (
        not (first.exists() and len(first.read_text().splitlines()) >= 3)
        and time.monotonic() < deadline
    ):
        time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    assert p.wait(timeout=120) == 130
    for s in (0, 1):
        summary = read_summary(tmp_path / "b" / f"seed_{s}")
        assert summary["status"] == "interrupted" and 0 < summary["round"] < 200
        assert (tmp_path / "b" / f"seed_{s}" / "checkpoint.pt").exists()
    resumed = fedrun(*args[3:], env=env)  # the resume needs no process of its own
    assert resumed.returncode == 0, resumed.stderr
    for s in (0, 1):
        assert (
            runner.run(
                compose([*BASE, f"seed={s}", "T=200", "eval_every=10"]),
                tmp_path / f"alone{s}",
                progress=False,
            )
            == 0
        )
        pd.testing.assert_frame_equal(
            numbers(tmp_path / "b" / f"seed_{s}"), numbers(tmp_path / f"alone{s}"), check_exact=True
        )


@pytest.mark.parametrize(
    "args, swept",
    [
        (
            ["experiment=fedcanon_table5_quick", "seeds=3", "dry_run=true"],
            "(0,1)",
        ),  # a preset's sweep
        (["experiment=fednmap_fig2", "seeds=10", "dry_run=true"], "(0,1,2,3,4,5,6,7,8,9)"),
        ([*BASE, "seed=1,2", "seeds=2", "T=1"], "(1,2)"),  # a run, not a dry run
        ([*BASE, "seed=0,3", "seeds=1,2", "T=1", "dry_run=true"], "(0,3)"),
    ],
)
def test_seeds_with_a_sweep_over_seed_is_refused(tmp_path, args, swept):
    """Each job would run seed..seed+R-1: overlapping, duplicate runs. One line, nothing written."""
    p = fedrun(
        "-m",
        *args,
        f"hydra.sweep.dir={tmp_path / 's'}",
        env=child_env(OMP_NUM_THREADS="1"),
        cwd=tmp_path,
    )
    assert (
        p.returncode == 2 and p.stderr.startswith("fedrun: error: seeds=") and swept in p.stderr
    ), p.stderr
    assert len(p.stderr.splitlines()) == 1 and not (tmp_path / "s").exists()


def test_one_seed_with_seeds_in_a_preset_sweep_batches_the_seeds(tmp_path):
    p = fedrun(
        "-m",
        "experiment=fedcanon_table5_quick",
        "seed=0",
        "seeds=3",
        "dry_run=true",
        f"hydra.sweep.dir={tmp_path / 's'}",
        env=child_env(OMP_NUM_THREADS="1"),
        cwd=tmp_path,
    )
    assert p.returncode == 0 and "dry run: 16 jobs" in p.stdout and "3 runs: new" in p.stdout, (
        p.stderr
    )
    assert {"seed=0", "seeds=3"} <= set(p.stdout.splitlines()[1].split())  # every job's overrides


@pytest.mark.parametrize("engine", ["engine=auto", "engine=vmap"])
def test_any_subset_of_seeds_left_resumes(tmp_path, engine):
    """One seed left to run (a larger R; a batch whose middle run was lost), whatever engine
    ``auto`` would pick for one run alone, and naming the engine fedrun chose is no change."""
    out = tmp_path / "b"
    base = [o for o in BASE if not o.startswith("engine=")] + ["model=linear"]
    assert runner.run(compose([*base, "seeds=3"]), out, progress=False) == 0
    first, kept = numbers(out / "seed_1"), (out / "seed_0" / "summary.json").read_bytes()
    for p in (out / "seed_1").glob("*"):  # lost but for its lock, as a failed start left it
        if p.is_file() and p.name != ".fedrun.lock":
            p.unlink()
    assert runner.run(compose([*base, "seeds=3", engine]), out, progress=False) == 0
    pd.testing.assert_frame_equal(numbers(out / "seed_1"), first)
    assert runner.run(compose([*base, "seeds=4", engine]), out, progress=False) == 0
    s = read_summary(out / "seed_3")
    assert (
        s["status"] == "finished"
        and s["engine"]["engine"] == "vmap"
        and "1 run in" in s["engine"]["source"]
    )
    assert (out / "seed_0" / "summary.json").read_bytes() == kept  # finished runs left alone
