"""Robustness of fedrun: resume to the same numbers, divergence, parallel sweeps, bad input.

Runs go through ``python -m fedprox_cli`` in subprocesses (tiny digits runs), as a user's would.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import conftest
import numpy as np
import pandas as pd
import pytest
import torch
from conftest import child_env, job_folders
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from fedprox_cli import algorithms
from fedprox_cli.algorithms.fedcanon import FedCanon
from fedprox_cli.common.package import CONF_DIR
from fedprox_cli.common.signals import StopAfterRound
from fedprox_cli.config import plugin_defaults
from fedprox_cli.engine import memory, models
from fedprox_cli.engine.client_data import ClientData
from fedprox_cli.engine.oracle import Oracle
from fedprox_cli.runs import checkpoint, experiment, runner

ROOT = Path(__file__).resolve().parent.parent
ENV = child_env()
TINY = ["dataset=digits", "model=mlp", "model.hidden=16", "n=4", "K=2", "B=16", "eval_every=3"]
DIVERGING = "algorithm.beta=1e3"  # a huge local step: NaN by round 3
RUN = TINY + ["T=12", "checkpoint_every=5"]

# Runs fedrun with FedCanon's round patched to send signal SIG to its own process at the
# start of round STOP_T (argv: STOP_T SIG fedrun-args...).
DRIVER = """
import os, sys
from fedprox_cli.cli import main as cli
from fedprox_cli.algorithms.fedcanon import FedCanon
stop_t, sig, fedcanon_round = int(sys.argv[1]), int(sys.argv[2]), FedCanon.round
def round(self, s, env, t):
    if t == stop_t:
        os.kill(os.getpid(), sig)
    return fedcanon_round(self, s, env, t)
FedCanon.round = round
sys.argv = ["fedrun", *sys.argv[3:]]
cli.main()
"""


def fedrun(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return conftest.fedrun(*args, cwd=cwd, env=ENV, timeout=300)


def fedrun_stopped(stop_t: int, sig: int, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", DRIVER, str(stop_t), str(int(sig)), *args],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def metrics(run_dir: Path) -> pd.DataFrame:
    return pd.read_csv(run_dir / "metrics.csv").drop(columns="time_s")


def stderr_lines(p: subprocess.CompletedProcess) -> list[str]:
    return [line for line in p.stderr.splitlines() if line.strip()]


def compose_cfg(*overrides: str, hydra_cfg: bool = False):
    plugin_defaults.store(
        list(overrides)
    )  # a plugin that ships no YAML: its defaults as its config
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=list(overrides), return_hydra_config=hydra_cfg)


# ---- checkpoint / resume ---------------------------------------------------------------


def run_here(out: Path, *overrides: str, stop_at: int | None = None) -> int:
    """``runner.run`` in this process; with ``stop_at``, SIGINT arrives during that round."""
    with pytest.MonkeyPatch.context() as mp:
        if stop_at is not None:
            fedcanon_round = FedCanon.round

            def round(self, s, env, t):
                if t == stop_at:
                    os.kill(os.getpid(), signal.SIGINT)
                return fedcanon_round(self, s, env, t)

            mp.setattr(FedCanon, "round", round)
        return runner.run(compose_cfg(*overrides), out, progress=False)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The uninterrupted run's folder."""
    out = tmp_path_factory.mktemp("reference") / "run"
    assert run_here(out, *RUN) == 0
    return out


def check_checkpoint(out: Path, rounds_done: int) -> None:
    ckpt = checkpoint.load(out / "checkpoint.pt", torch.device("cpu"))
    assert ckpt.round == rounds_done
    assert [r["round"] for r in ckpt.rows] == list(range(0, rounds_done + 1, 3))


@pytest.mark.parametrize(
    "sig, code, status, resume_from, again",
    [
        # finishes round 7, checkpoints, stops; the same command again resumes
        (signal.SIGTERM, 130, "interrupted", 7, "fedrun"),
        # dies at once, leaving the round-5 checkpoint; runner.run resumes (as fedrun does)
        (signal.SIGKILL, -signal.SIGKILL, "running", 5, "runner.run"),
    ],
)
def test_resumed_run_equals_uninterrupted(
    sig, code, status, resume_from, again, reference, tmp_path
):
    out = tmp_path / "run"
    p = fedrun_stopped(6, sig, *RUN, f"hydra.run.dir={out}", cwd=tmp_path)
    assert p.returncode == code, p.stderr
    assert summary(out)["status"] == status
    check_checkpoint(out, resume_from)

    if again == "fedrun":
        p = fedrun(*RUN, f"hydra.run.dir={out}", cwd=tmp_path)
        assert p.returncode == 0, p.stderr
    else:
        assert run_here(out, *RUN) == 0
    assert summary(out)["status"] == "finished"
    pd.testing.assert_frame_equal(metrics(out), metrics(reference), check_exact=True)


def test_ctrl_c_stops_after_the_round_and_resumes(reference, tmp_path):
    out = tmp_path / "run"
    assert run_here(out, *RUN, stop_at=6) == 130
    assert (summary(out)["status"], summary(out)["round"]) == ("interrupted", 7)
    check_checkpoint(out, 7)
    assert run_here(out, *RUN) == 0
    pd.testing.assert_frame_equal(metrics(out), metrics(reference), check_exact=True)


def test_a_second_signal_stops_at_once():
    # the handlers in force before (SIGINT is ignored, not Python's default, in a process started
    # in the background by a non-interactive shell) are the ones restored
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with StopAfterRound() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.requested
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert {s: signal.getsignal(s) for s in before} == before


def test_finished_run_is_a_no_op_and_can_be_extended(reference, tmp_path):
    done = tmp_path / "done"
    shutil.copytree(reference, done)
    p = fedrun(*RUN, f"hydra.run.dir={done}", cwd=tmp_path)
    assert p.returncode == 0 and "already finished" in p.stdout, p.stderr
    assert (done / "metrics.csv").read_text() == (reference / "metrics.csv").read_text()
    assert not (reference / "checkpoint.pt").exists()  # removed at the end by default

    out = tmp_path / "run"
    short = [a for a in RUN if not a.startswith("T=")]
    assert run_here(out, *short, "T=8", "keep_checkpoint=true") == 0
    assert checkpoint.load(out / "checkpoint.pt", torch.device("cpu")).round == 8
    assert run_here(out, *short, "T=12") == 0  # T extended: continues from round 8
    extended = metrics(out)
    # the row at the old T=8 (not a multiple of eval_every) stays; the rest is the T=12 run
    assert list(extended["round"]) == [0, 3, 6, 8, 9, 12]
    pd.testing.assert_frame_equal(
        extended[extended["round"] != 8].reset_index(drop=True),
        metrics(reference),
        check_exact=True,
    )


def test_config_comparison_ignores_only_run_control_keys():
    old = {"T": 10, "algorithm": {"alpha": 0.1}, "oracle": {"chunk": 4}, "resume": True}
    new = {"T": 20, "algorithm": {"alpha": 0.2}, "oracle": {"chunk": "auto"}, "resume": False}
    assert checkpoint.differences(old, new) == ["algorithm.alpha: 0.1 -> 0.2"]
    assert checkpoint.differences(old, {**old, "extra": 1}) == ["extra: (unset) -> 1"]


@pytest.mark.parametrize("name", algorithms.names())
def test_algorithms_leave_global_random_generators_alone(name):
    """What makes checkpoints RNG-free: all randomness comes from generators keyed by
    (seed, round, step), never from torch's, numpy's or Python's global generators."""
    alg = algorithms.build(name)
    overrides = [*TINY, f"algorithm={name}", "regularizer=none"]
    if alg.partial_participation:
        overrides.append("participation=0.5")
    exp = experiment.build(compose_cfg(*overrides))
    state = exp.alg.init(exp.flat.flat(), exp.cfg.n)
    before = torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate()
    for t in range(2):
        exp.env.start_round(t)
        state = exp.alg.round(state, exp.env, t)
    assert torch.equal(torch.get_rng_state(), before[0])
    assert np.array_equal(np.random.get_state()[1], before[1])
    assert random.getstate() == before[2]


# ---- divergence and parallel sweeps --------------------------------------------------


def test_divergence_stops_with_status_and_one_line(tmp_path):
    out = tmp_path / "run"
    p = fedrun(*TINY, "T=9", DIVERGING, f"hydra.run.dir={out}", cwd=tmp_path)
    assert p.returncode == 1
    lines = stderr_lines(p)
    assert len(lines) == 1 and lines[0].startswith("fedrun: diverged:"), p.stderr
    assert summary(out)["status"] == "diverged"
    m = metrics(out)
    assert list(m["round"]) == [0, 3] and not np.isfinite(m["objective"].iloc[-1])
    assert (out / "metrics.png").exists()  # drawn up to the divergence


@pytest.fixture(scope="module")
def parallel_sweep(tmp_path_factory):
    """Four jobs, two at a time in joblib worker processes; the last one diverges."""
    tmp = tmp_path_factory.mktemp("sweep")
    p = fedrun(
        "-m",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        *TINY,
        "T=6",
        "algorithm.beta=0.01,0.02,0.03,1e3",
        f"hydra.sweep.dir={tmp / 'sweep'}",
        cwd=tmp,
    )
    return p, tmp / "sweep"


def test_parallel_sweep_writes_four_complete_run_folders(parallel_sweep):
    p, sweep = parallel_sweep
    jobs = job_folders(sweep)
    assert sorted(d for d in sweep.iterdir() if d.is_dir() and d.name != ".fedrun") == sorted(jobs)
    for d in jobs:  # named by config
        assert f"algorithm.beta={OmegaConf.load(d / 'config.yaml').algorithm.beta}," in d.name
    for d in jobs:
        for f in ("config.yaml", "partition.npz", "metrics.csv", "summary.json"):
            assert (d / f).is_file(), f"{d / f} missing"
        # no checkpoint is kept after the end (keep_checkpoint=false); the diverged job is
        # drawn up to its divergence
        assert not (d / "checkpoint.pt").exists()
        assert (d / "metrics.png").is_file()
        assert not list(d.glob(".*tmp*")), "a temporary file was left behind"
    assert [OmegaConf.load(d / "config.yaml").algorithm.beta for d in jobs] == [
        0.01,
        0.02,
        0.03,
        1e3,
    ]
    assert [len(metrics(d)) for d in jobs] == [3, 3, 3, 2]  # rounds 0, 3, 6; diverged at 3


def test_parallel_sweep_reports_the_diverged_job(parallel_sweep):
    p, sweep = parallel_sweep
    jobs = job_folders(sweep)
    assert [summary(j)["status"] for j in jobs] == ["finished"] * 3 + ["diverged"]
    assert p.returncode == 1, p.stderr
    assert f"sweep: 3 of 4 jobs finished in {sweep}" in p.stdout
    assert f"  {jobs[3].name}: diverged (objective is nan after round 3)" in p.stderr


def test_run_folders_differ_by_process_id():
    """Two fedrun processes started in the same microsecond get different run folders."""
    cfg = compose_cfg("dataset=digits", hydra_cfg=True)
    pid = str(os.getpid())
    assert f"_{pid}_" in cfg.hydra.run.dir and cfg.hydra.sweep.dir.endswith(f"_{pid}")


# ---- memory plan --------------------------------------------------------------------


def test_activation_size_counts_every_layer_output():
    mlp = models.build("mlp", (1, 8, 8), 10, hidden=20)
    # flatten 64, then 20, relu 20, 20, relu 20, 10 logits
    assert memory.activation_size(mlp, (1, 8, 8), torch.float32, torch.device("cpu")) == 154


def test_auto_chunk_is_the_largest_that_fits_the_budget():
    fp = memory.Footprint(per_client=1000, per_sample=100)
    gb = 2**30
    # one client with 10 samples: 2000 bytes
    assert memory.plan(fp, 50, 10, "auto", 64, 7000 / gb) == (3, 64)
    assert memory.plan(fp, 50, 10, "auto", 64, 1 / gb) == (1, 64)  # at least one client
    assert memory.plan(fp, 50, 10, "auto", 64, 1.0) == (50, 64)  # at most n
    assert memory.plan(fp, 50, 10, None, "auto", 6000 / gb) == (50, 50)
    assert memory.plan(fp, 50, 10, 7, 64, 1 / gb) == (7, 64)  # a number is kept


def test_chunked_vmap_gives_the_same_gradients():
    torch.manual_seed(0)
    n, N = 6, 60
    x, y = torch.randn(N, 1, 8, 8), torch.randint(0, 10, (N,))
    clients = np.array_split(np.arange(N), n)
    mlp = models.FlatModel(models.build("mlp", (1, 8, 8), 10, hidden=20))
    fp = memory.footprint(mlp.module, mlp.d, (1, 8, 8), torch.float32, torch.device("cpu"))
    chunk, _ = memory.plan(fp, n, 5, "auto", 64, 2.5 * fp.call_bytes(1, 5) / 2**30)
    assert chunk == 2
    X = mlp.flat().expand(n, -1) + 0.01 * torch.randn(n, mlp.d)
    G = [
        Oracle(mlp, ClientData.build(x, y, clients, "cpu"), 5, 0, "vmap", c).grad(X, 0, 0)[0]
        for c in (chunk, n)
    ]
    torch.testing.assert_close(G[0], G[1])


# ---- bad input ------------------------------------------------------------------------


def _truncated_fmnist(tmp: Path) -> Path:
    """A data.root with Fashion-MNIST's four IDX files in torchvision's layout, the training
    images cut short of what their header says."""
    raw = tmp / "fmnist" / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    for name, shape, body in (
        ("train-images-idx3-ubyte", (20, 28, 28), 100),
        ("train-labels-idx1-ubyte", (20,), 20),
        ("t10k-images-idx3-ubyte", (10, 28, 28), 7840),
        ("t10k-labels-idx1-ubyte", (10,), 10),
    ):
        header = bytes([0, 0, 8, len(shape)]) + b"".join(n.to_bytes(4, "big") for n in shape)
        (raw / name).write_bytes(header + bytes(body))
    return tmp / "fmnist"


# name: (extra arguments, a phrase of the error line)
BAD_INPUTS = {
    "rounds T=0": (["T=0"], "T must be a positive integer"),
    "too many clients": (["n=5000"], "exceeds the 1437 training samples"),
    "batch size not a number": (["B=big"], "B must be a positive integer or 'full'"),
    "unsupported dtype": (["dtype=float16"], "dtype must be one of"),
    "unknown device": (["device=tpu"], "device must be auto, cpu or cuda"),
    "negative checkpoint_every": (["checkpoint_every=-1"], "checkpoint_every must be"),
    "keep_checkpoint not a boolean": (
        ["keep_checkpoint=maybe"],
        "keep_checkpoint must be true or false",
    ),
    "oracle.chunk=0": (["oracle.chunk=0"], "oracle.chunk must be"),
    "metrics.train_samples=0": (["metrics.train_samples=0"], "metrics.train_samples must be"),
    "negative step size": (["algorithm.alpha=-0.1"], "must be > 0"),
    "unknown algorithm parameter": (["+algorithm.gamma=1"], "has no parameter gamma"),
    "fedavg with a regularizer": (["algorithm=fedavg"], "defined for h = 0 only"),
    "unknown group option": (["algorithm=nope"], "unknown algorithm 'nope'; the options: "),
    "unknown key": (["nonsense=1"], "Could not override 'nonsense'"),
    "malformed override": (["K=[1"], "fedrun: error:"),
    "truncated IDX file": (["dataset=fmnist", "data.root={truncated}"], "is truncated"),
    "unwritable output folder": (["hydra.run.dir={file}/run"], "Not a directory"),
    "checkpoint of another config": (
        ["algorithm.beta=0.03", "hydra.run.dir={prior}"],
        "holds a run of a different config (algorithm.beta: 0.02 -> 0.03)",
    ),
    "T below the rounds done": (["T=2", "hydra.run.dir={prior}"], "T may only be extended"),
    "corrupt checkpoint": (["hydra.run.dir={corrupt_ckpt}"], "cannot read checkpoint"),
}


@pytest.fixture(scope="module")
def bad_runs(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("bad")
    prior = tmp / "prior"  # an interrupted run (checkpoint after round 4) to re-run into
    assert run_here(prior, *TINY, "T=9", "checkpoint_every=2", stop_at=3) == 130
    (tmp / "file").write_text("a file, not a folder")
    places = {"truncated": _truncated_fmnist(tmp), "file": tmp / "file"}

    def run(case):
        name, (extra, _) = case
        work = tmp / re.sub(r"\W", "_", name)
        work.mkdir()
        where = {**places, "prior": work / "run", "corrupt_ckpt": work / "run"}
        if "prior" in str(extra) or "corrupt_ckpt" in str(extra):
            shutil.copytree(prior, work / "run")
        if "corrupt_ckpt" in str(extra):
            ck = work / "run" / "checkpoint.pt"
            ck.write_bytes(ck.read_bytes()[:100])
        args = [a.format(**where) for a in extra]
        if not any(a.startswith("hydra.run.dir=") for a in args):
            args.append(f"hydra.run.dir={work / 'run'}")
        return name, (fedrun(*TINY, *args, cwd=work), work / "run")

    return dict(map(run, BAD_INPUTS.items()))  # in this process, one after another


@pytest.mark.parametrize("name", BAD_INPUTS)
def test_bad_input_gets_one_line_and_no_finished_folder(name, bad_runs):
    p, out = bad_runs[name]
    lines = stderr_lines(p)
    assert p.returncode == 2, p.stderr
    assert len(lines) == 1 and lines[0].startswith("fedrun: error: "), p.stderr
    assert BAD_INPUTS[name][1] in lines[0]
    assert "Traceback" not in p.stdout + p.stderr
    if (out / "summary.json").exists():
        assert summary(out)["status"] != "finished"
