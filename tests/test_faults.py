"""The fault contract (docs/robustness.md, "Faults and exit codes"), as a user meets it from the command line.

One table of faults across the six classes of the contract -- config keys and values, data on
disk, the file system, internal errors, sweeps, status truth -- each run as a real ``fedrun``
subprocess and held to the same promises: the documented exit code (never 1 unless the run
diverged), at most three non-empty stderr lines, no traceback on the screen, a status that is
not ``running`` once the process is gone, nothing already written lost (a prior run's four
files byte for byte) and no temp file left behind. The sweep and liveness classes, which need
more than one process, have their own tests below the table.
"""

from __future__ import annotations

import errno
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import conftest
import pytest
import torch
from conftest import child_env, job_folders, processes_of_session
from data_fixtures import a9a_files, leaf_files, mnist_files, write_idx

from fedprox_cli.common.run_files import read_summary
from fedprox_cli.runs import checkpoint, view

ROOT = Path(__file__).resolve().parent.parent
ENV = child_env(OMP_NUM_THREADS="1")
DIGITS = ["dataset=digits", "model=linear", "n=4", "K=2", "B=16", "T=2", "eval_every=1"]
MNIST = [
    "dataset=mnist",
    "data.root={mnist}",
    "partition=iid",
    "model=linear",
    "n=2",
    "K=2",
    "B=4",
    "T=2",
    "eval_every=1",
    "keep_checkpoint=true",
]
RUN_FILES = ("config.yaml", "metrics.csv", "metrics.png", "summary.json")

# fedrun with FedCanon's round raising an unexpected exception at round 1 (a bug)
BUGGY = """
import sys
from fedprox_cli.cli import main as cli
from fedprox_cli.algorithms.fedcanon import FedCanon
def round(self, s, env, t):
    if t == 1:
        raise RuntimeError("an unexpected bug")
    return FedCanon.__dict__["_round"](self, s, env, t)
FedCanon._round, FedCanon.round = FedCanon.round, round
sys.argv = ["fedrun", *sys.argv[1:]]
cli.main()
"""


def fedrun(
    *args, cwd: Path, env=None, fsize: int | None = None, driver: str | None = None, timeout=300
) -> subprocess.CompletedProcess:
    """fedrun in this process (:func:`conftest.fedrun`), or in a subprocess for a file-size
    limit or a ``driver`` script that patches the package."""
    if fsize is None and driver is None:
        return conftest.fedrun(*args, cwd=cwd, env={**ENV, **(env or {})}, timeout=timeout)
    cmd = [sys.executable, "-c", driver] if driver else [sys.executable, "-m", "fedprox_cli"]

    def limit():
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run(
        [*cmd, *args],
        cwd=cwd,
        env={**ENV, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=limit,
    )


def stderr_lines(p) -> list[str]:
    """stderr's lines but progress lines (a run that fails mid-way has printed some)."""
    progress = re.compile(r"^fedrun: (job \d+: )?round \d+/\d+, ")
    return [line for line in p.stderr.splitlines() if line.strip() and not progress.match(line)]


def temp_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if ".tmp" in p.name]


# ---- data on disk ----------------------------------------------------------------------


def cut_gz(root: Path) -> None:
    f = root / "MNIST" / "raw" / "train-images-idx3-ubyte.gz"
    f.write_bytes(f.read_bytes()[:60])


def html_gz(root: Path) -> None:
    (root / "MNIST" / "raw" / "train-images-idx3-ubyte.gz").write_text(
        "<!DOCTYPE html><html><body>Please sign in to download</body></html>"
    )


def wrong_magic(root: Path) -> None:
    f = root / "MNIST" / "raw" / "t10k-images-idx3-ubyte"
    f.write_bytes(b"\x1f\x8b" + f.read_bytes()[2:])


def too_long(root: Path) -> None:
    f = root / "MNIST" / "raw" / "t10k-images-idx3-ubyte"
    f.write_bytes(f.read_bytes() + bytes(100))


def bad_label(root: Path) -> None:
    import numpy as np

    write_idx(root / "MNIST" / "raw" / "t10k-labels-idx1-ubyte.gz", np.full(10, 12))


def leaf_shard(root: Path) -> Path:
    return sorted((root / "femnist" / "data" / "train").glob("*.json"))[0]


@dataclass
class Case:
    cls: str  # the contract's fault class
    args: list[str]  # fedrun's arguments ({mnist}, {run}, {femnist}, ... filled in)
    code: int  # the documented exit code
    phrase: str  # a phrase of the stderr line(s)
    prior: bool = False  # run into a copy of a finished run; its files must not change
    prep: object = None  # prep(data root) corrupts a fresh data copy before the run
    data: str = "mnist"  # which fixture the data root holds
    fsize: int | None = None  # RLIMIT_FSIZE in bytes
    driver: str | None = None
    needs: str = ""  # a skip reason unless this holds (see _unavailable)
    extra: dict = field(default_factory=dict)


CASES = {
    # 1. config keys and values
    "+unknown top-level key": Case("config", DIGITS + ["+nonsense=1"], 2, "unknown key 'nonsense'"),
    "++unknown top-level key": Case(
        "config", DIGITS + ["++nonsense=1"], 2, "unknown key 'nonsense'"
    ),
    "+unknown oracle key": Case(
        "config",
        DIGITS + ["+oracle.chunks=4"],
        2,
        "unknown key 'oracle.chunks': fedrun has no such setting (see fedrun --help); "
        "did you mean oracle.chunk?",
    ),
    "+misspelt model parameter": Case(
        "config",
        DIGITS + ["model=mlp", "+model.hiden=100"],
        2,
        "model mlp has no parameter hiden (it takes: hidden, init; `fedrun --help` lists the "
        "settings); did you mean model.hidden?",
    ),
    "+misspelt partition parameter": Case(
        "config", DIGITS + ["+partition.alpah=0.1"], 2, "partition dirichlet has no parameter alpah"
    ),
    "+unknown algorithm parameter": Case(
        "config", DIGITS + ["+algorithm.gamma=1"], 2, "algorithm fedcanon has no parameter gamma"
    ),
    "zero-width model": Case(
        "config",
        DIGITS + ["model=mlp", "model.hidden=0"],
        2,
        "model.hidden must be a positive integer, got 0",
    ),
    "negative width": Case(
        "config", DIGITS + ["model=mlp", "model.hidden=-5"], 2, "model.hidden must be"
    ),
    "width not a number": Case(
        "config", DIGITS + ["model=mlp", "model.hidden=abc"], 2, "model.hidden must be"
    ),
    "stationarity step not a number": Case(
        "config", DIGITS + ["metrics.stationarity_step=abc"], 2, "metrics.stationarity_step must be"
    ),
    "stationarity step 0": Case(
        "config", DIGITS + ["metrics.stationarity_step=0"], 2, "metrics.stationarity_step must be"
    ),
    "infinite memory budget": Case(
        "config", DIGITS + ["oracle.memory_gb=inf"], 2, "oracle.memory_gb must be a finite number"
    ),
    "NaN memory budget": Case(
        "config", DIGITS + ["oracle.memory_gb=nan"], 2, "oracle.memory_gb must be"
    ),
    "NaN rounds": Case("config", DIGITS + ["T=nan"], 2, "T must be"),
    "NaN Dirichlet alpha": Case(
        "config", DIGITS + ["partition.alpha=nan"], 2, "partition.alpha must be"
    ),
    "infinite l1 weight": Case(
        "config", DIGITS + ["regularizer.lam=inf"], 2, "regularizer.lam must be"
    ),
    "step size not a number": Case(
        "config", DIGITS + ["algorithm.alpha=abc"], 2, "algorithm.alpha must be"
    ),
    "keep_checkpoint without checkpoints": Case(
        "config",
        DIGITS + ["keep_checkpoint=true", "checkpoint_every=0"],
        2,
        "keeps nothing with checkpoint_every=0",
    ),
    "deleted key ~T": Case("config", DIGITS + ["~T"], 2, "T cannot be deleted"),
    "deleted group ~algorithm": Case(
        "config", DIGITS + ["~algorithm"], 2, "algorithm cannot be deleted"
    ),
    "negative seed": Case("config", DIGITS + ["seed=-1"], 2, "seed must be"),
    "eval_every -1": Case("config", DIGITS + ["eval_every=-1"], 2, "eval_every must be"),
    "participation above 1": Case(
        "config", DIGITS + ["participation=1.5"], 2, "participation must be"
    ),
    "unknown init": Case("config", DIGITS + ["model.init=random"], 2, "model.init must be"),
    "min_size 0": Case(
        "config", DIGITS + ["partition.min_size=0"], 2, "partition.min_size must be"
    ),
    "top-k ratio above 1": Case(
        "config", DIGITS + ["algorithm=fedcef", "compressor=topk", "compressor.ratio=2"], 2, "ratio"
    ),
    "empty hydra.run.dir": Case("config", DIGITS + ["hydra.run.dir="], 2, "hydra.run.dir is empty"),
    "malformed override": Case("config", DIGITS + ["K=[1"], 2, "fedrun: error:"),
    # ... values that only fail once resolved or allocated: refused by the validation, as by the dry run
    "seed 2**64": Case(
        "config", DIGITS + ["seed=18446744073709551616"], 2, "seed must lie within +-2**63"
    ),
    "B of 10**12": Case("config", DIGITS + ["B=1000000000000"], 2, "the run needs at least"),
    "width of 10**9": Case(
        "config", DIGITS + ["model=mlp", "model.hidden=1000000000"], 2, "the run needs at least"
    ),
    "calc dividing by 0": Case(
        "config",
        DIGITS + ["algorithm.alpha=${{calc:1/0}}"],
        2,
        "cannot resolve algorithm.alpha: calc: division by zero",
    ),
    "calc overflowing": Case(
        "config", DIGITS + ["algorithm.alpha=${{calc:10**400}}"], 2, "the result is too large"
    ),
    "calc power tower": Case(
        "config", DIGITS + ["algorithm.alpha=${{calc:9**9**9**9}}"], 2, "is outside |base|"
    ),
    "calc beyond int64": Case(
        "config", DIGITS + ["T=${{calc:2**70}}"], 2, "T must be a positive integer"
    ),
    "unset environment variable": Case(
        "config",
        DIGITS + ["algorithm.alpha=${{oc.env:FEDRUN_UNSET_VAR}}"],
        2,
        "cannot resolve algorithm.alpha",
    ),
    "K=0 with a step 1/K": Case(
        "config",
        ["experiment=fednmap_fig2_quick", "dataset=digits", "K=0", "T=1"],
        2,
        "K must be a positive integer, got 0",
    ),
    # ... against a finished run, whose four files must stay byte for byte
    "config change of a finished run": Case(
        "config",
        MNIST + ["algorithm.beta=0.03"],
        2,
        "holds a run of a different config",
        prior=True,
    ),
    "bad value against a finished run": Case(
        "config", MNIST + ["T=4", "model.init=random"], 2, "model.init must be", prior=True
    ),
    "T below the rounds done": Case(
        "config", MNIST + ["T=1"], 2, "T may only be extended", prior=True
    ),
    "checkpoint of another run": Case(
        "data",
        MNIST + ["T=4"],
        2,
        "is a checkpoint of another run",
        prior=True,
        extra={"swap_checkpoint": True},
    ),
    # 2. data on disk
    "extending T with a corrupt dataset": Case(
        "data", MNIST + ["T=4"], 2, "cannot be read", prior=True, prep=cut_gz
    ),
    "gz cut short": Case(
        "data", MNIST, 2, "train-images-idx3-ubyte.gz cannot be read", prep=cut_gz
    ),
    "HTML page saved as .gz": Case(
        "data", MNIST, 2, "train-images-idx3-ubyte.gz cannot be read", prep=html_gz
    ),
    "IDX with a wrong magic": Case("data", MNIST, 2, "wrong magic number", prep=wrong_magic),
    "IDX longer than its header": Case("data", MNIST, 2, "is too long", prep=too_long),
    "label out of range": Case("data", MNIST, 2, "test labels must lie in 0..9", prep=bad_label),
    "data.root is a file": Case(
        "data",
        DIGITS[:1] + ["dataset=mnist", "data.root={file}"] + DIGITS[1:],
        2,
        "is a file, not a folder",
    ),
    "malformed LEAF JSON": Case(
        "data",
        [
            "dataset=femnist",
            "data.root={data}",
            "partition=iid",
            "n=2",
            "model=linear",
            "T=1",
            "B=2",
        ],
        2,
        "cannot be read",
        data="leaf",
        prep=lambda r: leaf_shard(r).write_text("{not json"),
    ),
    "truncated LEAF JSON": Case(
        "data",
        [
            "dataset=femnist",
            "data.root={data}",
            "partition=iid",
            "n=2",
            "model=linear",
            "T=1",
            "B=2",
        ],
        2,
        "cannot be read",
        data="leaf",
        prep=lambda r: leaf_shard(r).write_text(leaf_shard(r).read_text()[:200]),
    ),
    "LEAF JSON without users": Case(
        "data",
        [
            "dataset=femnist",
            "data.root={data}",
            "partition=iid",
            "n=2",
            "model=linear",
            "T=1",
            "B=2",
        ],
        2,
        "no 'users'",
        data="leaf",
        prep=lambda r: leaf_shard(r).write_text('{"user_data": {}}'),
    ),
    "truncated decoded cache is rebuilt": Case(
        "data",
        [
            "dataset=femnist",
            "data.root={data}",
            "partition=iid",
            "n=2",
            "model=linear",
            "T=1",
            "B=2",
        ],
        0,
        "rebuilding it from the source files",
        data="leaf_cached",
        prep=lambda r: (r / "femnist/data/fedprox_float32.pt").write_bytes(
            (r / "femnist/data/fedprox_float32.pt").read_bytes()[:300]
        ),
    ),
    "a9a that is not LIBSVM text": Case(
        "data",
        ["dataset=a9a", "data.root={data}", "n=2", "model=linear", "T=1"],
        2,
        "a9a",
        data="a9a",
        prep=lambda r: (r / "a9a").write_text("<html>\n"),
    ),
    # 3. the file system
    "file-size limit at the checkpoint": Case(
        "fs", DIGITS + ["model=mlp", "checkpoint_every=1"], 2, "File too large", fsize=120_000
    ),
    "output folder under a file": Case(
        "fs", DIGITS + ["hydra.run.dir={file}/run"], 2, "Not a directory"
    ),
    "immutable output folder": Case(
        "fs", DIGITS + ["hydra.run.dir={immutable}"], 2, "not permitted", needs="chattr"
    ),
    "path with spaces": Case("fs", DIGITS + ["hydra.run.dir={work}/my run dir"], 0, ""),
    "non-ASCII path": Case("fs", DIGITS + ["hydra.run.dir={work}/résultats_δ"], 0, ""),
    # 4. an internal error (a bug)
    "exception inside a round": Case(
        "internal",
        DIGITS + ["T=3"],
        3,
        "internal error: RuntimeError: an unexpected bug; traceback in",
        driver=BUGGY,
    ),
}


def _unavailable(needs: str, tmp: Path) -> str:
    if needs == "chattr":
        probe = tmp / "chattr_probe"
        probe.mkdir()
        ok = (
            subprocess.run(["chattr", "+i", str(probe)], capture_output=True).returncode == 0
            if shutil.which("chattr")
            else False
        )
        if ok:
            subprocess.run(["chattr", "-i", str(probe)])
            return ""
        return "chattr +i is not available here"
    return ""


def _data(kind: str, root: Path, base: Path) -> Path:
    root.mkdir(parents=True)
    if kind == "mnist":
        mnist_files(root)
    elif kind in ("leaf", "leaf_cached"):
        leaf_files(root)
        if kind == "leaf_cached":  # build the decoded cache once, as a first run would
            p = fedrun(
                "dataset=femnist",
                f"data.root={root}",
                "partition=iid",
                "n=2",
                "model=linear",
                "T=1",
                "B=2",
                f"hydra.run.dir={root}/first",
                cwd=base,
            )
            assert p.returncode == 0, p.stderr
    elif kind == "a9a":
        a9a_files(root)
    return root


@pytest.fixture(scope="module")
def faults(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("faults")
    mnist = _data("mnist", tmp / "mnist", tmp)
    prior = tmp / "prior"  # a finished run (checkpoint kept) and a finished run of another seed
    for folder, seed in ((prior, 0), (tmp / "other", 1)):
        p = fedrun(
            *[a.format(mnist=mnist) for a in MNIST],
            f"seed={seed}",
            f"hydra.run.dir={folder}",
            cwd=tmp,
        )
        assert p.returncode == 0, p.stderr
    (tmp / "file").write_text("a file, not a folder")

    def run(item):
        name, case = item
        work = tmp / re.sub(r"\W", "_", name)
        work.mkdir()
        skip = _unavailable(case.needs, work)
        if skip:
            return name, (skip, None, work)
        data = _data(case.data, work / "data", work)
        run_dir = work / "run"
        if case.prior:
            shutil.copytree(prior, run_dir)
            shutil.copytree(mnist, data, dirs_exist_ok=True)
            if case.extra.get("swap_checkpoint"):
                shutil.copy(tmp / "other" / "checkpoint.pt", run_dir / "checkpoint.pt")
        if case.prep:
            case.prep(data)
        immutable = work / "immutable"
        if case.needs == "chattr":
            immutable.mkdir()
            subprocess.run(["chattr", "+i", str(immutable)], check=True)
        before = {f: (run_dir / f).read_bytes() for f in RUN_FILES} if case.prior else {}
        places = {
            "mnist": data if case.data == "mnist" else mnist,
            "data": data,
            "file": tmp / "file",
            "work": work,
            "immutable": immutable,
        }
        args = [a.format(**places) for a in case.args]
        if not any(a.startswith("hydra.run.dir=") for a in args):
            args.append(f"hydra.run.dir={run_dir}")
        p = fedrun(*args, cwd=work, fsize=case.fsize, driver=case.driver)
        if case.needs == "chattr":
            subprocess.run(["chattr", "-i", str(immutable)])
        return name, (p, before, work)

    return dict(map(run, CASES.items()))  # one after another, most in this process


def test_the_table_covers_every_class_with_at_least_40_faults():
    classes = {c.cls for c in CASES.values()}
    assert classes == {"config", "data", "fs", "internal"} and len(CASES) >= 40
    # sweeps and status truth: the tests below the table


@pytest.mark.parametrize("name", CASES)
def test_fault(name, faults):
    case = CASES[name]
    p, before, work = faults[name]
    if isinstance(p, str):
        pytest.skip(p)
    lines = stderr_lines(p)
    assert p.returncode == case.code, (p.returncode, p.stderr)
    assert len(lines) <= 3, p.stderr
    assert "Traceback" not in p.stdout + p.stderr
    assert case.phrase in p.stderr, p.stderr
    if case.code == 2:
        assert lines[0].startswith("fedrun: error: "), p.stderr
    for summary in work.rglob("summary.json"):  # a finished process leaves no "running"
        assert view.status(summary.parent) not in ("running", "dead"), summary
        if case.code:
            assert read_summary(summary.parent)["status"] != "finished" or before
    for f, content in before.items():
        assert (work / "run" / f).read_bytes() == content, f"{f} of the finished run changed"
    assert not temp_files(work), temp_files(work)


RESOLVED = [
    "seed 2**64",
    "B of 10**12",
    "width of 10**9",
    "calc dividing by 0",
    "calc overflowing",
    "calc power tower",
    "calc beyond int64",
    "unset environment variable",
    "K=0 with a step 1/K",
]


@pytest.mark.parametrize("name", RESOLVED)
def test_the_dry_run_refuses_what_the_run_refuses(name, tmp_path):
    """experiment.validate resolves the whole config and checks sizes for both: same line, same code."""
    case = CASES[name]
    p = fedrun(
        *[a.format() for a in case.args],
        "dry_run=true",
        f"hydra.run.dir={tmp_path}/run",
        cwd=tmp_path,
        timeout=60,
    )
    assert p.returncode == case.code and case.phrase in p.stderr, (p.returncode, p.stderr)
    assert len(stderr_lines(p)) == 1 and not (tmp_path / "run").exists()


def test_an_internal_error_keeps_its_traceback_in_the_run_folder(faults):
    p, _, work = faults["exception inside a round"]
    run = work / "run"
    assert "RuntimeError: an unexpected bug" in (run / "error.log").read_text()
    s = read_summary(run)
    assert (s["status"], s["exit_code"]) == ("error", 3) and "internal error" in s["error"]
    assert "internal error" in (run / "fedrun.log").read_text()


def test_fedrun_debug_prints_the_traceback(tmp_path):
    p = fedrun(
        *DIGITS,
        "T=3",
        f"hydra.run.dir={tmp_path / 'run'}",
        cwd=tmp_path,
        driver=BUGGY,
        env={"FEDRUN_DEBUG": "1"},
    )
    assert p.returncode != 0 and "Traceback" in p.stderr and "an unexpected bug" in p.stderr


def test_a_file_size_limit_leaves_status_error_naming_the_file(faults):
    p, _, work = faults["file-size limit at the checkpoint"]
    s = read_summary(work / "run")
    assert (
        s["status"] == "error" and "checkpoint.pt" in s["error"] and "File too large" in s["error"]
    )


def test_odd_paths_hold_complete_runs(faults):
    for name, folder in (("path with spaces", "my run dir"), ("non-ASCII path", "résultats_δ")):
        work = faults[name][2]
        assert read_summary(work / folder)["status"] == "finished"
        assert (work / folder / "metrics.csv").exists()


def test_a_corrupt_cache_is_rebuilt_and_the_copy_recorded(faults):
    work = faults["truncated decoded cache is rebuilt"][2]
    s = read_summary(work / "run")
    assert s["status"] == "finished" and s["data_source"].endswith("femnist/data")


# ---- 5. sweeps ---------------------------------------------------------------------------


def test_a_sweep_with_a_bad_job_is_refused_before_any_job_runs(tmp_path):
    p = fedrun(
        "-m",
        *DIGITS,
        "model=mlp",
        "model.hidden=8,-5,16",
        f"hydra.sweep.dir={tmp_path / 's'}",
        cwd=tmp_path,
    )
    assert p.returncode == 2, p.stderr
    assert p.stderr.splitlines()[0].startswith("fedrun: error: job 1 (") and p.stderr.splitlines()[
        0
    ].endswith("model.hidden must be a positive integer, got -5")
    assert not (tmp_path / "s").exists() and "Traceback" not in p.stderr


def test_a_job_failing_at_run_time_leaves_the_other_jobs_and_the_report(tmp_path):
    base = [a for a in DIGITS if not a.startswith("n=")]
    p = fedrun(
        "-m", *base, "n=4,5000,5", f"hydra.sweep.dir={tmp_path}", cwd=tmp_path
    )  # 5000: > samples
    assert p.returncode == 2, p.stderr
    assert "sweep: 2 of 3 jobs finished" in p.stdout
    jobs = job_folders(tmp_path)
    assert (
        f"  {jobs[1].name}: error (n = 5000 clients exceeds the 1437 training samples of digits)"
        in p.stderr
    )
    assert [read_summary(j)["status"] for j in jobs] == ["finished", "error", "finished"]
    assert "Traceback" not in p.stderr


def test_a_sweep_with_an_internal_error_still_reports(tmp_path):
    p = fedrun(
        "-m", *DIGITS, "T=3", "seed=0,1", f"hydra.sweep.dir={tmp_path}", cwd=tmp_path, driver=BUGGY
    )
    assert p.returncode == 3, p.stderr
    assert "sweep: 0 of 2 jobs finished" in p.stdout and p.stderr.count("internal error") >= 2


def test_the_report_counts_jobs_that_never_started(tmp_path):
    stop = BUGGY.replace('raise RuntimeError("an unexpected bug")', "raise KeyboardInterrupt")
    p = fedrun(
        "-m", *DIGITS, "T=3", "seed=0,1,2", f"hydra.sweep.dir={tmp_path}", cwd=tmp_path, driver=stop
    )
    assert p.returncode == 130, p.stderr
    assert "sweep: 0 of 3 jobs finished" in p.stdout
    jobs = job_folders(tmp_path)
    assert f"  {jobs[0].name}: interrupted" in p.stderr
    assert (
        f"  {jobs[1].name}: not started" in p.stderr
        and f"  {jobs[2].name}: not started" in p.stderr
    )


# ---- 6. status truth, one writer per folder ---------------------------------------------


def _start(tmp: Path, *args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "fedprox_cli", *args],
        cwd=tmp,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_running(run: Path, timeout=120, also="metrics.csv") -> None:
    end = time.time() + timeout
    while time.time() < end:
        if (run / "summary.json").exists() and (run / also).exists():
            return
        time.sleep(0.2)
    raise AssertionError(f"{run} did not start")


LONG = [
    "dataset=digits",
    "model=mlp",
    "n=4",
    "K=2",
    "B=16",
    "T=100000",
    "eval_every=50",
    "checkpoint_every=50",
]


def test_a_killed_run_reads_dead_and_resumes(tmp_path):
    run = tmp_path / "run"
    proc = _start(tmp_path, *LONG, f"hydra.run.dir={run}")
    _wait_running(run, also="checkpoint.pt")
    assert view.status(run) == "running"
    s = read_summary(run)
    assert s["pid"] == proc.pid and s["host"] and s["heartbeat"]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert read_summary(run)["status"] == "running"  # what the file says ...
    assert view.status(run) == "dead"  # ... and the truth
    done = checkpoint.load(run / "checkpoint.pt", torch.device("cpu")).round
    p = fedrun(*LONG, f"T={done + 1}", f"hydra.run.dir={run}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert read_summary(run)["status"] == "finished" and read_summary(run)["round"] == done + 1


def test_a_second_run_into_a_busy_folder_is_refused(tmp_path):
    run = tmp_path / "run"  # LONG's T: the first run is still training when SIGINT comes
    first = _start(tmp_path, *LONG, f"hydra.run.dir={run}")
    _wait_running(run)
    second = fedrun(*LONG, "T=50", f"hydra.run.dir={run}", cwd=tmp_path)
    first.send_signal(signal.SIGINT)
    first.wait(timeout=120)
    assert second.returncode == 2
    assert stderr_lines(second) == [stderr_lines(second)[0]]
    assert f"is in use by pid {first.pid} on host" in second.stderr
    s = read_summary(run)
    assert s["status"] == "interrupted" and s["T"] == 100000 and s["pid"] == first.pid
    assert "T: 100000" in (run / "config.yaml").read_text()


def test_a_foreign_folder_is_refused_and_left_alone(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "metrics.csv").write_text("my,own\n1,2\n")
    (mine / "config.yaml").write_text("mine: true\n")
    p = fedrun(*DIGITS, f"hydra.run.dir={mine}", cwd=tmp_path)
    assert p.returncode == 2 and "holds files that are not a fedrun run" in p.stderr
    assert sorted(f.name for f in mine.iterdir()) == ["config.yaml", "metrics.csv"]
    assert (mine / "metrics.csv").read_text() == "my,own\n1,2\n"


def test_two_preset_sweeps_in_the_same_second_get_two_folders(tmp_path):
    args = [
        "-m",
        "experiment=fednmap_fig4_quick",
        "dataset=digits",
        "T=1",
        "hydra.sweeper.params.K=2",
        "hydra.sweeper.params.n=4",
    ]
    a, b = (_start(tmp_path, *args, f"hydra.sweeper.params.seed={s}") for s in (0, 1))
    outs = [proc.communicate(timeout=300) for proc in (a, b)]
    assert a.returncode == 0 and b.returncode == 0, outs
    sweeps = sorted((tmp_path / "results" / "sweeps" / "fednmap_fig4_quick").iterdir())
    assert len(sweeps) == 2
    for sweep in sweeps:
        jobs = [p.parent for p in sweep.rglob("summary.json")]
        assert jobs and all(read_summary(j)["status"] == "finished" for j in jobs)
    commands = [
        read_summary(next(s.rglob("summary.json")).parent)["command"].split() for s in sweeps
    ]
    assert sorted(next(a for a in c if a.startswith("seed=")) for c in commands) == [
        "seed=0",
        "seed=1",
    ]


# ------------------------------------------------------------------ files, survival, signals

LINEAR = ["dataset=digits", "model=linear", "n=4", "K=2", "B=16", "eval_every=1"]
FINISHED_FILES = (
    "metrics.csv",
    "metrics.png",
    "summary.json",
    "config.yaml",
    ".hydra/config.yaml",
    ".hydra/overrides.yaml",
)


def _finished(tmp: Path, *args) -> tuple[Path, dict]:
    run = tmp / "run"
    p = fedrun(*LINEAR, "T=2", f"hydra.run.dir={run}", *args, cwd=tmp)
    assert p.returncode == 0, p.stderr
    return run, {f: (run / f).read_bytes() for f in FINISHED_FILES}


def _unchanged(run: Path, before: dict) -> None:
    for f, content in before.items():
        assert (run / f).read_bytes() == content, f"{f} of the finished run changed"
    assert not (run / ".kept").exists()


@pytest.mark.parametrize("name", [".fedrun.lock", "fedrun.log", ".hydra", "metrics.csv"])
def test_a_link_in_a_run_folder_is_never_followed(name, tmp_path):
    """Links where fedrun's files belong: the folder is not free (scaffold) or the write is
    refused (metrics.csv of a run folder); the file the link points to is untouched."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "file").write_text("precious\n")
    run = tmp_path / "run"
    if name == "metrics.csv":
        run, _ = _finished(tmp_path)
        (run / name).unlink()
    else:
        run.mkdir()
    (run / name).symlink_to(victim if name == ".hydra" else victim / "file")
    p = fedrun(*LINEAR, "T=3", f"hydra.run.dir={run}", cwd=tmp_path)
    assert p.returncode == 2 and len(stderr_lines(p)) <= 3, p.stderr
    assert (victim / "file").read_text() == "precious\n" and sorted(os.listdir(victim)) == ["file"]


def test_special_files_are_refused_without_hanging(tmp_path):
    """A device node as fedrun-plot's --out, FIFOs as lock, metrics.csv, summary.json and data
    file: one line each, within the timeout (no open blocks), nothing replaced."""
    run, _ = _finished(tmp_path)
    plot = [
        sys.executable,
        "-c",
        "import sys; from fedprox_cli.cli.commands import plot; sys.argv[0] = 'fedrun-plot'; plot()",
    ]
    report = [sys.executable, "-c", "import sys; from fedprox_cli.cli.status import main; main()"]
    p = subprocess.run(
        [*plot, str(run), "--out", "/dev/null"], env=ENV, capture_output=True, text=True, timeout=60
    )
    assert (
        p.returncode == 2
        and "/dev/null is a device node" in p.stderr
        and Path("/dev/null").is_char_device()
    )
    for name in (".fedrun.lock", "metrics.csv", "summary.json"):
        bad = tmp_path / f"fifo_{name}"
        shutil.copytree(run, bad, symlinks=True)
        (bad / name).unlink()
        os.mkfifo(bad / name)
        for cmd in (plot + [str(bad), "--out", str(tmp_path / "x.png")], report + [str(bad)]):
            subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=60)  # no hang
    p = fedrun(
        *LINEAR, "T=3", f"hydra.run.dir={tmp_path / 'fifo_.fedrun.lock'}", cwd=tmp_path, timeout=120
    )
    assert p.returncode == 2 and "is a FIFO" in p.stderr
    data = tmp_path / "data"
    mnist_files(data)
    target = next(data.rglob("train-images*"))
    target.unlink()
    os.mkfifo(target)
    p = fedrun(
        "dataset=mnist",
        f"data.root={data}",
        "partition=iid",
        "model=linear",
        "n=2",
        "T=1",
        "B=4",
        f"hydra.run.dir={tmp_path / 'm'}",
        cwd=tmp_path,
        timeout=120,
    )
    assert p.returncode == 2 and "is a FIFO" in p.stderr, p.stderr


def test_a_tracker_folder_stays_inside_the_run_folder(tmp_path):
    pytest.importorskip("torch.utils.tensorboard")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "events.out.tfevents.precious").write_text("x")
    for subdir in (str(outside), "../outside"):
        for dry in ([], ["dry_run=true"]):  # the dry run refuses what the run refuses
            p = fedrun(
                *LINEAR,
                "T=1",
                "logger=tensorboard",
                f"logger.subdir={subdir}",
                *dry,
                f"hydra.run.dir={tmp_path / 'run'}",
                cwd=tmp_path,
            )
            assert p.returncode == 2 and "must be a folder inside the run folder" in p.stderr, (
                p.stderr
            )
            assert sorted(os.listdir(outside)) == ["events.out.tfevents.precious"]


def _forge(path: Path, kind: str) -> None:
    d = torch.load(path, weights_only=True)
    key = next(iter(d["state"]))
    if kind == "shape":
        d["state"][key] = torch.zeros(3)
    elif kind == "key":
        del d["state"][key]
    else:
        d["round"] = -3
    torch.save(d, path)


@pytest.mark.parametrize(
    "fault", ["shape", "key", "round", ".hydra a file", "partition.npz a folder"]
)
def test_a_finished_run_survives_a_failed_extension(fault, tmp_path):
    run, before = _finished(tmp_path, "keep_checkpoint=true", "checkpoint_every=1")
    if fault in ("shape", "key", "round"):
        _forge(run / "checkpoint.pt", fault)
    elif fault == ".hydra a file":
        shutil.rmtree(run / ".hydra")
        (run / ".hydra").write_text("not a folder")
        before = {f: b for f, b in before.items() if not f.startswith(".hydra")}
    else:
        (run / "partition.npz").unlink()
        (run / "partition.npz").mkdir()
    p = fedrun(
        *LINEAR,
        "T=4",
        "keep_checkpoint=true",
        "checkpoint_every=1",
        f"hydra.run.dir={run}",
        cwd=tmp_path,
    )
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    _unchanged(run, before)


@pytest.mark.parametrize("where", ["the folder", "a link"])
def test_an_extension_that_cannot_write_the_finished_runs_folder_changes_nothing(
    where, tmp_path, monkeypatch
):
    """A run folder made immutable (``chattr +i``: no entry can be made in it) or on a file
    system that refuses links and copies: the extension is refused before anything is
    written -- summary.json (writable in place) included -- and the same command as before
    still finds the run finished. Simulated at the attempt's first write (keep.protect)."""
    from fedprox_cli.runs import keep

    run, before = _finished(tmp_path, "keep_checkpoint=true", "checkpoint_every=1")
    before.update({f: (run / f).read_bytes() for f in ("checkpoint.pt", "partition.npz")})
    denied = OSError(errno.EPERM, "Operation not permitted", str(run / ".kept"))
    if where == "the folder":

        def folder(*a, **k):
            raise denied

        monkeypatch.setattr(keep, "folder", folder)
    else:

        def link(*a, **k):
            raise denied

        monkeypatch.setattr(keep.os, "link", link)
        monkeypatch.setattr(keep.shutil, "copy2", link)
    args = [*LINEAR, "keep_checkpoint=true", "checkpoint_every=1", f"hydra.run.dir={run}"]
    p = fedrun(*args, "T=4", cwd=tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.splitlines()[-1] == (
        f"fedrun: error: the finished run in {run} cannot be continued: its folder cannot be "
        f"written (Operation not permitted: {run / '.kept'}); nothing in it was changed"
    )
    _unchanged(run, before)
    monkeypatch.undo()
    p = fedrun(*args, "T=2", cwd=tmp_path)
    assert p.returncode == 0 and "has already finished its 2 rounds" in p.stdout, p.stdout


def _start_sweep(tmp: Path, *args, env=None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "fedprox_cli", *args],
        cwd=tmp,
        env={**ENV, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def test_ctrl_c_during_an_extension_keeps_the_finished_run(tmp_path):
    """No kept checkpoint, T extended, Ctrl-C once the attempt has started writing."""
    run, before = _finished(tmp_path)
    proc = _start_sweep(tmp_path, *LINEAR, "T=100000", f"hydra.run.dir={run}")
    deadline = time.time() + 120
    while not (run / ".kept").exists() and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    assert proc.returncode == 130
    _unchanged(run, before)


@pytest.mark.parametrize("hit,times", [("ckpt", 2), ("part", 1)])
def test_signals_during_a_write_end_as_interrupted(hit, times, tmp_path):
    """SIGINTs arriving inside torch.save / np.savez_compressed (atomic.atomic_write holds them)."""
    driver = f"""
import os, signal, sys
import numpy as np, torch
from fedprox_cli.cli import main as cli
class Hit:
    def __init__(self, f): self.f, self.n = f, 0
    def write(self, b):
        self.n += 1
        if self.n == 2:
            for _ in range({times}):
                os.kill(os.getpid(), signal.SIGINT)
        return self.f.write(b)
    def __getattr__(self, k): return getattr(self.f, k)
save, savez = torch.save, np.savez_compressed
if "{hit}" == "ckpt": torch.save = lambda obj, f, *a, **k: save(obj, Hit(f), *a, **k)
else: np.savez_compressed = lambda f, *a, **k: savez(Hit(f), *a, **k)
sys.argv = ["fedrun", *sys.argv[1:]]
cli.main()
"""
    run = tmp_path / "run"
    p = fedrun(
        *LINEAR, "T=3", "checkpoint_every=1", f"hydra.run.dir={run}", cwd=tmp_path, driver=driver
    )
    assert p.returncode == 130, p.stderr
    assert read_summary(run)["status"] == "interrupted" and not temp_files(run)


HOOK = Path(__file__).parent / "signal_hook"


@pytest.mark.parametrize(
    "phase",
    ["import:1", "data:2", "build:2", "training:3", "evaluation:4", "plotting:2", "between:1"],
)
def test_a_signal_at_any_phase_stops_the_sweep(phase, tmp_path):
    """SIGTERM at the n-th entry into a phase (tests/signal_hook): exit 130 within seconds, no
    job started after it, no job left running, finished jobs kept."""
    sweep = tmp_path / "sweep"
    p = fedrun(
        "-m",
        *LINEAR,
        "T=3",
        "seed=0,1,2",
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
        env={"PYTHONPATH": f"{ROOT}{os.pathsep}{HOOK}", "FEDRUN_SIGNAL_AT": phase},
        timeout=240,
    )
    assert p.returncode == 130, (p.returncode, p.stderr)
    jobs = job_folders(sweep)  # none when the signal came while the sweep's jobs were checked
    assert len(jobs) in (0, 3), jobs
    statuses = [view.status(j) for j in jobs] or ["missing"] * 3
    assert statuses[2] == "missing" and not {"running", "dead"} & set(statuses), statuses


def test_a_finished_joblib_sweep_leaves_no_worker_and_no_note(tmp_path):
    """loky keeps idle workers 300 s: they end with the sweep, and no note blames a plugin for
    a thread of the launcher's."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fedprox_cli",
            "-m",
            "hydra/launcher=joblib",
            "hydra.launcher.n_jobs=2",
            *LINEAR,
            "T=2",
            "seed=0,1",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
        ],
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "thread" not in err, err
    deadline = time.time() + 60
    while processes_of_session(proc.pid) and time.time() < deadline:
        time.sleep(0.5)
    assert not processes_of_session(proc.pid)


def test_sigterm_to_a_joblib_sweep_stops_every_worker(tmp_path):
    """The whole process group gets SIGTERM (as from `timeout`): the sweep ends within seconds and
    the queued jobs never start (before the fix the workers went on through the queue for
    minutes). The running jobs stop after their round; joblib's abort in the launching process
    may kill a worker first: the sweep then records it ``interrupted`` (resumable from its last
    checkpoint), never ``dead`` or ``running``."""
    sweep = tmp_path / "sweep"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fedprox_cli",
            "-m",
            "hydra/launcher=joblib",
            "hydra.launcher.n_jobs=2",
            *LINEAR,
            "T=100000",
            "checkpoint_every=50",
            "seed=0,1,2,3",
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.time() + 180
    while time.time() < deadline and len(list(sweep.glob("*/metrics.csv"))) < 2:
        time.sleep(0.5)
    time.sleep(1)
    os.killpg(proc.pid, signal.SIGTERM)
    start = time.time()
    proc.communicate(timeout=120)
    assert time.time() - start < 30
    statuses = [view.status(j) for j in job_folders(sweep)]
    # a worker joblib's abort killed is recorded as interrupted by the sweep: no status says
    # running (or dead) where the sweep itself stopped it
    assert statuses[:2] == ["interrupted"] * 2 and statuses[2:] == ["missing"] * 2, statuses
    # the pool's workers ended with the sweep (its resource trackers end as their pipe closes)
    deadline = time.time() + 60
    while processes_of_session(proc.pid) and time.time() < deadline:
        time.sleep(0.5)
    assert not processes_of_session(proc.pid)


def _as_older(run: Path) -> None:
    """Make ``run`` (finished, its checkpoint kept) look written by an older checkout of
    fedprox_cli (whose version number was this one's): its config.yaml and checkpoint's digest
    without two keys added since (``compile``, ``metrics.per_client``)."""
    import yaml

    for f in (run / "config.yaml", run / ".hydra" / "config.yaml"):
        cfg = yaml.safe_load(f.read_text())
        del cfg["compile"], cfg["metrics"]["per_client"]
        f.write_text(yaml.safe_dump(cfg))
    d = torch.load(run / "checkpoint.pt", weights_only=True)
    d["digest"] = checkpoint.digest(yaml.safe_load((run / "config.yaml").read_text()))
    torch.save(d, run / "checkpoint.pt")


def test_an_older_versions_checkpoint_is_read_with_the_keys_added_since(tmp_path):
    """Its settings are this run's once compile takes its default: extended from its checkpoint,
    with a note naming it -- never "another run" (metrics.per_client, run control, is no part
    of a checkpoint's fingerprint)."""
    run, _ = _finished(tmp_path, "keep_checkpoint=true", "checkpoint_every=1")
    _as_older(run)
    p = fedrun(*LINEAR, "T=4", "keep_checkpoint=true", f"hydra.run.dir={run}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (
        f"fedrun: note: {run / 'checkpoint.pt'} was written by an older checkout, before compile "
        f"existed: read with its default (compile=False), the settings that run computed with"
    ) in p.stderr.splitlines(), p.stderr.splitlines()
    assert f"resuming {run} from round 2 of 4" in p.stderr


def test_a_checkpoint_whose_fingerprint_another_version_made_names_the_version(tmp_path):
    run, before = _finished(tmp_path, "keep_checkpoint=true", "checkpoint_every=1")
    d = torch.load(run / "checkpoint.pt", weights_only=True)
    d["digest"] = "0" * 16  # a fingerprint this version does not compute
    torch.save(d, run / "checkpoint.pt")
    s = json.loads((run / "summary.json").read_text())
    s["versions"]["fedprox_cli"] = "0.0.9"
    (run / "summary.json").write_text(json.dumps(s))
    before = {f: (run / f).read_bytes() for f in (*before, "checkpoint.pt", "summary.json")}
    p = fedrun(*LINEAR, "T=4", "keep_checkpoint=true", f"hydra.run.dir={run}", cwd=tmp_path)
    assert p.returncode == 2 and "another run" not in p.stderr, p.stderr
    assert p.stderr.splitlines()[-1].startswith(
        f"fedrun: error: {run / 'checkpoint.pt'} was written by fedprox_cli 0.0.9, whose "
        f"fingerprint of the run's settings this fedprox_cli (0.1.0) does not reproduce"
    ), p.stderr
    _unchanged(run, before)
