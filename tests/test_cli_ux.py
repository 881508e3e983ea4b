"""What fedrun tells its user: progress lines without a terminal, the closing summary,
the resume line, the sweep's job table, --help, dry runs and --cfg job."""

import json
import os
import re
import subprocess
import sys

import pandas as pd
import pytest
import yaml
from conftest import child_env, fedrun, job_folders, said

from fedprox_cli.cli import help, jobtable
from fedprox_cli.common.errors import EXIT
from fedprox_cli.common.package import CONF_DIR
from fedprox_cli.runs import recap

TINY = ["dataset=digits", "model=linear", "n=4", "K=2", "B=8"]
PROGRESS = re.compile(
    r"^fedrun: round (\d+)/(\d+), [\d.hms]+ elapsed, ~[\d.hms]+ left; "
    r"loss [-\d.e+]+, objective [-\d.e+]+, acc [\d.]+$"
)


def to_files(tmp_path, *args):
    """fedrun with stdout and stderr to files (no terminal), as under nohup or on a cluster
    (:func:`conftest.fedrun` captures them in files)."""
    p = fedrun(*args, cwd=tmp_path)
    return p.returncode, p.stdout, p.stderr


def test_progress_lines_summary_and_resume_without_a_terminal(tmp_path):
    run = tmp_path / "run"
    code, out, err = to_files(
        tmp_path,
        *TINY,
        "T=4",
        "eval_every=2",
        "progress_every_s=0",
        "checkpoint_every=2",
        "keep_checkpoint=true",
        f"hydra.run.dir={run}",
    )
    assert code == 0, err
    lines = [line for line in err.splitlines() if line.strip()]
    # round 4's line is left to the closing line, which follows at once
    assert [PROGRESS.match(line).groups() for line in lines] == [("2", "4")], err
    m = pd.read_csv(run / "metrics.csv").iloc[-1]
    (summary,) = [line for line in out.splitlines() if line.startswith("fedrun: summary:")]
    assert summary.startswith(
        f"fedrun: summary: finished, 4/4 rounds: test accuracy {m['test_acc']:.4f}, "
        f"objective {m['objective']:.4g}, stationarity {m['stationarity']:.3g}, "
        f"training "
    )
    assert summary.endswith(f"; {run}")
    log = (run / "fedrun.log").read_text()
    for line in lines + [summary]:
        assert line in log  # every line also in the run's log, time-stamped
    assert re.search(rf"fedrun: round 4/4, .*, acc {m['test_acc']:.4f}$", log, re.M), log

    # a dry run of the extension says what the run would do, and changes nothing
    before = {f.name: f.read_bytes() for f in run.iterdir() if f.is_file()}
    p = fedrun(
        *TINY,
        "T=6",
        "eval_every=2",
        "checkpoint_every=2",
        "keep_checkpoint=true",
        f"hydra.run.dir={run}",
        "dry_run=true",
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    assert re.search(
        rf"^  0 +{re.escape(str(run))} +16 +1 +(?:cpu|no CUDA here: cpu) +resumes from round 4$",
        p.stdout,
        re.M,
    ), p.stdout
    assert {
        f.name: f.read_bytes() for f in run.iterdir() if f.is_file()
    } == before  # 2 rounds x K n; round 6

    # the same command with T extended: resumes, and says so; a progress line comes at the first
    # evaluation whatever progress_every_s (default 30 s), the next ones 5 s later or more; round
    # 8's is left to the closing line
    code, out, err = to_files(
        tmp_path,
        *TINY,
        "T=8",
        "eval_every=2",
        "checkpoint_every=2",
        "keep_checkpoint=true",
        f"hydra.run.dir={run}",
    )
    assert code == 0, err
    line, first = [x for x in err.splitlines() if x.strip()]
    assert PROGRESS.match(first).groups() == ("6", "8"), err
    assert re.fullmatch(
        rf"fedrun: resuming {re.escape(str(run))} from round 4 of 8 \(checkpoint of "
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\)",
        line,
    ), err
    assert line in (run / "fedrun.log").read_text()
    assert "fedrun: summary: finished, 8/8 rounds" in out


def test_sweep_ends_with_report_and_job_table(tmp_path):
    sweep = tmp_path / "sweep"
    p = fedrun(
        "-m",
        *TINY,
        "model=mlp",
        "model.hidden=16",
        "B=16",
        "T=6",
        "eval_every=3",
        "algorithm.beta=0.01,1e3",
        "progress_every_s=0",
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
    )  # 1e3: NaN by round 3
    assert p.returncode == EXIT["diverged"], p.stderr
    assert re.search(r"^fedrun: job 0: round 3/6, ", p.stderr, re.M), p.stderr
    # the diverged job's evaluation is said by its one divergence line, not a progress line
    assert not re.search(r"^fedrun: job 1: round", p.stderr, re.M), p.stderr
    assert re.search(r"^fedrun: job 1: diverged: objective is nan after round 3", p.stderr, re.M)
    # one closing line per job, printed by the launching process before its report
    report = p.stdout.index("sweep: 1 of 2 jobs finished")
    closing = re.findall(
        r"^fedrun: job (\d): summary: (\w+), (\d/6) rounds", p.stdout[:report], re.M
    )
    assert sorted(closing) == [("0", "finished", "6/6"), ("1", "diverged", "3/6")], p.stdout
    assert "fedrun: summary: " not in p.stdout, p.stdout  # not a second time by the job
    head, *rows = p.stdout[p.stdout.index("sweep: 1 of 2 jobs finished") :].splitlines()[1:]
    assert head.split() == [
        "job",
        "status",
        "rounds",
        "test_acc",
        "objective",
        "stationarity",
        "time",
        "gpu",
        "overrides",
    ]
    jobs = job_folders(sweep)
    acc = pd.read_csv(jobs[0] / "metrics.csv")["test_acc"].iloc[-1]
    assert rows[0].split()[:4] == [jobs[0].name, "finished", "6/6", f"{acc:.4f}"]
    assert rows[0].split()[-1] == "algorithm.beta=0.01"  # only the override that differs
    assert rows[1].split()[:2] == [jobs[1].name, "diverged"] and rows[1].split()[-1].startswith(
        "algorithm.beta=1"
    )


def test_job_table_of_folders(tmp_path):
    """jobtable reads what a folder holds; a job never started still gets its row."""
    for i, (status, acc) in enumerate([("finished", 0.5), ("interrupted", 0.25)]):
        run = tmp_path / str(i)
        (run / ".hydra").mkdir(parents=True)
        (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(["T=5", f"seed={i}"]))
        pd.DataFrame(
            {
                "round": [0, 5],
                "time_s": [0, 75.0],
                "objective": [2.0, 1.0],
                "stationarity": [1.0, 1e-3],
                "test_acc": [0.1, acc],
            }
        ).to_csv(run / "metrics.csv", index=False)
        (run / "summary.json").write_text(
            json.dumps({"status": status, "round": 5 - i, "T": 5, "versions": {"fedprox_cli": "0"}})
        )
    lines = jobtable.table([tmp_path / "0", tmp_path / "1", tmp_path / "2"], tmp_path)
    assert [line.split() for line in lines[1:]] == [
        [
            "0",
            "finished",
            "5/5",
            "0.5000",
            "1",
            "0.001",
            "1m15s",
            "-",
            "seed=0",
        ],  # no hardware recorded
        ["1", "interrupted", "4/5", "0.2500", "1", "0.001", "1m15s", "-", "seed=1"],
        ["2", "not", "started", "-", "-", "-", "-", "-", "-"],
    ]
    assert recap.closing_line(tmp_path / "1") == (
        f"interrupted, 4/5 rounds: test accuracy 0.2500, objective 1, stationarity 0.001, training 1m15s (rounds only); "
        f"{tmp_path / '1'}"
    )


def test_help_explains_keys_groups_presets_and_exit_codes(tmp_path):
    p = fedrun("--help", cwd=tmp_path)
    assert p.returncode == 0 and p.stderr == ""
    text = " ".join(p.stdout.split())  # wrapped lines joined
    # what fedrun does, and the keys with their meaning, from conf/config.yaml's comments
    assert text.startswith("fedrun trains a model over n simulated clients")
    for key, meaning in [
        ("T 100", "communication rounds"),
        ("K 10", "local steps per round"),
        ("progress_every_s 30", "at most every this many seconds"),
        ("metrics.train_samples null", "client-stratified subset"),
        ("data.root null", "$FEDPROX_DATA"),
    ]:
        assert f"{key} " in text and meaning in text[text.index(f"{key} ") :][:300], key
    keys = help.config_keys()
    assert {k for k, _, _ in keys} >= {
        "T",
        "K",
        "n",
        "B",
        "seed",
        "eval_every",
        "dry_run",
        "oracle.chunk",
    }
    assert all(meaning for _, _, meaning in keys), [k for k, _, m in keys if not m]
    assert "hydra" not in {k.split(".")[0] for k, _, _ in keys}
    # every group's options with their first comment line; the default marked
    assert "*fedcanon FedCanon (the FedCanon paper, Algorithm 1)." in text
    assert "sorted_shards FedNMap Sec. 5.1: training samples sorted by class label" in text
    assert "dir/{0.01,0.1,0.2,0.5,0.6,1}" in text
    # every preset with what it reproduces and its time
    for preset in sorted((CONF_DIR / "experiment").glob("*.yaml")):
        assert f"{preset.stem} " in text
        assert f"Time: {help.preset_time(preset)}." in text
        assert help.preset_time(preset) != "not given", preset
    assert "fedcanon_fig2 FedCanon Fig. 2: smooth problem (h = 0)." in text
    assert "Time: 14 min on 2 CPU cores" in text
    # exit codes and examples
    for code, meaning in [
        (0, "finished"),
        (1, "diverged"),
        (2, "bad input"),
        (3, "internal error"),
        (130, "interrupted"),
    ]:
        assert re.search(rf"\n  {code} +{meaning}", p.stdout), code
    examples = p.stdout.split("\nExamples:\n")[1].split("\n\n")[0].splitlines()
    assert len(examples) >= 3 and all(" # " in e for e in examples)
    assert "dry_run=true" in text and "--hydra-help" in text
    hydra = fedrun("--hydra-help", cwd=tmp_path)
    assert hydra.returncode == 0 and "Hydra" in hydra.stdout


SWEEP = [*TINY, "T=3", "seed=0,1"]


def test_dry_run_of_a_12_job_sweep(tmp_path):
    p = fedrun("-m", *SWEEP, "K=1,2,3,4,5,6", "dry_run=true", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "dry run: 12 jobs, every config valid; nothing was written"
    rows = [line.split() for line in lines if re.match(r"^  \d+ ", line)]
    assert [r[0] for r in rows] == [str(i) for i in range(12)]
    folders = [r[1] for r in rows]
    assert len({f.rsplit("/", 1)[0] for f in folders}) == 1  # one sweep folder
    ks = [k for k in (1, 2, 3, 4, 5, 6) for _ in (0, 1)]
    assert [
        re.sub(r"_[0-9a-f]{8}$", "", f.rsplit("/", 1)[1]) for f in folders
    ] == [  # named by config
        f"B=8,K={k},T=3,dataset=digits,model=linear,n=4,seed={i % 2}" for i, k in enumerate(ks)
    ]
    # named as the real sweep will be: its start time and process are not the dry run's
    assert folders[0].startswith("results/sweeps/<time>_<pid>/")
    assert [r[-2:] for r in rows] == [[f"K={k}", f"seed={i % 2}"] for i, k in enumerate(ks)]
    assert [int(r[2]) for r in rows] == [3 * k * 4 for k in ks]  # T K n participation
    assert all(r[3] == str(2) for r in rows)  # ceil(3/5) + 1
    assert (
        f"work: {sum(3 * k * 4 for k in ks):,} client steps" in p.stdout
        and " 24 evaluations" in p.stdout
    )
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_dry_run_of_a_preset_lists_its_sweep(tmp_path):
    """The preset's hydra.sweeper.params expand as in a real sweep, into one sweep folder."""
    p = fedrun("-m", "experiment=fedcanon_fig2_quick", "dry_run=true", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    rows = [line.split() for line in p.stdout.splitlines() if re.match(r"^  \d+ ", line)]
    assert len(rows) == 12
    assert {r[1].rsplit("/", 1)[0] for r in rows} == {rows[0][1].rsplit("/", 1)[0]}
    assert rows[0][1].startswith("results/sweeps/fedcanon_fig2_quick/<time>_<pid>/")
    assert {(r[-2], r[-1]) for r in rows} == {
        (f"partition={p}", f"algorithm=fedcanon_fig2/{a}")
        for p in ("iid", "dir/0.1", "dir/0.01")
        for a in ("fedcanon", "fedavg", "scaffold", "scaffnew")
    }
    assert all(r[2] == f"{6 * 20 * 10:,}" and r[3] == "3" for r in rows)  # T K n; ceil(6/3)+1
    assert list(tmp_path.iterdir()) == []


def test_dry_run_names_every_bad_job(tmp_path):
    sweep = tmp_path / "sweep"
    p = fedrun(
        "-m", *SWEEP, "K=1,2,3,0,5,6", "dry_run=true", f"hydra.sweep.dir={sweep}", cwd=tmp_path
    )
    assert p.returncode == 2 and p.stdout == ""
    lines = said(p.stderr)
    assert lines == [
        f"fedrun: error: job {j} (dataset=digits model=linear n=4 K=0 B=8 T=3 seed={s} "
        "dry_run=True): K must be a positive integer, got 0"
        for j, s in ((6, 0), (7, 1))
    ], p.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args, message",
    [
        (["dry_run=maybe"], "dry_run must be true or false, got 'maybe'"),
        (["algorithm=fedavg", "dry_run=true"], "defined for h = 0 only"),
    ],
)
def test_dry_run_of_one_run(tmp_path, args, message):
    p = fedrun(*TINY, *args, cwd=tmp_path)
    assert p.returncode == 2 and message in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr
    assert list(tmp_path.iterdir()) == []


def test_cfg_job_is_resolved_also_for_sweeps(tmp_path):
    p = fedrun(*TINY, "seed=7", "--cfg", "job", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    cfg = yaml.safe_load(p.stdout)
    assert cfg["seed"] == 7 and cfg["partition"]["seed"] == 7  # ${seed} resolved
    p = fedrun("-m", *TINY, "seed=3,4", "--cfg", "job", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    docs = p.stdout.split("# job ")[1:]
    assert [d.splitlines()[0].split(" -> ")[0] for d in docs] == [
        "0 (dataset=digits model=linear n=4 K=2 B=8 seed=3)",
        "1 (dataset=digits model=linear n=4 K=2 B=8 seed=4)",
    ]
    assert [yaml.safe_load(d.split("\n", 1)[1])["partition"]["seed"] for d in docs] == [3, 4]
    assert list(tmp_path.iterdir()) == []


def test_a_terminal_gets_a_bar_and_the_log_the_lines(tmp_path):
    """stderr a terminal (a pty): the tqdm bar there, the progress lines in fedrun.log only."""
    import fcntl
    import pty
    import struct
    import termios

    run = tmp_path / "run"
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 columns
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fedprox_cli",
            *TINY,
            "T=4",
            "eval_every=2",
            "progress_every_s=0",
            f"hydra.run.dir={run}",
        ],
        cwd=tmp_path,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=slave,
        stdin=subprocess.DEVNULL,
    )
    os.close(slave)
    screen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the pty closed: the process is gone
            break
        if not chunk:
            break
        screen += chunk
    os.close(master)
    assert p.wait(timeout=600) == 0, screen
    screen = screen.decode(errors="replace")
    assert "4/4" in screen and "fedrun: round" not in screen  # the bar, no lines
    log = (run / "fedrun.log").read_text()
    assert len(re.findall(r"fedrun: round [24]/4, ", log)) == 2, log
    assert "fedrun: summary: finished, 4/4 rounds" in p.stdout.read().decode()


def test_a_dry_runs_cost_does_not_grow_with_seeds(tmp_path, monkeypatch):
    """seeds=R: only the seeds whose folder exists are checked one by one; the rest are counted
    as new (their work summed by start round), so R = 10^6 costs what R = 2 does."""
    from fedprox_cli.runs import preview

    checked = []
    plain = preview.state
    monkeypatch.setattr(
        preview,
        "state",
        lambda config, folder, T: checked.append(folder) or plain(config, folder, T),
    )
    (tmp_path / "r" / "seed_7").mkdir(parents=True)
    p = fedrun(*TINY, "T=2", "seeds=1000000", "dry_run=true", f"hydra.run.dir={tmp_path / 'r'}")
    assert p.returncode == 0, p.stderr
    assert checked == [tmp_path / "r" / "seed_7"]
    assert "1000000 runs: new" in p.stdout
    assert (
        f"work: {2 * 2 * 4 * 1_000_000:,} client steps" in p.stdout
        and " and 2000000 evaluations" in p.stdout
    )


def test_a_run_refused_at_validation_leaves_no_folder_it_made(tmp_path):
    """Hydra makes results/runs/<run>/ before the validation: a refused run removes what it made,
    and leaves a results/runs/ that was there before."""
    p = fedrun(*TINY, "T=-1", cwd=tmp_path)
    assert p.returncode == 2 and not (tmp_path / "results").exists(), p.stderr
    (tmp_path / "results" / "runs").mkdir(parents=True)
    p = fedrun(*TINY, "T=-1", cwd=tmp_path)
    assert (
        p.returncode == 2
        and (tmp_path / "results" / "runs").is_dir()
        and not any((tmp_path / "results" / "runs").iterdir())
    )
    p = fedrun(*TINY, "T=-1", "hydra.run.dir=a/b/c", cwd=tmp_path)
    assert p.returncode == 2 and not (tmp_path / "a").exists()


def test_an_options_help_gives_the_composed_defaults_and_each_parameters_meaning(tmp_path):
    """``fedrun algorithm=NAME --help``: the defaults a run of that option takes (its YAML over
    the class's: FedCanon's alpha is 0.2, the class's 0.1), each parameter's meaning from the
    comment of its declaration; every shipped option's every parameter has one."""
    from dataclasses import fields

    from fedprox_cli.config.plugin_defaults import lookup

    p = fedrun("algorithm=fedcanon", "--help", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    rows = {line.split()[0]: line for line in p.stdout.splitlines() if "algorithm." in line}
    assert "default 0.2 " in rows["algorithm.alpha"], rows
    assert "global step size alpha" in rows["algorithm.alpha"], rows
    for group in ("algorithm", "regularizer", "compressor"):
        for option in sorted((CONF_DIR / group).glob("*.yaml")):
            cls = lookup(group)(option.stem)
            meanings = help.field_meanings(cls)
            assert not [f.name for f in fields(cls) if f.init and f.name not in meanings], option


def test_a_presets_option_has_its_help_and_an_unknown_option_is_one_line(tmp_path):
    """``fedrun algorithm=fedcef_fig3_4/fedcef_top1 --help`` (an option of a preset's, listed in
    the group's options) is its method's page with the preset's values (eta 0.1 where the class
    says 0.3); an unknown option under --help is one line and exit 2, never an internal error."""
    p = fedrun("algorithm=fedcef_fig3_4/fedcef_top1", "--help", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("algorithm fedcef_fig3_4/fedcef_top1 (fedprox_cli.algorithms.")
    rows = {line.split()[0]: line for line in p.stdout.splitlines() if "algorithm." in line}
    assert "default 0.1 " in rows["algorithm.eta"], rows
    for bad in ("algorithm=fedcanonn", "algorithm=nosuch/x"):
        p = fedrun(bad, "--help", cwd=tmp_path)
        assert p.returncode == 2 and p.stdout == "", (bad, p.stdout)
        assert p.stderr.startswith("fedrun: error: unknown algorithm") and len(
            p.stderr.splitlines()
        ) == 1, p.stderr


def test_help_lists_the_launchers():
    names = [name for name, _ in help.launchers()]
    assert names[:2] == ["basic", "joblib"] and {"slurm", "local", "ray"} <= set(names)
    text = " ".join(help.text().split())
    assert "Launchers of a sweep's jobs (fedrun -m hydra/launcher=NAME" in text
    assert "joblib The jobs in parallel worker processes" in text


@pytest.mark.parametrize(
    "module, argv",
    [
        ("reproduce", []),
        *[("reproduce", [c]) for c in ("list", "plan", "run", "check", "report", "record")],
        ("status", []),
        ("plot", []),
        ("table", []),
        ("check_algorithm", []),
    ],
)
def test_every_help_page_is_plain_text_and_explains_each_argument(module, argv, capsys):
    """No reStructuredText markup (double backquotes, :mod:`...`) in a command's --help; every
    subcommand says what it does; every argument has a line of help."""
    import importlib

    m = importlib.import_module(f"fedprox_cli.cli.{module}")
    entry = getattr(m, "parse", None) or m.main
    with pytest.raises(SystemExit):
        entry([*argv, "--help"])
    page = capsys.readouterr().out
    assert not re.search(r"``|:(mod|func|class|data|meth):`", page), page
    usage, _, rest = page.partition("\n\n")
    assert rest.split("\n\n")[0].strip(), page  # a description under the usage
    blocks = [b for b in page.split("\n\n") if b.startswith(("positional arguments:", "options:"))]
    lines = "\n".join(blocks).splitlines() + [""]
    for line, after in zip(lines, lines[1:]):  # an argument's help: on its line, or the next
        if re.match(r"^  \S", line):
            assert "  " in line.strip() or after.startswith("     "), line
    if argv == ["run"]:
        assert usage.rstrip().endswith("CLAIM... [OVERRIDE...]") and "OVERRIDE...:" in page
