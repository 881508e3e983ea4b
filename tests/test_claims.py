"""The claims of the papers as data (fedprox_cli/claims) and fedrun-reproduce: the rule on
hand-made curves, the tamper test on a small copy of the committed runs, bad input of each kind
(exit 2) and `list` showing every claim. In-process (``reproduce.main``)."""

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedprox_cli.analysis import results
from fedprox_cli.analysis.run import Run
from fedprox_cli.claims import (
    declare,
    digests,
    evidence,
    history,
    loading,
    schema,
    sources,
    units,
    verdict,
)
from fedprox_cli.claims.declare import Claim
from fedprox_cli.cli import reproduce
from fedprox_cli.common.errors import UserError

Check = declare.Test  # not named Test*: pytest would try to collect it

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "results"
FIG5 = ("fednmap_fig5", "fednmap_fig5_seeds12")
IDS = {
    "fedcanon-fig1",
    "fedcanon-fig2",
    "fedcanon-fig3",
    "fedcanon-table1",
    "fedcanon-table3",
    "fedcanon-table5",
    "fedcanon-table6",
    "fedcef-fig1",
    "fedcef-fig2",
    "fedcef-fig3",
    "fedcef-fig4",
    "fednmap-fig2",
    "fednmap-fig3",
    "fednmap-fig4",
    "fednmap-fig5a",
    "fednmap-fig5b",
    "fednmap-fig5c",
    "fednmap-fig6",
}


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """list and plan remember texts (claims.cache): in the test's own folder."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


def run(method: str, seed: int, curve, acc: float = 0.9) -> Run:
    """A hand-made finished run: ``curve`` is its stationarity at rounds 0, 5, 10, ..."""
    rounds = np.arange(len(curve)) * 5
    metrics = pd.DataFrame(
        {
            "round": rounds,
            "stationarity": np.asarray(curve, float),
            "test_acc": np.full(len(curve), acc),
        }
    )
    return Run(
        Path(f"/{method}/{seed}"),
        {"choice:algorithm": method, "seed": seed, "T": 20},
        metrics,
        "finished",
    )


def claim(tests, trained_metric="") -> Claim:
    return Claim(
        "x",
        "Paper",
        "Sec. 1, Fig. 1",
        "short",
        "quote",
        "",
        "",
        "",
        None,
        None,
        None,
        (),
        tuple(tests),
        trained_metric=trained_metric,
        trained_min=0.2,
    )


BEST = Check(
    kind="order",
    metric="stationarity",
    says="a lowest",
    key="algorithm",
    values=("a", "b"),
    at="last",
)


def word(runs, test=BEST, seeds=3, guard="") -> verdict.Verdict:
    c = claim([test], guard)
    outcome = units.Outcome(test, units.units(test, runs, c))
    return verdict.word([outcome], "stand-in", 20, None, seeds, 6, 6)


def test_an_ordering_in_every_seed_is_reproduced_in_some_partly_in_none_not():
    lead = lambda s: [run("a", s, [1, 0.5, 0.1]), run("b", s, [1, 0.6, 0.2])]  # noqa: E731
    trail = lambda s: [run("a", s, [1, 0.5, 0.3]), run("b", s, [1, 0.6, 0.2])]  # noqa: E731
    assert word([*lead(0), *lead(1), *lead(2)]).word == "reproduced on a stand-in"
    assert word([*lead(0), *lead(1), *trail(2)]).word == "partly"  # 2 of 3 seeds
    assert word([*trail(0), *trail(1), *trail(2)]).word == "not reproduced"
    got = units.units(BEST, [*lead(0), *lead(1), *trail(2)], claim([BEST]))
    assert [u.holds for u in got] == [True, True, False]


def test_an_ordering_from_round_r_on_only_says_so():
    every = Check(
        kind="order",
        metric="stationarity",
        says="a lowest throughout",
        key="algorithm",
        values=("a", "b"),
        at="every",
        from_round=5,
    )
    late = [
        r
        for s in range(3)
        for r in (run("a", s, [1, 0.7, 0.3, 0.1]), run("b", s, [1, 0.6, 0.4, 0.2]))
    ]
    v = word(late, every)
    assert v.word == "partly" and "holds from round 10 on only" in v.why
    early = [
        r
        for s in range(3)
        for r in (run("a", s, [1, 0.5, 0.3, 0.1]), run("b", s, [1, 0.6, 0.4, 0.2]))
    ]
    assert word(early, every).word == "reproduced on a stand-in"


def test_one_seed_missing_runs_and_nothing_trained_are_not_a_verdict():
    runs = [run("a", 0, [1, 0.5]), run("b", 0, [1, 0.6])]
    assert word(runs, seeds=1).word == "inconclusive"
    t = BEST
    outcome = units.Outcome(t, units.units(t, runs, claim([t])))
    assert verdict.word([outcome], "", 20, None, 3, 4, 6).word == "partly run (4 of 6 runs)"
    assert verdict.word([outcome], "", 10, 200, 3, 6, 6).word == "inconclusive"  # T = 10 of 200
    chance = [
        r
        for s in range(3)
        for r in (run("a", s, [1, 0.5], acc=0.1), run("b", s, [1, 0.6], acc=0.1))
    ]
    assert word(chance, guard="test_acc").word == "inconclusive"


def test_a_diverged_run_is_the_worst():
    runs = [r for s in range(3) for r in (run("a", s, [1, 0.5]), run("b", s, [1, float("nan")]))]
    assert word(runs).word == "reproduced on a stand-in"


def test_the_declarations_cover_every_figure_and_table():
    claims = sources.claims()
    assert {c.id for c in claims} == IDS
    for c in claims:
        assert c.quote and c.setting and (c.tests or not c.ran), c.id
        for t in c.tests:
            assert t.kind in declare.KINDS and t.says, c.id
    fig1 = declare.select(claims, ["fedcef-fig1"])[0]
    assert verdict.of(fig1, None).word == "not run"  # byte arithmetic trains nothing


@pytest.fixture
def copy(tmp_path):
    """A small copy of results/ (FedNMap Fig. 5's folders and the report) and the checkout's
    README.md and docs/reproducing.md."""
    for f in (*FIG5, "figures"):  # the runs and the figures the report links
        shutil.copytree(RESULTS / "reproduction" / f, tmp_path / "results" / "reproduction" / f)
    for c in declare.select(
        sources.claims(), ["fednmap-fig5b", "fednmap-fig5c"]
    ):  # the figures the report links
        shutil.copy(RESULTS / c.figure, tmp_path / "results" / c.figure)
    shutil.copy(RESULTS / "REPRODUCTION.md", tmp_path / "results")
    shutil.copy(RESULTS / "reproduction" / digests.FILE, tmp_path / "results" / "reproduction")
    shutil.copy(RESULTS / "reproduction" / history.FILE, tmp_path / "results" / "reproduction")
    (tmp_path / "docs").mkdir()
    shutil.copy(REPO / "README.md", tmp_path)
    shutil.copy(REPO / "docs" / "reproducing.md", tmp_path / "docs")
    return tmp_path


def check(where: Path, *claims) -> list[str]:
    return ["check", *claims, "--results", str(where / "results"), "--root", str(where)]


def test_check_passes_on_the_committed_runs_and_names_a_tampered_claim(copy, capsys):
    assert reproduce.main(check(copy, "fednmap-fig5c", "fednmap-fig5b")) == 0
    runs = results.load(
        [copy / "results" / "reproduction" / "fednmap_fig5"],
        where=["algorithm=fednmap_fig5/eta_0.05", "K=5"],
    )
    csv = runs[0].path / "metrics.csv"
    frame = pd.read_csv(csv)
    frame.loc[frame.index[-1], "stationarity"] *= 3
    frame.to_csv(csv, index=False)
    capsys.readouterr()
    assert reproduce.main(check(copy, "fednmap-fig5c", "fednmap-fig5b")) == 1
    out = capsys.readouterr().out.splitlines()
    changed = f"evidence fednmap_fig5/{runs[0].path.name}: metrics.csv edited"
    assert out and all("fednmap-fig5c" in line or changed in line for line in out)
    assert any("committed" in line and "recomputed" in line for line in out)
    assert any(changed in line for line in out)


def test_bad_input_is_one_line_and_exit_2(copy, tmp_path, capsys):
    assert reproduce.main(["plan", "fednmap-fig9"]) == 2
    assert "unknown claim 'fednmap-fig9'" in capsys.readouterr().err
    assert reproduce.main(check(copy, "fednmap-fig4")) == 2  # no folder of its runs
    assert "no results folder" in capsys.readouterr().err
    stray = next((RESULTS / "reproduction" / "fednmap_fig4").iterdir())
    shutil.copytree(stray, copy / "results" / "reproduction" / FIG5[0] / "stray")
    assert reproduce.main(check(copy, "fednmap-fig5c")) == 1  # a run of another setting: a finding
    out = capsys.readouterr().out
    assert (
        "fednmap-fig5c" in out
        and "stray: experiment=fednmap_fig4, the claim fixes experiment=fednmap_fig5" in out
    )


def test_list_shows_every_claim_and_plan_the_missing_seeds(copy, capsys):
    assert reproduce.main(["list", "--results", str(copy / "results")]) == 0
    out = capsys.readouterr().out
    header, *rows = out.splitlines()
    assert header.split()[:3] == ["claim", "figure", "or"]
    assert {line.split()[0] for line in rows if not line.startswith(" ")} == IDS
    # each claim, its one-line text and the reasons for its word
    assert len([line for line in rows if not line.startswith(" ")]) == len(IDS)
    assert out.split("fedcef-fig1")[1].splitlines()[2].strip() == "why: nothing of it ran here"
    assert "not run" in out.split("fedcef-fig1")[1].splitlines()[0]
    assert (
        reproduce.main(
            ["plan", "fednmap-fig5c", "--device", "cuda", "--results", str(copy / "results")]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "to the paper's 10 seeds on mnist5k: 28 runs, about" in out
    assert "seed=3,4,5,6,7,8,9" in out and "device=cuda" in out
    assert "fedrun -m experiment=fednmap_fig5 data.root=DIR algorithm=fednmap_fig5/eta_0.05" in out


def test_run_launches_the_planned_sweeps(copy, capsys):
    assert (
        reproduce.main(
            [
                "run",
                "fednmap-fig5b",
                "hydra.launcher.n_jobs=1",
                "--dry-run",
                "--results",
                str(copy / "results"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "hydra/launcher=joblib" in out and "hydra.launcher.n_jobs=2" not in out
    assert out.rstrip().endswith("hydra.launcher.n_jobs=1")
    assert reproduce.main(["run", "fedcef-fig1"]) == 2


def test_check_names_a_word_edited_by_hand_in_the_readme(copy, capsys):
    readme = copy / "README.md"
    lines = readme.read_text().splitlines(keepends=True)
    i = next(k for k, line in enumerate(lines) if line.startswith("| FedNMap Fig. 5 (c)"))
    lines[i] = lines[i].replace("**not reproduced**", "**reproduced on a stand-in**")
    readme.write_text("".join(lines))
    assert reproduce.main(check(copy, "fednmap-fig5c")) == 1
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and "fednmap-fig5c" in out[0] and "README.md" in out[0]


def test_run_makes_the_missing_runs_and_the_word_follows(tmp_path, monkeypatch, capsys):
    """End to end: a tiny claim (FedCanon Fig. 1's preset at T = 3) runs through fedrun -m into
    its folder, then reads as decided; a second `run` finds nothing missing."""
    tiny = declare.RunSet(
        data="breast_cancer",
        stands_for="A9A",
        preset="fedcanon_fig1_quick",
        overrides=("T=3", "algorithm.beta=0.02", "eval_every=1"),
        folders=("tiny",),
        into="tiny",
        fixed={"T": 3},
        grid={"algorithm.alpha": [0.1, 0.01]},
        seeds=(0, 1),
        T=3,
    )
    test = Check(
        kind="order",
        metric="stationarity",
        says="larger alpha lower",
        key="algorithm.alpha",
        values=(0.1, 0.01),
        mode="chain",
        at="last",
    )
    c = Claim(
        "tiny-fig1",
        "FedCanon",
        "Sec. IV-B, Fig. 1",
        "tiny",
        "q",
        "",
        "s",
        "",
        None,
        None,
        None,
        (tiny,),
        (test,),
    )
    monkeypatch.setattr(sources, "load", lambda found: [c])
    results = ["--results", str(tmp_path / "results")]
    assert reproduce.main(["list", *results]) == 0
    assert "not run" in capsys.readouterr().out
    assert (
        reproduce.main(["run", "tiny-fig1", "hydra/launcher=basic", *results]) == 0
    )  # in one process
    assert len(list((tmp_path / "results" / "reproduction" / "tiny").rglob("metrics.csv"))) == 4
    recorded = digests.read(tmp_path / "results" / "reproduction")  # run records what it made
    assert sum(p.startswith("tiny/") and p.endswith("/metrics.csv") for p in recorded) == 4
    assert digests.changes(tmp_path / "results" / "reproduction", [c]) == []
    capsys.readouterr()
    assert reproduce.main(["list", *results]) == 0
    assert "reproduced on a stand-in" in capsys.readouterr().out
    assert reproduce.main(["run", "tiny-fig1", *results]) == 0
    assert "nothing missing" in capsys.readouterr().out


def test_check_names_runs_the_declaration_leaves_out(copy, capsys):
    """A run added to a claim's folder at a seed it does not declare fails the check."""
    folder = copy / "results" / "reproduction" / FIG5[0]
    runs = results.load([folder], where=["algorithm=fednmap_fig5/eta_0.05", "K=5"])
    added = folder / "added"
    shutil.copytree(runs[0].path, added)
    for name in ("config.yaml", ".hydra/config.yaml"):  # a run at seed 3, its records agreeing
        config = added / name
        config.write_text(config.read_text().replace("\nseed: 0\n", "\nseed: 3\n"))
    overrides = added / ".hydra" / "overrides.yaml"
    overrides.write_text(overrides.read_text().replace("- seed=0", "- seed=3"))
    assert reproduce.main(check(copy, "fednmap-fig5c")) == 1
    out = capsys.readouterr().out
    assert "fednmap-fig5c: runs of seeds 3 in its folders are not declared" in out


def test_the_console_script_and_its_declarations_ship():
    import tomllib

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["fedrun-reproduce"] == "fedprox_cli.cli.commands:reproduce"
    assert "claims/*.yaml" in (REPO / "setup.py").read_text()


def test_an_ordering_in_every_trained_seed_with_one_that_did_not_train_is_partly():
    runs = [r for s in range(2) for r in (run("a", s, [1, 0.5]), run("b", s, [1, 0.6]))]
    runs += [run("a", 2, [1, 0.5], acc=0.1), run("b", 2, [1, 0.6], acc=0.1)]
    v = word(runs, guard="test_acc")
    assert (v.word, v.why) == ("partly", "1 unit without evidence")


# ------------------------------------------------------------ the evidence validated (claims/validate.py)


def _fig5c_run(copy, K=5, seed=0) -> Path:
    folders = [copy / "results" / "reproduction" / f for f in FIG5]
    return next(
        r.path
        for r in results.load(folders, where=["algorithm=fednmap_fig5/eta_0.05", f"K={K}"])
        if r.config["seed"] == seed
    )


def _findings(copy, capsys, *claims) -> list[str]:
    """check's lines on the copy; check must exit 1."""
    capsys.readouterr()
    assert reproduce.main(check(copy, *(claims or ("fednmap-fig5c",)))) == 1
    return capsys.readouterr().out.splitlines()


def _cut(path: Path, keep) -> None:
    lines = (path / "metrics.csv").read_text().splitlines(keepends=True)
    (path / "metrics.csv").write_text(
        "".join([lines[0], *[l for l in lines[1:] if keep(int(l.split(",")[0]))]])
    )


@pytest.mark.parametrize(
    "last", [100, 0, 195]
)  # T = 200: cut to round 100, to round 0, one row short
def test_check_names_a_finished_run_whose_rows_stop_before_T(copy, capsys, last):
    run_dir = _fig5c_run(copy, K=40)
    _cut(run_dir, lambda r: r <= last)
    out = _findings(copy, capsys)
    line = next(l for l in out if str(run_dir) in l)
    assert "status finished at T = 200, but no evaluation at round" in line
    assert any("committed" in l for l in out)  # the unit without it is left out, not the worst


def test_check_names_a_middle_row_deleted(copy, capsys):
    run_dir = _fig5c_run(copy, K=10, seed=1)
    _cut(run_dir, lambda r: r != 50)
    assert any(
        str(run_dir) in l and "no evaluation at round 50" in l for l in _findings(copy, capsys)
    )


def test_a_second_run_of_one_identity_is_named_never_picked(copy, capsys):
    run_dir = _fig5c_run(copy, K=20)
    twin = run_dir.parent / "copied" / "again"
    shutil.copytree(run_dir, twin)
    out = _findings(copy, capsys)
    assert any(str(twin) in l and str(run_dir) in l and "neither is used" in l for l in out)


@pytest.mark.parametrize("both", [False, True])
def test_a_step_size_edited_in_one_config_is_named_with_its_key(copy, capsys, both):
    run_dir = _fig5c_run(copy, K=10, seed=2)
    for f in [run_dir / "config.yaml", *([run_dir / ".hydra" / "config.yaml"] if both else [])]:
        text = f.read_text()
        assert "eta_a: 0.05" in text
        f.write_text(text.replace("eta_a: 0.05", "eta_a: 0.06"))
    line = next(l for l in _findings(copy, capsys) if str(run_dir) in l)
    assert "algorithm.eta_a" in line and ("0.06" in line)


def test_a_grid_key_edited_out_of_the_declaration_is_named_with_its_key(copy, capsys):
    """A run whose config.yaml was edited to a point the claim does not declare (K = 15) is not
    silently another figure's run: its Hydra record names the key."""
    run_dir = _fig5c_run(copy, K=10, seed=2)
    f = run_dir / "config.yaml"
    assert "\nK: 10\n" in f.read_text()
    f.write_text(f.read_text().replace("\nK: 10\n", "\nK: 15\n"))
    line = next(l for l in _findings(copy, capsys) if str(run_dir) in l)
    assert "config.yaml has K=15" in line


@pytest.mark.parametrize(
    "status,damage", [("finished", "inf"), ("diverged", ""), ("finished", "nan")]
)
def test_a_status_that_does_not_fit_the_rows_is_named(copy, capsys, status, damage):
    """A finished run holding a non-finite value; a 'diverged' one whose rows are all finite."""
    import json

    run_dir = _fig5c_run(copy, K=5, seed=1)
    summary = json.loads((run_dir / "summary.json").read_text())
    (run_dir / "summary.json").write_text(json.dumps({**summary, "status": status}))
    if damage:
        frame = pd.read_csv(run_dir / "metrics.csv")
        frame.loc[frame.index[3], "stationarity"] = float(damage)
        frame.to_csv(run_dir / "metrics.csv", index=False)
    line = next(l for l in _findings(copy, capsys) if str(run_dir) in l)
    assert f"status {status}" in line


@pytest.mark.parametrize("damage", ["column", "cell"])
def test_malformed_metrics_are_one_line_each(copy, capsys, damage):
    """A metric column the tests read deleted; a 2 MB cell (over the csv module's field limit)."""
    run_dir = _fig5c_run(copy, K=20, seed=2)
    frame = pd.read_csv(run_dir / "metrics.csv")
    if damage == "column":
        frame = frame.drop(columns=["stationarity"])
    else:
        frame["hoyer"] = frame["hoyer"].astype(object)
        frame.loc[frame.index[2], "hoyer"] = "1" * 2_000_000
    frame.to_csv(run_dir / "metrics.csv", index=False)
    line = next(l for l in _findings(copy, capsys) if str(run_dir) in l)
    assert (
        ("no column 'stationarity'" in line)
        if damage == "column"
        else ("field larger than field limit" in line)
    )
    assert len(line) < 600


@pytest.mark.parametrize("damage", ["swap", "edit", "delete"])
def test_a_figure_the_report_links_is_part_of_its_record(copy, capsys, damage):
    fig = copy / "results" / declare.select(sources.claims(), ["fednmap-fig5c"])[0].figure
    other = copy / "results" / declare.select(sources.claims(), ["fednmap-fig5b"])[0].figure
    if damage == "swap":
        shutil.copy(other, fig)
    elif damage == "edit":
        fig.write_bytes(fig.read_bytes() + b"\0")
    else:
        fig.unlink()
    out = _findings(copy, capsys)
    assert any("fednmap-fig5c" in l and "sha256" in l for l in out)


def test_run_refuses_an_override_that_contradicts_the_claim(copy, capsys):
    where = ["--results", str(copy / "results"), "--dry-run"]
    for bad in ("T=2", "dataset=fmnist", "K=3", "seed=7", "experiment=fednmap_fig3_4"):
        assert reproduce.main(["run", "fednmap-fig5c", bad, *where]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"the override {bad} contradicts" in err[0]
    assert reproduce.main(["run", "fednmap-fig5c", "T=200", "hydra.launcher.n_jobs=1", *where]) == 0


# ------------------------------------------------------------ roles, readings, open choices


def test_a_supporting_test_never_decides_the_word():
    lead = lambda s: [run("a", s, [1, 0.5, 0.1]), run("b", s, [1, 0.6, 0.2])]  # noqa: E731
    runs = [*lead(0), *lead(1), *lead(2)]
    fails = Check(
        kind="order",
        metric="stationarity",
        says="b lowest",
        key="algorithm",
        values=("b", "a"),
        at="last",
        role="supporting",
    )
    c = claim([BEST, fails])
    ev = evidence.Evidence(
        declare.RunSet(data="d", preset="p", stands_for="x"),
        6,
        6,
        seeds=(0, 1, 2),
        T=20,
        outcomes=[units.Outcome(t, units.units(t, runs, c)) for t in c.tests],
    )
    assert verdict.of(c, ev).word == "reproduced on a stand-in"  # the failing test is supporting
    primary = Check(**{**fails.__dict__, "role": "primary"})
    c2 = claim([BEST, primary])
    ev.outcomes = [units.Outcome(t, units.units(t, runs, c2)) for t in c2.tests]
    assert verdict.of(c2, ev).word == "partly"
    side = {"kind": "order", "metric": "test_acc", "says": "s", "role": "side"}
    mine = {"id": "c", "paper": "P", "where": "w", "short": "s", "quote": "q", "tests": [side]}
    with pytest.raises(UserError, match=r"f.yaml:1: claim c: tests\[0\].role: must be one of pri"):
        schema.check([mine], None, "f.yaml")


def test_an_ordering_at_equal_bytes_reads_each_run_within_the_smallest_total():
    def sent(method, per_round, acc):
        rounds = np.arange(5) * 5
        m = pd.DataFrame(
            {
                "round": rounds,
                "bytes_up": rounds * per_round,
                "bytes_down": 0 * rounds,
                "test_acc": np.asarray(acc, float),
            }
        )
        return Run(
            Path(f"/{method}/0"), {"choice:algorithm": method, "seed": 0, "T": 20}, m, "finished"
        )

    cheap = sent("a", 1, [0.1, 0.5, 0.6, 0.7, 0.8])  # sends 20 bytes in all
    dear = sent("b", 10, [0.1, 0.55, 0.9, 0.95, 0.99])  # 50 bytes by round 5, its 2nd evaluation
    t = Check(
        kind="order",
        metric="test_acc",
        says="a best",
        key="algorithm",
        values=("a", "b"),
        at="bytes",
    )
    got = units.units(t, [cheap, dear], claim([t]))
    assert [u.holds for u in got] == [True]  # 0.8 at 20 bytes against b's 0.1 at 0 bytes
    last = Check(**{**t.__dict__, "at": "last"})
    assert [u.holds for u in units.units(last, [cheap, dear], claim([last]))] == [False]


def test_a_level_test_reads_each_value_and_names_a_divergence():
    runs = [run("a", 0, [1, 0.5]), run("b", 0, [1, float("nan")])]
    t = Check(
        kind="level",
        metric="stationarity",
        says="below 0.6",
        key="algorithm",
        values=("a", "b"),
        at="last",
        holds={"max": 0.6},
    )
    got = units.units(t, runs, claim([t]))
    assert [u.holds for u in got] == [True, False]
    assert got[1].note == "first non-finite at round 5"


def test_open_choices_say_robust_or_what_the_word_depends_on():
    from fedprox_cli.claims import sensitivity

    rs = declare.RunSet(
        data="d",
        preset="p",
        grid={"a.alpha": [0.1, 0.05], "a.eta": [0.1, 0.3]},
        choices=("a.alpha", "a.eta"),
    )
    C = sensitivity.Choice
    at = lambda a, e, w, k=3: C((("a.alpha", a), ("a.eta", e)), w, k, 3)  # noqa: E731
    both = [
        at(0.1, 0.1, "reproduced"),
        at(0.1, 0.3, "not reproduced"),
        at(0.05, 0.1, "reproduced"),
        at(0.05, 0.3, "not reproduced"),
    ]
    assert "depends on eta: reproduced at 0.1, not reproduced at 0.3" in sensitivity.summary(
        None, rs, both
    )
    same = [at(a, e, "partly") for a in (0.1, 0.05) for e in (0.1, 0.3)]
    assert (
        "robust: **partly** at each of the 4 combinations (no run diverged)"
        in sensitivity.summary(None, rs, same)
    )
    same[1].diverged = 2
    assert (
        "(runs diverged: 2 of 3 at alpha = 0.1, eta = 0.3; none at the other 3 combinations)"
        in sensitivity.summary(None, rs, same)
    )
    some = [at(0.1, 0.3, "not reproduced"), at(0.1, 0.1, "not run", 0)]
    text = sensitivity.summary(None, rs, some)
    assert (
        "robust" not in text
        and "not settled" in text
        and "alpha = 0.1, eta = 0.1 (0 of 3 runs)" in text
    )


def test_a_fixed_key_moved_off_the_papers_value_is_supporting_never_deciding():
    from fedprox_cli.claims import sensitivity

    rs = declare.RunSet(
        data="d",
        preset="p",
        where={"algorithm": ["f"]},
        grid={"algorithm": ["f"], "a.alpha": [0.1, 0.05], "a.eta": [0.1, 0.3]},
        choices=("a.eta",),
    )
    assert sensitivity.combos(rs) == [
        (("a.eta", e), ("a.alpha", a)) for e in (0.1, 0.3) for a in (0.1, 0.05)
    ]
    assert [sensitivity.supporting(rs, v) for v in sensitivity.combos(rs)] == [
        False,
        True,
        False,
        True,
    ]
    C = sensitivity.Choice
    words = {0.1: "reproduced", 0.05: "not reproduced"}
    found = [
        C((("a.eta", e), ("a.alpha", a)), words[a], 3, 3, 0, a != 0.1)
        for e in (0.1, 0.3)
        for a in (0.1, 0.05)
    ]
    text = sensitivity.summary(None, rs, found)
    assert text.startswith("Open choices (eta): robust: **reproduced** at each of the 2")
    assert "supporting, off the paper's fixed values (shown, never deciding): not reproduced" in (
        text
    )


def test_a_listed_point_may_fix_a_key_the_others_lack():
    """FedCanon Fig. 2's SCAFFNEW is the point {algorithm: scaffnew, algorithm.p: 0.05}: its runs on
    another p are outside the declaration, and a method without p matches its point as declared."""
    rs = declare.RunSet(
        data="d",
        preset="p",
        points=({"algorithm": "a"}, {"algorithm": "b", "algorithm.p": 0.05}),
        grid={"partition": ["iid"]},
        seeds=(0,),
    )

    def one(method, p=None):
        config = {"choice:algorithm": method, "choice:partition": "iid", "seed": 0, "T": 20}
        return Run(
            Path(f"/{method}/{p}"),
            config | ({"algorithm.p": p} if p is not None else {}),
            pd.DataFrame({"round": [0]}),
            "finished",
        )

    runs = [one("a"), one("b", 0.05), one("b", 0.1), one("b")]
    got = [loading.point(r, runs, rs) for r in runs]
    assert got[2] is None and got[3] is None
    declared = {loading.declared_key(p) for p, _ in rs.declared()}
    assert {loading.declared_key(p) for p in got[:2]} == declared
