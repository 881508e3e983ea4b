"""scripts/plot.py and scripts/tables.py over run folders laid out as fedrun writes them
(config.yaml + metrics.csv + summary.json, numbers known), run as a user would run them (their
``__main__`` in the test process: conftest.script), plus one real tiny sweep on digits fed
through both scripts."""

from __future__ import annotations

import copy
import io
import json
import subprocess
import sys
from pathlib import Path

import in_process
import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import child_env, fedrun, script

from fedprox_cli.analysis import curves, groups, plotting, results, run_plots, stats, table
from fedprox_cli.cli import commands
from fedprox_cli.common import run_files

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import plot as plot_script  # noqa: E402
import tables as tables_script  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"
PROG = {"plot.py": "fedrun-plot", "tables.py": "fedrun-table"}
ENV = child_env(OMP_NUM_THREADS="1")
# config.yaml of `fedrun dataset=digits model=linear T=2 K=2 n=3 B=8 eval_every=1 device=cpu`
REAL = yaml.safe_load("""
dataset: {name: digits}
partition: {name: dirichlet, alpha: 0.5, seed: 0, min_size: 10}
model: {name: linear, init: default}
regularizer: {name: l1, lam: 1.0e-05}
compressor: {name: identity}
algorithm: {name: fedcanon, alpha: 0.2, beta: 0.02}
T: 2
K: 2
'n': 3
B: 8
seed: 0
device: cpu
dtype: float32
eval_every: 1
engine: auto
participation: 1.0
checkpoint_every: 10
keep_checkpoint: false
resume: true
data: {root: null}
oracle: {chunk: auto, eval_batch: 4096, memory_gb: 4}
metrics: {stationarity_step: null, train_samples: null}
""")


def fake_run(root: Path, name: str, config: dict, status: str = "finished", **columns) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "config.yaml").write_text(yaml.safe_dump(config))
    rounds = len(next(iter(columns.values())))
    base = {
        "round": np.arange(rounds) * 5,
        "time_s": np.arange(rounds, dtype=float),
        "bytes_up": np.arange(rounds) * 100,
        "bytes_down": np.arange(rounds) * 200,
    }
    pd.DataFrame({**base, **columns}).to_csv(d / "metrics.csv", index=False)
    summary = {"status": status} | (
        {"error": "objective is inf after round 10"} if status == "diverged" else {}
    )
    (d / "summary.json").write_text(json.dumps(summary))
    return d


def real(seed=0, **dotted) -> dict:
    """REAL with ``seed`` (and partition.seed) and dotted overrides (``algorithm.beta=0.05``)."""
    c = copy.deepcopy(REAL)
    for key, v in {"seed": seed, "partition.seed": seed, **dotted}.items():
        *path, last = key.split(".")
        node = c
        for p in path:
            node = node[p]
        node[last] = v
    return c


def in_percent(ax, which="y") -> bool:
    """Whether every labelled tick of ``ax``'s axis (major, and minor where labelled) reads 100
    times its value (a fraction's axis in percent), the major ones at one number of decimals."""
    ax.figure.canvas.draw()
    axis = ax.yaxis if which == "y" else ax.xaxis
    lo, hi = sorted(axis.get_view_interval())

    def shown(ticks) -> list[tuple[float, str]]:
        return [
            (t.get_loc(), t.label1.get_text())
            for t in ticks
            if t.label1.get_text() and lo <= t.get_loc() <= hi
        ]

    major, minor = shown(axis.get_major_ticks()), shown(axis.get_minor_ticks())
    decimals = {len(text.partition(".")[2]) for _, text in major}
    return (
        len(major + minor) > 1
        and len(decimals) <= 1
        and all(abs(float(text) - 100 * v) < 1e-6 for v, text in major + minor)
    )


def acc_run(root, name, acc, status="finished", **cfg):
    """A real-layout run whose test accuracy ends at ``acc`` (losses inf at the end if diverged)."""
    loss = [2.0, 1.0, np.inf if status == "diverged" else 0.5]
    return fake_run(
        root,
        name,
        real(**cfg),
        status,
        train_loss=loss,
        objective=loss,
        test_acc=[0.1, 0.5, acc],
        stationarity=[1.0, 0.5, 0.2],
    )


def cli(name: str, *args, cwd=None) -> subprocess.CompletedProcess:
    """``python scripts/<name> ARGS`` as a user runs it (in this process: :func:`conftest.script`)."""
    return script(name, *args, cwd=cwd, env=ENV)


def table_rows(stdout: str) -> list[list[str]]:
    return [
        [c.strip() for c in line.strip("|").split("|")]
        for line in stdout.splitlines()
        if line.startswith("|") and not line.startswith("|---")
    ]


# ------------------------------------------------------------------- grouping, from the CLI


def test_hyperparameter_sweep_with_one_seed_each_gives_one_cell_per_setting(tmp_path):
    """algorithm.beta=0.01,0.05,0.1 is three cells, not one pooled cell."""
    for beta, acc in ((0.01, 0.6), (0.05, 0.7), (0.1, 0.8)):
        acc_run(tmp_path, f"b{beta}", acc, **{"algorithm.beta": beta})
    p = cli("tables.py", tmp_path)
    assert p.returncode == 0, p.stderr
    assert table_rows(p.stdout) == [
        ["algorithm.beta", "FedCanon"],
        ["0.01", "60.0"],
        ["0.05", "70.0"],
        ["0.1", "80.0"],
    ]  # accuracy in percent; one seed: one decimal
    assert (
        "Test accuracy (%) at the last evaluation per " in p.stdout
        and "one run (seed) per cell" in p.stdout
    )
    p = cli("tables.py", tmp_path, "--column", "algorithm.beta")
    assert table_rows(p.stdout) == [["0.01", "0.05", "0.1"], ["60.0", "70.0", "**80.0**"]]


def test_an_alpha_beta_grid_keeps_every_cell(tmp_path):
    """fedcanon_fig1's grid with --column algorithm.beta: alpha rows x beta columns."""
    for i, alpha in enumerate((0.01, 0.1)):
        for j, beta in enumerate((0.005, 0.05)):
            acc_run(
                tmp_path,
                f"a{alpha}_b{beta}",
                0.5 + i / 10 + j / 100,
                **{"algorithm.alpha": alpha, "algorithm.beta": beta},
            )
    rows = table_rows(cli("tables.py", tmp_path, "--column", "algorithm.beta").stdout)
    assert rows == [
        ["algorithm.alpha", "0.005", "0.05"],
        ["0.01", "50.0", "**51.0**"],
        ["0.1", "60.0", "**61.0**"],
    ]


def test_three_seeds_give_mean_pm_std_with_n3_and_run_control_keys_do_not_split(tmp_path):
    for seed, acc in enumerate((0.70, 0.71, 0.72)):
        acc_run(
            tmp_path,
            f"s{seed}",
            acc,
            seed=seed,
            checkpoint_every=seed,
            resume=bool(seed),
            **{"data.root": f"/data{seed}", "oracle.chunk": seed + 1},
        )
    p = cli("tables.py", tmp_path)
    assert table_rows(p.stdout) == [
        ["FedCanon"],
        [f"71.0 ± {np.std([0, 1, 2], ddof=1):.1f}"],  # in percent, std 1.0: one decimal
    ]
    assert "over 3 seeds per cell" in p.stdout


def test_eval_every_splits_only_when_it_changes_the_compared_value(tmp_path):
    for seed, every in enumerate((1, 2)):
        acc_run(tmp_path, f"s{seed}", 0.7, seed=seed, eval_every=every)
    assert len(table_rows(cli("tables.py", tmp_path).stdout)) == 2  # one cell, n=2
    assert "2 seeds per cell" in cli("tables.py", tmp_path).stdout
    tail = table_rows(cli("tables.py", tmp_path, "--final", "tail").stdout)  # tail: cadence matters
    assert tail[0] == ["eval_every", "FedCanon"] and len(tail) == 3


def test_a_diverged_run_is_reported_not_averaged(tmp_path):
    for seed, acc in enumerate((0.70, 0.72)):
        acc_run(tmp_path, f"ok{seed}", acc, seed=seed)
    bad = acc_run(tmp_path, "div", 0.1, "diverged", seed=2)
    lone = acc_run(tmp_path, "div_beta", 0.1, "diverged", **{"algorithm.beta": 1000.0})
    p = cli("tables.py", tmp_path)
    assert p.returncode == 0, p.stderr
    assert table_rows(p.stdout)[1:] == [
        ["0.02", f"71.0 ± {np.std([70, 72], ddof=1):.1f} (2 seeds; diverged 1 of 3)"],
        ["1000", "diverged (1 of 1)"],
    ]
    lines = p.stderr.splitlines()
    assert (
        f"fedrun-table: left out of the mean: {bad} (diverged: objective is inf after round 10)"
        in lines
    )
    assert sum(str(lone) in line for line in lines) == 1


def test_unfinished_and_non_finite_runs_are_left_out_and_counted(tmp_path):
    acc_run(tmp_path, "ok", 0.7)
    acc_run(tmp_path, "running", 0.2, "running", seed=1)
    fake_run(
        tmp_path,
        "nan",
        real(seed=2),
        train_loss=[1.0],
        objective=[1.0],
        test_acc=[np.nan],
        stationarity=[1.0],
    )
    p = cli("tables.py", tmp_path)
    # its summary says running but no process holds the folder's lock: it is reported dead
    assert table_rows(p.stdout)[1] == ["70.0 (1 seed; dead 1, non-finite 1 of 3)"]
    assert len([line for line in p.stderr.splitlines() if "left out of the mean" in line]) == 2


def test_a_broken_run_beside_good_ones_is_skipped_with_one_line(tmp_path):
    for seed in range(2):
        acc_run(tmp_path, f"ok{seed}", 0.7, seed=seed)
    empty = acc_run(tmp_path, "empty", 0.7, seed=3)
    (empty / "metrics.csv").write_text("")
    cut = acc_run(tmp_path, "cut", 0.7, seed=4)
    (cut / "metrics.csv").write_text((cut / "metrics.csv").read_text()[:-20])
    short = acc_run(tmp_path, "short_row", 0.7, seed=5)
    text = (short / "metrics.csv").read_text().splitlines()
    (short / "metrics.csv").write_text("\n".join(text[:-1] + [text[-1].rsplit(",", 3)[0]]) + "\n")
    unreadable = acc_run(tmp_path, "badyaml", 0.7, seed=6)
    (unreadable / "config.yaml").write_text("algorithm: {name: [fedcanon\n")
    no_acc = fake_run(
        tmp_path, "no_acc", real(seed=7), train_loss=[1.0], objective=[1.0], stationarity=[1.0]
    )
    for script in ("tables.py", "plot.py"):
        args = ["--out", tmp_path / "fig.png"] if script == "plot.py" else []
        p = cli(script, tmp_path, *args)
        assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
        assert ("mean of 2 seeds" if script == "plot.py" else "2 seeds per cell") in p.stdout
        for run, why in (
            (empty, "metrics.csv is empty"),
            (cut, "metrics.csv is cut"),
            (short, "metrics.csv is cut (line 4 has 5 of 8 fields)"),
            (unreadable, "config.yaml is unreadable"),
            (no_acc, "metrics.csv has no column 'test_acc'"),
        ):
            (line,) = [x for x in p.stderr.splitlines() if str(run) + ":" in x]
            assert line.startswith(f"{PROG[script]}: skipped {run}: {run}/{why}")  # full path


def test_no_runs_and_bad_input_are_one_line_and_exit_2(tmp_path):
    for script, args in (
        ("tables.py", [tmp_path]),
        ("plot.py", [tmp_path]),
        ("tables.py", [tmp_path / "nope"]),
    ):
        p = cli(script, *args)
        assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p.stderr
        assert p.stderr.startswith(f"{PROG[script]}: error: no ")
    acc_run(tmp_path, "ok", 0.7)
    p = cli("plot.py", tmp_path, "--y", "no_such_metric")
    assert p.returncode == 2 and "no column 'no_such_metric'" in p.stderr
    assert len(p.stderr.splitlines()) == 1


# ---------------------------------------------------------------------------------- figures


def test_out_honours_the_extension_and_creates_missing_folders(tmp_path):
    for n in (10, 20, 40):
        acc_run(tmp_path / "runs", f"n{n}", 0.7, n=n)
    checks = {
        "pdf": lambda b: b.startswith(b"%PDF-"),
        "png": lambda b: b.startswith(PNG),
        "svg": lambda b: b.lstrip().startswith(b"<?xml") and b"<svg" in b[:500],
    }
    for ext, is_format in checks.items():
        out = tmp_path / "new" / ext / f"figure.{ext}"
        p = cli("plot.py", tmp_path / "runs", "--out", out)
        assert p.returncode == 0, p.stderr
        assert is_format(out.read_bytes())
    out = tmp_path / "more" / "slope.svg"
    p = cli("plot.py", tmp_path / "runs", "--slope", "n", "--out", out)
    assert p.returncode == 0, p.stderr
    assert checks["svg"](out.read_bytes())
    p = cli(
        "plot.py", tmp_path / "runs", "--out", tmp_path / "runs" / "n10" / "metrics.csv" / "x.png"
    )
    assert p.returncode == 2 and "Traceback" not in p.stderr  # a file where a folder must be
    assert [x for x in p.stderr.splitlines() if "error" in x] == [
        f"fedrun-plot: error: File exists: {tmp_path / 'runs' / 'n10' / 'metrics.csv'}"
    ]


@pytest.fixture
def figures(monkeypatch):
    """The figures plot.py draws, kept open instead of closed after saving."""
    kept = []

    def keep(fig, path, caption="", **_):
        fig.caption = caption
        kept.append(fig)
        Path(path).write_bytes(b"")

    monkeypatch.setattr(curves, "save_figure", keep)
    monkeypatch.setattr(plotting, "save_figure", keep)
    monkeypatch.setattr(run_plots, "save_figure", keep)
    return kept


def _lines(fig):
    return [line for ax in fig.axes for line in ax.get_lines()]


def test_diverged_run_is_drawn_and_marked_where_it_diverged(tmp_path, figures, capsys):
    acc_run(tmp_path, "ok", 0.7)
    fake_run(
        tmp_path,
        "div",
        real(seed=1, **{"algorithm.beta": 1.0}),
        "diverged",
        train_loss=[2.0, 3.0, 50.0, np.inf],
        objective=[2.0, 3.0, 50.0, np.inf],
        test_acc=[0.1, 0.2, 0.3, 0.1],
        stationarity=[1.0, 2.0, 9.0, np.nan],
    )
    assert (
        plot_script.main([str(tmp_path), "--y", "train_loss", "--out", str(tmp_path / "f.png")])
        == 0
    )
    out, err = capsys.readouterr()
    assert "β = 1: diverged (1 run, not in the mean; marked at its end)" in out
    assert f"left out of the mean: {tmp_path / 'div'}" in err
    (fig,) = figures
    xs = [tuple(line.get_xydata()[0]) for line in _lines(fig) if line.get_marker() == "x"]
    assert xs == [(10.0, 50.0)]  # round 10, the last finite loss


def test_coinciding_curves_stay_distinguishable_and_are_named(tmp_path, figures, capsys):
    for beta in (0.01, 0.02):
        acc_run(tmp_path, f"b{beta}", 0.7, **{"algorithm.beta": beta})
    assert plot_script.main([str(tmp_path), "--out", str(tmp_path / "f.png")]) == 0
    out, err = capsys.readouterr()
    assert "β = 0.02 (identical to β = 0.01)" in out
    assert "identical to float precision" in err
    (fig,) = figures
    a, b = _lines(fig)
    assert (a.get_linestyle(), a.get_marker()) != (b.get_linestyle(), b.get_marker())


def test_one_legend_below_axes_caption_in_metadata_integer_round_ticks(tmp_path, figures):
    for i, beta in enumerate((0.01, 0.02)):
        for seed in range(2):
            fake_run(
                tmp_path,
                f"b{beta}_{seed}",
                real(seed, **{"algorithm.beta": beta}),
                train_loss=[1.0] * 3,
                objective=[1.0] * 3,
                test_acc=[0.1, 0.2, 0.3 + i / 10],
                stationarity=[1.0, 0.3, 0.1 + i / 100],
            )
    assert (
        plot_script.main(
            [
                str(tmp_path),
                "--y",
                "stationarity",
                "--panels",
                "partition.name",
                "--out",
                str(tmp_path / "f.png"),
            ]
        )
        == 0
    )
    (fig,) = figures
    assert len(fig.legends) == 1 and all(ax.get_legend() is None for ax in fig.axes)
    r = fig.canvas.get_renderer()
    below = min(ax.get_tightbbox(r).y0 for ax in fig.axes if ax.get_visible())
    assert fig.legends[0].get_window_extent(r).y1 <= below + 1  # hangs below the axes
    assert (
        fig.texts[0].get_window_extent(r).y1 <= fig.legends[0].get_window_extent(r).y0 + 1
    )  # caption below it
    caption = fig.caption
    assert fig._suptitle is None and [t.get_text().replace("\n", " ") for t in fig.texts] == [
        caption
    ]
    assert (
        "FedCanon (α = 0.2)" in caption
        and "digits" in caption
        and "n = 3 clients, K = 2 local steps, B = 8" in caption
    )
    assert "seed" not in caption.split(". Lines")[0]
    ax = fig.axes[0]
    assert all(float(t).is_integer() for t in ax.get_xticks())
    assert ax.get_yscale() == "log"
    assert {t.get_text() for t in ax.get_yticklabels(minor=True) if t.get_text()} >= {"0.2", "0.5"}


def test_figure_labels_limits_units_title_and_honest_n(tmp_path, figures, capsys):
    """--label renames legend entries (by value, by key, whole labels from --labels YAML); x stops
    at the last round; accuracy in percent as the tables show it (the data: metrics.csv's
    fractions); each entry has its own n."""
    for seed in range(3):
        acc_run(tmp_path, f"c{seed}", 0.7, seed=seed)
    for seed in range(2):
        acc_run(tmp_path, f"a{seed}", 0.6, seed=seed, **{"algorithm.name": "fedavg"})
    acc_run(tmp_path, "b", 0.5, **{"algorithm.beta": 0.5})
    names = tmp_path / "labels.yaml"
    names.write_text("'FedCanon (β = 0.5)': FedCanon (β = 0.5)\n")
    assert (
        plot_script.main(
            [
                str(tmp_path),
                "--label",
                "fedavg=FedAvg",
                "--label",
                "algorithm.beta=β",
                "--labels",
                str(names),
                "--title",
                "Digits",
                "--out",
                str(tmp_path / "f.pdf"),
            ]
        )
        == 0
    )
    (fig,) = figures
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    # a --label changes only what it names: FedCanon's entries keep their printed name and symbol;
    # FedAvg's beta is its own class's (not FedCanon's): in the caption, with FedAvg
    assert legend == [
        "FedAvg (2 seeds)",
        "FedCanon (β = 0.02) (3 seeds)",
        "FedCanon (β = 0.5) (1 seed)",
    ]
    ax = fig.axes[0]
    assert ax.get_xlim() == (0.0, 10.0)  # rounds 0, 5, 10: no tick past T
    assert (
        max(ax.get_xticks()[(ax.get_xticks() >= ax.get_xlim()[0]) & (ax.get_xticks() <= 10)]) == 10
    )
    assert ax.get_ylabel() == "test accuracy (%)" and ax.get_ylim()[1] < 1.0
    assert in_percent(ax)
    assert fig._suptitle.get_text() == "Digits"
    out = capsys.readouterr().out
    assert (
        "caption: FedAvg (α = 0.2, β = 0.02) and FedCanon (α = 0.2) on digits" in out
        and "n=" not in "".join(legend)
    )


def test_styles_sizes_fonts_and_vector_output(tmp_path):
    for seed in range(2):
        acc_run(tmp_path / "runs", f"s{seed}", 0.7, seed=seed)
    svg = tmp_path / "f.svg"
    p = cli("plot.py", tmp_path / "runs", "--style", "paper", "--out", svg)
    assert p.returncode == 0, p.stderr
    text = svg.read_text()
    assert "<dc:description>" in text and "FedCanon (α = 0.2" in text  # the caption, as metadata
    width = float(text.split('width="', 1)[1].split("pt", 1)[0])
    assert (
        200 < width <= 3.4 * 72 + 2 * 0.03 * 72 + 1
    )  # the paper style's panel, 3.4 in, plus the crop's margin
    assert "DejaVu Serif" in text  # its serif font, kept as text (svg.fonttype: none)
    png = tmp_path / "f.png"
    p = cli("plot.py", tmp_path / "runs", "--size", "4,3", "--font-size", "14", "--out", png)
    assert p.returncode == 0, p.stderr
    from PIL import Image

    img = Image.open(png)
    assert "FedCanon (α = 0.2, β = 0.02)" in img.info["Description"]
    pdf = tmp_path / "f.pdf"
    assert cli("plot.py", tmp_path / "runs", "--style", "ggplot", "--out", pdf).returncode == 0
    assert pdf.read_bytes().startswith(b"%PDF-")
    for bad, why in (
        (["--style", "nope"], "unknown style 'nope'"),
        (["--size", "4"], "--size takes W,H"),
        (["--label", "x"], "--label takes KEY=TEXT"),
    ):
        p = cli("plot.py", tmp_path / "runs", *bad, "--out", png)
        assert p.returncode == 2 and why in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr


def test_commands_name_themselves_in_help():
    for cmd, prog, words in (
        ("plot", "fedrun-plot", "--label"),
        ("table", "fedrun-table", "--preset"),
    ):
        p = in_process.run(
            lambda _: getattr(commands, cmd)(), "-c", ["--help"], Path.cwd(), ENV
        )  # python -c
        assert p.returncode == 0 and p.stdout.startswith(f"usage: {prog} ") and words in p.stdout
        assert "plot.py" not in p.stdout and "tables.py" not in p.stdout


def test_slope_has_r2_and_a_seed_interval(tmp_path):
    """Per seed a power law of its own: the interval is over the per-seed slopes."""
    for seed, b in enumerate((-1.4, -1.5, -1.6)):
        for n in (10, 20, 50, 100):
            fake_run(
                tmp_path,
                f"n{n}_s{seed}",
                real(seed, n=n),
                train_loss=[1.0, 1.0],
                objective=[1.0, 1.0],
                test_acc=[0.1, 0.2],
                stationarity=[1.0, 3.0 * n**b],
            )
    p = cli("tables.py", tmp_path, "--slope", "n")
    (head, row) = table_rows(p.stdout)
    assert head[:4] == [
        "group",
        "slope of log final stationarity vs log n",
        "R²",
        "per-seed slopes",
    ]
    assert row[3] == "-1.500 ± 0.100 (min -1.600, max -1.400; 3 seeds)"
    assert 0.99 < float(row[2]) <= 1.0
    p = cli("plot.py", tmp_path, "--slope", "n", "--out", tmp_path / "s.png")
    assert "per seed -1.500 ± 0.100" in p.stdout and "R² " in p.stdout
    p = cli("plot.py", tmp_path, "--slope", "n", "--y", "test_acc", "--out", tmp_path / "a.png")
    assert "slope of log final test accuracy vs log n" in p.stdout, p.stdout  # words, not test_acc


def test_final_tail_averages_the_last_tenth_of_evaluations(tmp_path):
    acc = np.r_[np.zeros(18), 0.6, 0.8]  # 20 evaluations: tail = mean of the last 2
    fake_run(
        tmp_path,
        "r",
        real(),
        train_loss=np.ones(20),
        objective=np.ones(20),
        test_acc=acc,
        stationarity=np.ones(20),
    )
    assert table_rows(cli("tables.py", tmp_path).stdout)[1] == ["80.0"]
    assert table_rows(cli("tables.py", tmp_path, "--final", "tail").stdout)[1] == ["70.0"]


# ------------------------------------------------------------------------ one run's figure


def test_run_title_names_steps_regularizer_data_and_partition():
    want = (
        "fedcanon (alpha=0.2, beta=0.02) · reg. l1 (lam=1e-05)\n"
        "digits · linear (init=default) · n=3 clients, K=2, B=8, T=2 · partition dirichlet "
        "(alpha=0.5, min_size=10)"
    )
    assert plotting.run_title(REAL) == want
    assert "compressor topk (r=0.1)" in plotting.run_title(
        real(**{"compressor.name": "topk", "compressor.r": 0.1})
    )


def test_metrics_png_of_a_diverged_run(tmp_path, figures):
    d = fake_run(
        tmp_path,
        "div",
        real(),
        "diverged",
        train_loss=[2.0, 1.0, np.inf],
        objective=[2.1, 1.1, np.inf],
        test_acc=[0.1, 0.4, 0.1],
        stationarity=[1.0, 0.1, np.nan],
    )
    run_plots.plot_run(d, d / "metrics.png", title="t")
    (fig,) = figures
    loss, acc, stat = fig.axes
    assert [ax.get_ylabel() for ax in fig.axes] == [
        "loss",
        "test accuracy (%)",
        "stationarity ||G_s(x)||²",
    ]
    assert in_percent(acc) and not in_percent(stat)
    assert loss.get_yscale() == stat.get_yscale() == "log"
    marks = [tuple(line.get_xydata()[0]) for line in loss.get_lines() if line.get_marker() == "x"]
    assert marks == [(5.0, 1.0), (5.0, 1.1)]
    assert any("diverged (round 10" in t.get_text() for t in fig.legends[0].get_texts())


def test_metrics_png_is_written(tmp_path):
    d = acc_run(tmp_path, "div", 0.2, "diverged")
    run_plots.plot_run(d, d / "metrics.png", title=plotting.run_title(REAL))
    assert (d / "metrics.png").read_bytes()[:8] == PNG


# ------------------------------------------------------------ grouping and tables, in process


def cfg(alg="fedcanon", seed=0, K=10, alpha=0.1, part="iid", **top):
    p = {"name": part, "seed": seed} | ({"alpha": alpha} if part == "dirichlet" else {})
    return {
        "algorithm": {"name": alg, "alpha": 0.4 if alg == "fedcanon" else 1.0},
        "partition": p,
        "K": K,
        "seed": seed,
        **top,
    }


@pytest.fixture
def sweep(tmp_path):
    """2 algorithms x 2 partitions x 3 seeds; test_acc = base + seed / 100 at every round."""
    base = {
        ("fedcanon", "iid"): 0.8,
        ("fedavg", "iid"): 0.7,
        ("fedcanon", "dirichlet"): 0.6,
        ("fedavg", "dirichlet"): 0.5,
    }
    for i, ((alg, part), b) in enumerate(base.items()):
        for seed in range(3):
            fake_run(
                tmp_path / "sweep",
                f"{i}_{seed}",
                cfg(alg, seed, part=part),
                test_acc=[0.1, b + seed / 100],
                stationarity=[1.0, 0.1],
            )
    return tmp_path / "sweep"


def test_groups_differ_only_in_seeds_and_are_labelled_by_what_tells_them_apart(sweep):
    found = groups.group(results.load([sweep]))
    assert sorted(g.label for g in found) == [
        "algorithm=fedavg, partition=dirichlet",
        "algorithm=fedavg, partition=iid",
        "algorithm=fedcanon, partition=dirichlet",
        "algorithm=fedcanon, partition=iid",
    ]
    assert all(len(g.runs) == 3 for g in found)  # seed and partition.seed are replicates
    # algorithm.alpha differs too, but is fixed by algorithm.name; partition.alpha splits nothing
    # more than partition.name does: neither is in the labels


def test_a_key_joins_the_label_when_it_splits_groups(sweep, tmp_path):
    fake_run(
        sweep,
        "dir_0.5",
        cfg("fedavg", part="dirichlet", alpha=0.5),
        test_acc=[0.1, 0.2],
        stationarity=[1.0, 0.1],
    )
    labels = {g.label for g in groups.group(results.load([sweep]))}
    assert {
        "algorithm=fedavg, partition=dirichlet, partition.alpha=0.1",
        "algorithm=fedavg, partition=dirichlet, partition.alpha=0.5",
        "algorithm=fedavg, partition=iid",
    } <= labels


def test_band_is_mean_and_std_over_seeds(sweep):
    g = next(
        g
        for g in groups.group(results.load([sweep]))
        if g.label == "algorithm=fedavg, partition=iid"
    )
    b = stats.band(g.runs, "bytes", "test_acc")
    vals = [0.70, 0.71, 0.72]
    assert b["mean"].tolist() == pytest.approx([0.1, np.mean(vals)])
    assert b["std"].tolist() == pytest.approx([0.0, np.std(vals, ddof=1)])
    assert b["x"].tolist() == [0, 300]  # bytes = up + down


def test_accuracy_table_numbers_and_bold_best(sweep):
    text = table.render(results.load([sweep]), table.preset("table6"))
    lines = text.splitlines()
    assert lines[0] == "| partition | FedCanon | FedAvg |"
    sd = np.std([0, 1, 2], ddof=1)  # in percent: 1.0, two digits at one decimal
    assert f"| iid | **81.0 ± {sd:.1f}** | 71.0 ± {sd:.1f} |" in lines
    assert f"| dirichlet | **61.0 ± {sd:.1f}** | 51.0 ± {sd:.1f} |" in lines
    assert lines[-1].startswith("FedCanon and FedAvg, K = 10 local steps. ")  # the shared setting
    assert (
        "Test accuracy (%) at the last evaluation per partition and algorithm: mean ± std over 3 "
        "seeds per cell. Bold: the best" in lines[-1]
    )


def test_time_table_ratios(tmp_path):
    times = {
        ("fedcanon", 10): [10, 12],
        ("fedmid", 10): [33, 33],
        ("fedcanon", 20): [22, 22],
        ("fedmid", 20): [88, 88],
    }
    for (alg, K), ts in times.items():
        for seed, t in enumerate(ts):
            fake_run(
                tmp_path,
                f"{alg}{K}_{seed}",
                cfg(alg, seed, K=K),
                test_acc=[0.1, 0.2],
                time_s=[0.0, t],
            )
    lines = table.render(results.load([tmp_path]), table.preset("table5")).splitlines()
    assert lines[0] == "| K | FedCanon | FedMiD |"
    assert lines[2] == (
        f"| 10 | **11.0 ± {np.std([10, 12], ddof=1):.1f}** | 33.0 ± 0.0 [3.00× fedcanon] |"
    )
    assert lines[3] == (
        "| 20 | **22.0 ± 0.0 [2.00× prev. K]** | 88.0 ± 0.0 [4.00× fedcanon; 2.67× prev. K] |"
    )


def test_table_formats_metrics_rows_precision_and_bold_per_column(sweep, tmp_path):
    """Any metrics and grouping keys by name; Markdown, LaTeX (booktabs) and CSV of one table."""
    runs = results.load([sweep])
    spec = table.Spec(
        metrics=["test_acc", "stationarity"],
        column=None,
        rows=["algorithm.name", "partition.name"],
        precision=2,
    )
    md = table.render(runs, spec).splitlines()
    assert md[0] == "| algorithm | partition | test_acc (%) | stationarity |"
    body = {tuple(r[:2]): r[2:] for r in table_rows("\n".join(md))[1:]}
    assert len(body) == 4
    sd = np.std([0, 0.01, 0.02], ddof=1)  # of the fractions; 100 x in percent
    assert body[("FedCanon", "iid")] == [
        f"**81.00 ± {100 * sd:.2f}**",
        "0.10 ± 0.00",
    ]  # best per column, beyond the std; --precision 2: decimals as shown
    assert body[("FedAvg", "dirichlet")] == [f"51.00 ± {100 * sd:.2f}", "0.10 ± 0.00"]  # a tie
    assert sum(v[0].startswith("**") for v in body.values()) == 1
    tex = table.render(runs, spec, "latex")
    assert "\\toprule" in tex and "\\midrule" in tex and "\\bottomrule" in tex
    assert f"\\textbf{{81.00 $\\pm$ {100 * sd:.2f}}}" in tex
    assert tex.count("\\textbf") == 1
    assert (
        "Test accuracy (\\%) and stationarity at the last evaluation per algorithm and partition: "
        "mean $\\pm$ std over 3 seeds per cell." in tex
    )
    assert "\\label{tab:test_acc-stationarity}" in tex  # \ref-able, as a paper takes it
    assert (
        tex.startswith("% needs \\usepackage{booktabs}") and tex.count(" \\\\\n") == 5
    )  # one header row
    csv = pd.read_csv(io.StringIO(table.render(runs, spec, "csv")))
    assert list(csv.columns) == ["algorithm", "partition", *table.STATS]
    assert len(csv) == 8 and set(csv["metric:seeds"]) == {3}
    row = csv[
        (csv.algorithm == "fedcanon")
        & (csv.partition == "iid")
        & (csv["metric:name"] == "test_acc")
    ]
    assert row["metric:mean"].item() == pytest.approx(0.81)
    assert row["metric:std"].item() == pytest.approx(sd)
    # the same from the command line, format by --out's suffix
    for ext, head in (
        (".tex", "% needs \\usepackage{booktabs}"),
        (".csv", "algorithm,partition,metric:name"),
        (".md", "| algorithm"),
    ):
        out = tmp_path / f"t{ext}"
        p = cli(
            "tables.py",
            sweep,
            "--metric",
            "test_acc",
            "--metric",
            "stationarity",
            "--column",
            "none",
            "--rows",
            "algorithm.name",
            "partition.name",
            "--precision",
            "2",
            "--out",
            out,
        )
        assert p.returncode == 0, p.stderr
        assert out.read_text().startswith(head)
    p = cli("tables.py", sweep, "--rows", "algorithm.name", "--column", "none")
    assert p.returncode == 2 and "leave runs that differ in partition in one cell" in p.stderr


def test_uneven_cells_say_their_n(sweep):
    (sweep / "0_2" / "summary.json").write_text('{"status": "diverged"}')
    text = table.render(results.load([sweep]), table.preset("table6"))
    assert "(2 seeds; diverged 1 of 3)" in text and "(3 seeds)" in text
    assert "over the seeds in each cell" in text


def test_slope_recovers_a_power_law(tmp_path):
    for n in (10, 20, 50, 100):
        for seed in range(2):
            fake_run(
                tmp_path,
                f"{n}_{seed}",
                cfg(seed=seed, n=n),
                test_acc=[0.1, 0.2],
                stationarity=[1.0, 3.0 * n**-1.436],
            )
    (fit,) = stats.slope(results.load([tmp_path]), "n")
    assert fit["slope"] == pytest.approx(-1.436)
    assert tables_script.main([str(tmp_path), "--slope", "n"]) == 0


def test_slope_over_K_ignores_steps_tied_to_K(tmp_path):
    """FedNMap Fig. 4 sweeps K with eta_a = 1/K: one fit over K, not one group per step."""
    for K in (5, 10, 20, 40):
        c = cfg(K=K)
        c["algorithm"]["eta_a"] = 1 / K
        fake_run(tmp_path, f"K{K}", c, test_acc=[0.1, 0.2], stationarity=[1.0, 2.0 * K**-1.181])
    (fit,) = stats.slope(results.load([tmp_path]), "K")
    assert fit["slope"] == pytest.approx(-1.181)


def test_where_filters_and_rejects(sweep, capsys):
    runs = results.load([sweep], ["algorithm.name=fedavg", "partition.alpha=0.1"])
    assert len(runs) == 3
    assert (
        len(results.load([sweep], ["algorithm.name=fedavg,fedcanon", "partition.alpha=0.1"])) == 6
    )
    assert plot_script.main([str(sweep), "--where", "algorithm.name=nope"]) == 2
    assert "no run has algorithm.name=nope" in capsys.readouterr().err


def test_plot_script_writes_pngs(sweep, tmp_path, capsys):
    out = tmp_path / "acc.png"
    assert plot_script.main([str(sweep), "--x", "bytes", "--y", "test_acc", "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == PNG
    assert plot_script.main([str(sweep), "--y", "stationarity"]) == 0
    assert (sweep / "plot_stationarity_vs_round.png").read_bytes()[:8] == PNG
    assert plot_script.main([str(sweep), "--y", "no_such_metric"]) == 2
    assert "no column 'no_such_metric'" in capsys.readouterr().err


def test_panels_split_runs_by_a_key(sweep, tmp_path):
    parts = groups.split(results.load([sweep]), ["partition.name"])
    assert list(parts) == ["partition=dirichlet", "partition=iid"]
    assert all(len(rs) == 6 for rs in parts.values())
    out = tmp_path / "panels.png"
    assert plot_script.main([str(sweep), "--panels", "partition.name", "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == PNG


def test_partition_plot_reports_a_missing_plotter(sweep, monkeypatch, capsys):
    monkeypatch.delattr(run_plots, "plot_partition", raising=False)
    assert plot_script.main(["--partition", str(sweep / "0_0")]) == 2
    assert "needs fedprox_cli.analysis.run_plots.plot_partition" in capsys.readouterr().err


def test_real_sweep_through_both_scripts(tmp_path):
    """A preset's sweep (FedCanon Fig. 2's quick variant, shrunk to digits and 2 rounds) lands in
    results/sweeps/<preset>/ and goes through plot.py and tables.py."""
    p = fedrun(
        "-m",
        "experiment=fedcanon_fig2_quick",
        "dataset=digits",
        "algorithm=fedcanon_fig2/fedcanon,fedcanon_fig2/fedavg",
        "partition=iid",
        "seed=0,1",
        "T=2",
        "K=2",
        "n=3",
        "B=8",
        "eval_every=1",
        "device=cpu",
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    (sweep_dir,) = (tmp_path / "results" / "sweeps" / "fedcanon_fig2_quick").iterdir()
    assert len(results.find_runs([sweep_dir])) == 4
    out = tmp_path / "plot.png"
    for cmd, check in (
        (["scripts/plot.py", str(sweep_dir), "--out", str(out)], "FedAvg (α = 1, β = 0.02) and"),
        (
            ["scripts/plot.py", str(sweep_dir), "--panels", "algorithm", "--out", str(out)],
            "FedCanon (α = 0.04",
        ),  # a Hydra choice as panel key; every difference named
        (["scripts/tables.py", str(sweep_dir)], "| FedCanon | FedAvg |"),
        (["scripts/tables.py", str(sweep_dir)], "2 seeds per cell"),
    ):
        p = script(cmd[0].removeprefix("scripts/"), *cmd[1:], cwd=tmp_path)
        assert p.returncode == 0 and check in p.stdout, p.stderr
    assert out.read_bytes()[:8] == PNG


def test_a_difference_fixed_by_the_column_is_shown_in_its_header(tmp_path):
    """FedCanon on iid only, FedAvg on Dirichlet only: not one row hiding the partitions."""
    acc_run(tmp_path, "canon", 0.8)
    acc_run(tmp_path, "avg", 0.7, **{"algorithm.name": "fedavg", "partition.name": "iid"})
    rows = table_rows(cli("tables.py", tmp_path).stdout)
    assert rows[0] == ["FedAvg (partition=iid)", "FedCanon (partition=dirichlet)"]


def test_steps_tied_to_the_row_key_do_not_split_rows(tmp_path):
    """FedCanon Table V: fedcanon's alpha = beta * K moves with K; the rows stay K."""
    for K in (10, 20):
        for alg, alpha in (("fedcanon", 0.02 * K), ("fedmid", 1.0)):
            fake_run(
                tmp_path,
                f"{alg}{K}",
                real(K=K, **{"algorithm.name": alg, "algorithm.alpha": alpha}),
                test_acc=[0.1, 0.2],
                time_s=[0.0, K / 10 * (1 + (alg == "fedmid"))],
            )
    rows = table_rows(cli("tables.py", tmp_path, "--preset", "table5").stdout)
    assert rows == [
        ["K", "FedCanon", "FedMiD"],
        ["10", "**1.0**", "2.0 [2.00× fedcanon]"],
        ["20", "**2.0 [2.00× prev. K]**", "4.0 [2.00× fedcanon; 2.00× prev. K]"],
    ]


def test_the_same_run_twice_is_named(tmp_path, capsys):
    acc_run(tmp_path, "a", 0.7)
    acc_run(tmp_path, "b", 0.7)
    assert tables_script.main([str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert (
        f"{tmp_path / 'b'} and {tmp_path / 'a'} have the same settings and seeds; counted once, from {tmp_path / 'a'}"
        in err
    )
    assert "one run (seed) per cell" in out  # counted once


def test_a_diverged_runs_nan_row_reads_as_numbers(tmp_path):
    """metrics.csv as the runner writes it after a divergence (``nan``/``inf`` via repr) is a
    diverged run to report, not a broken file to skip."""
    from fedprox_cli.common.run_files import read_metrics, write_metrics

    write_metrics(
        tmp_path,
        [
            {"round": 0, "objective": 1.5},
            {"round": 2, "objective": float("nan")},
            {"round": 4, "objective": float("inf")},
        ],
    )
    m = read_metrics(tmp_path)
    assert list(m["round"]) == [0, 2, 4] and m["round"].dtype.kind == "i"
    assert np.isnan(m["objective"][1]) and np.isinf(m["objective"][2])


def test_runs_recorded_before_a_key_was_added_pool_with_newer_ones(tmp_path):
    """A config.yaml without a key added later (keys.ADDED, e.g. matmul_precision) reads as
    having the value that computes what it computed; a run-control group's choice (logger)
    never splits groups."""
    from fedprox_cli.config import keys

    runs = []
    for seed, old in ((0, True), (1, False)):
        run = tmp_path / f"r{seed}"
        run.mkdir()
        cfg = {"algorithm": {"name": "fedcanon"}, "seed": seed, "T": 1}
        if not old:
            cfg.update(matmul_precision="highest", seeds=1)
        (run / "config.yaml").write_text(yaml.safe_dump(cfg))
        (run / "metrics.csv").write_text("round,test_acc\n0,0.1\n1,0.5\n")
        runs.append(run)
    loaded = results.load([tmp_path])
    assert (
        len(loaded) == 2 and loaded[0].config["matmul_precision"] == keys.ADDED["matmul_precision"]
    )
    assert len(groups.group(loaded)) == 1


def test_a_diverged_rows_model_metrics_are_not_numbers_of_a_model(tmp_path):
    """At a row whose loss is NaN the model is NaN: its accuracy (argmax of NaN logits = class
    0) is no result. Reports and metrics.png blank such rows' model metrics, keep the counters."""
    run = tmp_path / "r"
    run.mkdir()
    (run / "metrics.csv").write_text(
        "round,bytes_up,train_loss,objective,test_acc\n"
        "0,0,2.3,2.3,0.1\n5,10,0.5,0.6,0.8\n10,20,nan,nan,0.1\n"
    )
    m = run_files.read_metrics(run)
    assert m["bytes_up"].tolist() == [0, 10, 20] and m["test_acc"].iloc[1] == 0.8
    assert np.isnan(m["test_acc"].iloc[2])
    run_plots.plot_run(run, run / "metrics.png")  # draws the finite part only
    assert (run / "metrics.png").stat().st_size > 0


TABLES = {
    "numbers": "round,train_loss,test_acc\n0,2.3,0.1\n1,0.5,0.8\n",
    "diverged": "round,train_loss,objective,test_acc\n0,2.3,2.3,0.1\n1,inf,-inf,0.1\n2,nan,nan,0.2\n",
    "an empty cell": "round,train_loss,test_acc\n0,2.3,\n1,0.5,0.8\n",
    "one column": "round\n0\n1\n",
    "a column twice": "round,test_acc,test_acc\n0,0.1,0.2\n",
    "spaces": "round,train_loss\n0, 2.5 \n",
}
BAD_TABLES = {
    "cut": "round,train_loss\n0,2.3\n1\n",
    "not a number": "round,train_loss\n0,abc\n",
    "empty": "",
    "no round": "train_loss\n0.5\n",
    "no end of line": "round,train_loss\n0,2.3",
}


@pytest.mark.parametrize("text", TABLES.values(), ids=TABLES)
def test_the_figures_reader_reads_metrics_as_the_tables_do(tmp_path, text):
    """metrics.png's reader (numpy, no pandas: run_files.read_metric_columns) gives the numbers
    read_metrics gives, model metrics blanked where the loss is not finite."""
    (tmp_path / "metrics.csv").write_text(text)
    table, columns = run_files.read_metrics(tmp_path), run_files.read_metric_columns(tmp_path)
    assert list(columns) == list(dict.fromkeys(table.columns))
    for c, values in columns.items():
        expected = table[c] if table[c].ndim == 1 else table[c].iloc[:, -1]
        np.testing.assert_array_equal(values, np.asarray(expected, float))


@pytest.mark.parametrize("text", BAD_TABLES.values(), ids=BAD_TABLES)
def test_the_figures_reader_refuses_what_the_tables_refuse(tmp_path, text):
    (tmp_path / "metrics.csv").write_text(text)
    with pytest.raises(run_files.RunFileError) as table:
        run_files.read_metrics(tmp_path)
    with pytest.raises(run_files.RunFileError) as columns:
        run_files.read_metric_columns(tmp_path)
    assert str(columns.value) == str(table.value)


def test_per_seed_order_counts_each_seed_and_pair(tmp_path):
    """scripts/per_seed.py --order: an ordering that holds in the means but not in every seed."""
    ends = {
        0: (3.0, 2.0, 1.0),
        1: (3.0, 2.0, 1.5),
        2: (3.0, 1.0, 1.2),
    }  # seed 2: n = 50 above n = 20
    for seed, ys in ends.items():
        for n, y in zip((10, 20, 50), ys):
            fake_run(
                tmp_path,
                f"n{n}_s{seed}",
                real(seed, n=n),
                train_loss=[1.0, 1.0],
                objective=[1.0, 1.0],
                test_acc=[0.1, 0.2],
                stationarity=[9.0, y],
            )
    p = cli("per_seed.py", tmp_path, "--order", "n")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("stationarity (last) falls at every step of n in 2 of 3 seeds")
    rows = table_rows(p.stdout)
    assert rows[3] == ["2", "3.00e+00, 1.00e+00, 1.20e+00", "no", "n = 50 not below 20"]
    assert rows[5][:3] == ["10 → 20", "3 of 3", "1.3e+00 ± 3.3e-01 (4.0 s.e.)"]  # gaps 1, 1, 2
    assert rows[6][:2] == ["20 → 50", "2 of 3"]


def test_per_seed_best_counts_the_seeds_where_a_method_leads(tmp_path):
    for seed in range(2):
        for alg, end in (("fedcanon", 0.1), ("fedavg", 0.2 if seed == 0 else 0.05)):
            fake_run(
                tmp_path,
                f"{alg}_{seed}",
                real(seed, **{"algorithm.name": alg}),
                train_loss=[1.0, 1.0],
                objective=[1.0, 1.0],
                test_acc=[0.1, 0.2],
                stationarity=[1.0, end],
            )
    p = cli(
        "per_seed.py",
        tmp_path,
        "--panels",
        "--best",
        "fedcanon",
        "--from-round",
        "5",
        "--tail",
        "5",
    )
    assert p.returncode == 0, p.stderr
    (_, row) = table_rows(p.stdout)
    assert row[1:4] == ["2", "1 of 2", "1/1, 0/1"]


def test_per_seed_counts_a_higher_is_better_metric_upwards(tmp_path):
    """Hoyer sparsity (higher is better: common.metric_table): the best method is the highest, an ordering rises.
    The same runs read through a lower-is-better column (stationarity) count the other way."""
    ends = {
        0: {"fednmap": 0.5048, "za1": 0.5033},
        1: {"fednmap": 0.4, "za1": 0.6},
    }  # seed 1: ZA1 above
    for seed, got in ends.items():
        for alg, h in got.items():
            fake_run(
                tmp_path,
                f"{alg}_{seed}",
                real(seed, **{"algorithm.name": alg}),
                train_loss=[1.0, 1.0],
                objective=[1.0, 1.0],
                test_acc=[0.1, 0.2],
                stationarity=[1.0, h],
                hoyer=[0.1, h],
            )
    for y, wins, word in (("hoyer", "1 of 2", "highest"), ("stationarity", "1 of 2", "lowest")):
        p = cli(
            "per_seed.py",
            tmp_path,
            "--panels",
            "--best",
            "fednmap",
            "--y",
            y,
            "--from-round",
            "0",
            "--tail",
            "5",
        )
        assert p.returncode == 0, p.stderr
        (head, row) = table_rows(p.stdout)
        assert head[2] == f"fednmap {word} at the last evaluation" and row[2] == wins
        assert row[4] == "5.05e-01, 4.00e-01 / 5.03e-01, 6.00e-01"  # 3 digits tell seed 0's apart
    p = cli(
        "per_seed.py",
        tmp_path,
        "--panels",
        "--best",
        "fednmap",
        "--y",
        "hoyer",
        "--from-round",
        "0",
    )
    assert table_rows(p.stdout)[1][3] == "2/2, 1/2"  # round 0: a tie at 0.1 counts for fednmap
    p = cli("per_seed.py", tmp_path, "--order", "seed", "--y", "hoyer")  # one run per seed
    assert p.returncode == 2 and p.stderr.strip().endswith(
        "no seed has runs at two values of seed: nothing to order"
    )
    for seed, ys in {0: (0.2, 0.5), 1: (0.3, 0.1)}.items():  # seed 1 falls
        for n, h in zip((10, 20), ys):
            fake_run(
                tmp_path / "n",
                f"n{n}_s{seed}",
                real(seed, n=n),
                train_loss=[1.0, 1.0],
                objective=[1.0, 1.0],
                test_acc=[0.1, 0.2],
                stationarity=[1.0, h],
                hoyer=[0.1, h],
            )
    p = cli("per_seed.py", tmp_path / "n", "--order", "n", "--y", "hoyer")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("hoyer (last) rises at every step of n in 1 of 2 seeds")
    rows = table_rows(p.stdout)
    assert rows[2] == ["1", "3.00e-01, 1.00e-01", "no", "n = 20 not above 10"]
    assert rows[4][:3] == ["10 → 20", "1 of 2", "5.0e-02 ± 2.5e-01 (0.2 s.e.)"]  # gaps +0.3, -0.2


def test_per_seed_reach_says_how_each_run_ended_and_when_it_got_there(tmp_path):
    acc_run(tmp_path, "a0", 0.9, seed=0)
    acc_run(tmp_path, "a1", 0.9, status="diverged", seed=1)  # objective inf at round 10
    p = cli(
        "per_seed.py",
        tmp_path,
        "--method",
        "algorithm.name",
        "algorithm.beta",
        "--reach",
        "0.5",
        "--y",
        "test_acc",
        "--x",
        "round",
    )
    assert p.returncode == 0, p.stderr
    assert "finished runs per method: algorithm=fedcanon, algorithm.beta=0.02: 1 of 2." in p.stdout
    (_, done, diverged) = table_rows(p.stdout)
    assert done[1:] == ["0", "finished", "0.9000", "0.9000", "round 5, 5"]
    assert diverged[1:] == [
        "1",
        "diverged (last finite evaluation: round 5)",
        "0.5000",
        "0.5000",
        "round 5, 5",
    ]
    p = cli("per_seed.py", tmp_path, "--method", "algorithm.nme", "--reach", "0.5")
    assert p.returncode == 2 and p.stderr.strip().endswith(
        "no run has a config key 'algorithm.nme'"
    )


def test_legends_name_every_difference_with_display_names_and_the_band(tmp_path, capsys):
    """FedCanon at beta 0.01 vs FedMiD at beta 0.02: the algorithm alone tells the curves apart;
    each beta is its own class's parameter, named with its method in the caption; the band is
    named; the caption lies beside the figure; the PDF embeds TrueType (Type 42) fonts."""
    for seed in range(2):
        acc_run(tmp_path / "runs", f"c{seed}", 0.7, seed=seed, **{"algorithm.beta": 0.01})
        acc_run(
            tmp_path / "runs",
            f"m{seed}",
            0.6,
            seed=seed,
            **{"algorithm.name": "fedmid", "algorithm.beta": 0.02},
        )
    pdf = tmp_path / "fig.pdf"
    assert plot_script.main([str(tmp_path / "runs"), "--out", str(pdf)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "legend: FedCanon; FedMiD"
    caption = (tmp_path / "fig.caption.txt").read_text().strip()
    assert f"caption: {caption}" in out and "Lines: mean of 2 seeds; bands: ± 1 std" in caption
    assert "β = 0.01" in caption.split(" and FedMiD (")[0] and "β = 0.02" in caption
    data = pdf.read_bytes()
    assert b"CIDFontType2" in data and b"Type3" not in data


def test_a_job_recorded_where_its_sweep_ran_is_found_where_the_sweep_is_now(tmp_path):
    """A results folder cloned or copied elsewhere keeps its sweeps' launch order; a job folder
    outside a moved sweep is none of its folders."""
    from fedprox_cli.analysis.jobrecords import JobRecord, located

    sweep = tmp_path / "clone" / "results" / "reproduction" / "fig6"
    (sweep / "3" / "seed_1").mkdir(parents=True)
    old = JobRecord(3, [], "/work/other/results/reproduction/fig7/3/seed_1")  # no sweep recorded
    assert located(sweep, old) == sweep / "3" / "seed_1"  # the end of its path that is here
    assert located(sweep, JobRecord(3, [], "/elsewhere/sweep/4")) is None  # not of this sweep
    new = JobRecord(3, [], "/work/other/S/3", sweep="/work/other/S")
    assert located(sweep, new) == sweep / "3"  # renamed on the way: its record says where it ran
    out = JobRecord(3, [], "/work/jobs/3", sweep="/work/other/S")
    assert located(sweep, out) is None
    assert located(Path("/work/other/S"), out) == Path("/work/jobs/3")  # not moved: anywhere
