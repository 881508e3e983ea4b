"""Sweeps: job folders follow from configs, so a sweep re-run into its
folder with a longer, shorter or reordered list loses and doubles nothing; every job is checked
before the first one trains; the report and the exit code come from what every job launched
returned, wherever its folder; a single run of a preset that defines a sweep says so."""

import os
import shutil
import sys
from pathlib import Path

import pytest
from conftest import ROOT, fedrun, job_folders, said
from omegaconf import OmegaConf

from fedprox_cli.common.errors import EXIT
from fedprox_cli.common.run_files import read_summary

sys.path.insert(0, str(ROOT / "scripts"))
import tables as tables_script  # noqa: E402

BASE = [
    "dataset=digits",
    "model=linear",
    "n=4",
    "K=2",
    "B=16",
    "T=1",
    "eval_every=1",
    "regularizer=none",
]


RECORD = ("metrics.csv", "summary.json", "config.yaml", "partition.npz", "metrics.png")


def files(folder: Path) -> dict:
    """A sweep folder's run records, byte for byte (fedrun.log gains a line per re-run)."""
    return {p: p.read_bytes() for p in folder.rglob("*") if p.name in RECORD}


def table_ns(sweep: Path, capsys) -> str:
    assert tables_script.main([str(sweep)]) == 0
    return capsys.readouterr().out


def test_extend_shrink_and_reorder_a_sweep_in_its_folder(tmp_path, capsys):
    s = tmp_path / "S"
    p = fedrun(
        "-m", "algorithm=fedcanon,fedavg", "seed=0,1", *BASE, f"hydra.sweep.dir={s}", cwd=tmp_path
    )
    assert p.returncode == 0, p.stderr
    first = job_folders(s)
    before = files(s)
    # longer: the four runs are left as they were, FedCanon and FedAvg seed 2 run
    p = fedrun(
        "-m", "algorithm=fedcanon,fedavg", "seed=0,1,2", *BASE, f"hydra.sweep.dir={s}", cwd=tmp_path
    )
    assert p.returncode == 0, p.stderr
    assert "sweep: 6 of 6 jobs finished" in p.stdout and p.stdout.count("has already finished") == 4
    assert {f: b for f, b in files(s).items() if f in before} == before
    jobs = job_folders(s)
    assert set(first) < set(jobs) and len(set(jobs)) == 6
    configs = sorted(
        (c.algorithm.name, c.seed) for c in (OmegaConf.load(j / "config.yaml") for j in jobs)
    )
    assert configs == sorted((a, i) for a in ("fedcanon", "fedavg") for i in (0, 1, 2))
    # shorter and reordered: nothing runs again, nothing new
    after = files(s)
    p = fedrun("-m", "seed=2,0", "algorithm=fedavg", *BASE, f"hydra.sweep.dir={s}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "sweep: 2 of 2 jobs finished" in p.stdout and p.stdout.count("has already finished") == 2
    assert files(s) == after and set(job_folders(s)) <= set(jobs)
    out = table_ns(s, capsys)
    assert (
        "over 3 seeds per cell" in out and "4 seeds" not in out and "2 seeds" not in out
    )  # every cell: 3 seeds


def test_a_sweep_into_numbered_folders_of_other_configs_is_refused(tmp_path):
    """The old layout (hydra.sweep.subdir=${hydra.job.num}) can still be chosen; a re-run whose list
    maps other configs onto its folders is refused before anything runs, one line per job."""
    s = tmp_path / "S"
    numbered = "hydra.sweep.subdir=${hydra.job.num}"
    p = fedrun("-m", "seed=0,1", *BASE, f"hydra.sweep.dir={s}", numbered, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    before = files(s)
    p = fedrun("-m", "seed=1,2", *BASE, f"hydra.sweep.dir={s}", numbered, cwd=tmp_path)
    assert p.returncode == EXIT["error"]
    lines = p.stderr.splitlines()
    assert [line.split(": ")[0] for line in lines] == ["fedrun"] * 3
    assert (
        lines[0].startswith("fedrun: error: job 0 (seed=1 ")
        and "holds a run of a different config" in lines[0]
    )
    assert lines[1].startswith("fedrun: error: job 1 (seed=2 ")
    assert lines[2] == "fedrun: error: 2 of 2 jobs of the sweep are invalid (above); nothing ran"
    assert files(s) == before


def test_tables_count_a_run_once(tmp_path, capsys):
    """The same run in two folders (a sweep re-run under another folder layout) counts once."""
    s = tmp_path / "S"
    assert fedrun("-m", "seed=0,1", *BASE, f"hydra.sweep.dir={s}", cwd=tmp_path).returncode == 0
    shutil.copytree(job_folders(s)[0], s / "0")
    assert tables_script.main([str(s)]) == 0
    out, err = capsys.readouterr()
    assert "over 2 seeds per cell" in out and "3 seeds" not in out
    assert "have the same settings and seeds; counted once" in err


@pytest.mark.parametrize(
    "args, bad",
    [
        (["algorithm=fedcanon,fedavg", "regularizer=l1"], ["job 1 (algorithm=fedavg"]),  # 26.2
        (
            ["algorithm.alpha=0.1,${oc.env:FEDRUN_UNSET_VAR}", "regularizer=l1"],
            ["job 1 (algorithm.alpha="],
        ),  # 25.3
        (["seed=0,0,1", "regularizer=l1"], ["job 1 (seed=0 "]),  # one config twice
        (["K=0,2,-1", "regularizer=l1"], ["job 0 (K=0 ", "job 2 (K=-1 "]),
    ],
)
def test_a_sweep_with_bad_jobs_is_refused_with_one_line_each_and_writes_nothing(
    tmp_path, args, bad
):
    base = [a for a in BASE if not a.startswith(("regularizer", "K="))]
    p = fedrun("-m", *args, *base, f"hydra.sweep.dir={tmp_path / 'S'}", cwd=tmp_path)
    assert p.returncode == EXIT["error"], p.stderr
    lines = said(p.stderr)
    assert len(lines) == len(bad) + 1 and "Traceback" not in p.stderr and p.stdout == ""
    for line, start in zip(lines, bad):
        assert line.startswith(f"fedrun: error: {start}"), line
    assert lines[-1].endswith("jobs of the sweep are invalid (above); nothing ran")
    assert not (tmp_path / "S").exists()


def test_the_report_lists_every_job_wherever_its_folder(tmp_path):
    """25.3: a subdir outside the sweep folder, a job failing at run time, a foreign summary.json
    with odd values in the sweep folder; the closing table keeps the differing column for the
    failed job."""
    s = tmp_path / "S"
    s.mkdir()
    (s / "summary.json").write_text('[1, 2]')
    (s / "junk").mkdir()
    (s / "junk" / "summary.json").write_text(
        '{"status": 7, "exit_code": "x", "final": [1], "round": "r"}'
    )
    base = [a for a in BASE if not a.startswith("n=")]
    p = fedrun(
        "-m",
        "n=4,5000",
        *base,
        f"hydra.sweep.dir={s}",
        "hydra.sweep.subdir=../out/${hydra.job.num}",
        cwd=tmp_path,
    )
    assert p.returncode == EXIT["error"], p.stderr
    out = tmp_path / "out"
    assert f"sweep: 1 of 2 jobs finished in {s}" in p.stdout
    assert (
        f"  {out / '1'}: error (n = 5000 clients exceeds the 1437 training samples of digits)"
        in p.stderr
    )
    rows = [line.split() for line in p.stdout.splitlines() if line.startswith(str(out))]
    assert [(r[0], r[1], r[-1]) for r in rows] == [
        (str(out / "0"), "finished", "n=4"),
        (str(out / "1"), "error", "n=5000"),
    ]


@pytest.mark.parametrize(
    "plant, says",
    [
        (lambda job: job.write_text("mine"), "is a file, not a folder"),  # 25.3's example
        (
            lambda job: (
                job.mkdir(),
                (job / "summary.json").write_text('{"status": 7, "round": "x"}'),
            ),
            "holds files that are not a fedrun run (summary.json)",
        ),  # a foreign summary as a job's
    ],
)
def test_a_job_folder_that_is_not_a_run_refuses_the_sweep(tmp_path, plant, says):
    s = tmp_path / "S"
    s.mkdir()
    plant(s / "1")
    before = sorted(s.rglob("*"))
    p = fedrun(
        "-m",
        "seed=0,1,2",
        *BASE,
        f"hydra.sweep.dir={s}",
        "hydra.sweep.subdir=${hydra.job.num}",
        cwd=tmp_path,
    )
    assert p.returncode == EXIT["error"]
    assert (
        p.stderr.splitlines()[0].startswith("fedrun: error: job 1 (seed=1 ")
        and says in p.stderr.splitlines()[0]
    )
    assert sorted(s.rglob("*")) == before


def test_summary_json_reads_through_its_schema(tmp_path):
    (tmp_path / "summary.json").write_text(
        '{"status": 7, "exit_code": true, "error": "x", "T": 3, "other": [1]}'
    )
    assert read_summary(tmp_path) == {"error": "x", "T": 3, "other": [1]}
    (tmp_path / "summary.json").write_text('"finished"')
    with pytest.raises(ValueError):
        read_summary(tmp_path)


def test_a_run_of_a_preset_that_defines_a_sweep_says_so(tmp_path):
    p = fedrun(
        "experiment=fedcanon_fig2_quick",
        "dataset=digits",
        "model=linear",
        "n=4",
        "T=1",
        f"hydra.run.dir={tmp_path / 'r'}",
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    note = (
        "this preset defines a sweep over partition, algorithm; without -m this runs one config "
        "(the preset's own values); `fedrun -m ...` with the same arguments runs its 12 jobs"
    )
    assert p.stderr.splitlines()[0] == f"fedrun: note: {note}"
    dry = fedrun(
        "experiment=fedcanon_fig2_quick",
        "dataset=digits",
        "model=linear",
        "n=4",
        "T=1",
        "dry_run=true",
        f"hydra.run.dir={tmp_path / 'd'}",
        cwd=tmp_path,
    )
    assert dry.returncode == 0 and f"\nnote: {note}\n" in dry.stdout, (
        dry.stdout
    )  # the dry run says it too
    assert (
        "note:"
        not in fedrun(
            "experiment=fedcanon_fig2_quick",
            "dataset=digits",
            "model=linear",
            "n=4",
            "T=1",
            "dry_run=true",
            "-m",
            f"hydra.sweep.dir={tmp_path / 's'}",
            cwd=tmp_path,
        ).stdout
    )


def test_the_dry_run_names_a_run_another_process_holds(tmp_path):
    """A job whose folder is in use (another sweep into the same folder) would be refused: the
    dry run says so, by whom, and counts no work for it."""
    from fedprox_cli.runs.lock import RunLock

    args = ("dataset=digits", "model=linear", "T=2", f"hydra.run.dir={tmp_path / 'run'}")
    assert fedrun(*args, cwd=tmp_path).returncode == 0
    with RunLock(tmp_path / "run"):
        dry = fedrun(*args[:-2], "T=4", args[-1], "dry_run=true", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert f"running now (pid {os.getpid()} on host " in dry.stdout and "): refused" in dry.stdout
    assert "work: 0 client steps" in dry.stdout
    free = fedrun(
        *args[:-2], "T=4", args[-1], "dry_run=true", cwd=tmp_path
    )  # released: it would run
    assert "running now" not in free.stdout and "work: 400 client steps" in free.stdout
