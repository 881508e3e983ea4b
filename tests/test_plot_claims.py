"""The claims' figures and tables as the papers draw them: one function draws every declared figure
(panels, notation, the paper's numbers, marked endings, PNG + PDF with TrueType fonts), the
tables put the paper's numbers beside ours, and check names a figure or table that differs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedprox_cli.analysis.run import Run
from fedprox_cli.claims import declare, figure_files, figures, sources, tables


def claim(cid: str) -> declare.Claim:
    return next(c for c in sources.claims() if c.id == cid)


def run(tmp: Path, name: str, status="finished", **config) -> Run:
    """A run in memory whose stationarity falls as c * n^-1 * K^-0.5 and whose accuracy ends at
    ``acc`` (config key), with its summary's dimension for the counts."""
    rounds = np.arange(0, 201, 20)
    scale = 1.0 / config.get("n", 10) / np.sqrt(config.get("K", 10))
    stat = scale * (1 + 10 * np.exp(-rounds / 40)) * (1 + config["seed"] / 100)
    acc = config.pop("acc", 0.9)
    df = pd.DataFrame(
        {
            "round": rounds,
            "time_s": rounds / 10.0,
            "bytes_up": rounds * 1e6,
            "bytes_down": rounds * 2e6,
            "prox_calls": rounds,
            "train_loss": stat,
            "objective": stat,
            "test_acc": np.linspace(0.1, acc, len(rounds)),
            "stationarity": stat,
        }
    )
    if status == "diverged":
        df.loc[df.index[-3:], ["train_loss", "objective", "stationarity"]] = np.nan
    return Run(tmp / name, {"T": 200, **config}, df, status, summary={"dimension": 100})


def test_every_claim_with_runs_declares_its_figure_or_table():
    for c in sources.claims():
        if any(rs.folders for rs in c.ran) or c.id == "fedcanon-table1":
            assert c.figure_spec is not None or c.table_spec, c.id
    fig3 = claim("fednmap-fig3").figure_spec
    assert [p["label"] for p in fig3.panels] == ["(a)", "(b)"] and fig3.panels[1]["kind"] == "slope"
    assert {
        "kind": "slope",
        "panel": "(b)",
        "value": -1.436,
        "text": "paper: slope −1.436",
    } in fig3.marks
    assert claim("fednmap-fig5b").figure_spec.notation == {"K": "Q"}
    assert {t.id for t in sources.claims() if t.table_spec} == {
        "fedcanon-table1",
        "fedcanon-table3",
        "fedcanon-table5",
        "fedcanon-table6",
    }


def test_fednmap_fig3_draws_its_slope_panel_and_the_papers_slope(tmp_path):
    c = claim("fednmap-fig3")
    runs = [run(tmp_path, f"n{n}_{s}", n=n, K=10, seed=s) for n in (10, 20, 40) for s in (0, 1)]
    rs = dataclasses.replace(c.ran[0], seeds=(0, 1))
    kept = []
    real_save = figures.save_figure

    def keep(fig, path, **kw):
        kept.append(fig)
        real_save(fig, path, **kw)

    import unittest.mock as mock

    with mock.patch.object(figures, "save_figure", keep):
        png, pdf = figures.draw(c, rs, runs, tmp_path)
    assert png.read_bytes()[:4] == b"\x89PNG" and pdf.read_bytes()[:5] == b"%PDF-"
    data = pdf.read_bytes()
    assert b"CIDFontType2" in data and b"Type3" not in data  # TrueType (Type 42), no Type 3
    fig = kept[0]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "paper: slope −1.436" in legend and "n = 10" in legend
    assert any(t.startswith("ours: slope −1.000") for t in legend)  # the synthetic n^-1
    caption = fig.texts[0].get_text().replace("\n", " ")
    assert "standing in for the paper's MNIST" in caption and "n ∈ {10, 20, 40} clients" in caption
    assert (
        "Q = 10" in caption and "2 seeds" in caption and "bands: ± 1 std over the seeds" in caption
    )
    a, b = fig.axes[:2]
    assert a.get_title() == "(a) stationarity with different n" and b.get_xscale() == "log"
    assert b.get_title() == "(b) final stationarity against log n"  # the paper's sub-captions
    assert b.get_xlabel() == "n (log scale)"
    # the same runs draw the same files: check compares bytes
    # no evidence: nothing redrawn, files kept
    assert figure_files.stale(c, [], tmp_path, print) == []
    assert all(p.is_file() for p in figures.paths(c, tmp_path))


def test_collapsed_and_diverged_runs_are_marked_and_left_out(tmp_path):
    c = claim("fednmap-fig5b")
    runs = [run(tmp_path, f"K{K}_{s}", n=30, K=K, seed=s) for K in (5, 10) for s in (0, 1)]
    runs.append(run(tmp_path, "K20_0", n=30, K=20, seed=0, acc=0.1))  # chance accuracy
    runs.append(run(tmp_path, "K20_1", "diverged", n=30, K=20, seed=1))
    rs = dataclasses.replace(c.ran[0], seeds=(0, 1))
    spec = c.figure_spec
    assert spec is not None
    c = dataclasses.replace(c, figure_spec=dataclasses.replace(spec, order=(5, 10, 20, 40)))
    import unittest.mock as mock

    kept, said = [], []
    with mock.patch.object(
        figures, "save_figure", lambda fig, path, **kw: (kept.append(fig), said.append(kw))
    ):
        figures.draw(c, rs, runs, tmp_path)
    legend = [t.get_text().replace("\n", " ") for t in kept[0].legends[0].get_texts()]
    assert "Q = 20" in legend  # named though no run of it is in a mean
    # and the caption names each declared curve without a line, and why
    assert (
        "; Q = 20: no line, every run diverged or collapsed; Q = 40: absent, no run of it;"
        in (said[0]["caption"])
    )
    assert (
        "collapsed to chance (test accuracy < 20% at the end) (1 run, not in the mean; o: its end)"
        in legend
    )
    assert "diverged (1 run, not in the mean; x: its last finite value)" in legend
    assert kept[0].axes[0].get_title() == "(b) $\\eta_a = 1/\\sqrt{Q}$"


def test_table5_puts_ours_below_the_papers_rows_with_its_ratios(tmp_path):
    c = claim("fedcanon-table5")
    runs = []
    for K in (1, 2):
        for alg, slow in (("fedcanon", 1), ("fedmid", 3), ("fedda", 3), ("za1", 4)):
            r = run(tmp_path, f"{alg}{K}", K=K, seed=0, n=10)
            r.config["choice:algorithm"] = f"fedcanon_fig3/{alg}"
            r.config["algorithm.name"] = alg
            r.metrics["time_s"] = r.metrics["round"] * K * slow / 100
            runs.append(r)
    rs = dataclasses.replace(c.ran[0], seeds=(0,))
    ev = type("Ev", (), {"present": 1, "runset": rs, "read_as": rs})()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            "fedprox_cli.claims.loading.load_runs", lambda *a, **k: (runs, [])
        )  # (runs, findings)
        made = tables.texts(c, [ev], tmp_path, print)
    md = made["md"].splitlines()
    assert md[2] == "|  | K | FedCanon | FedMiD | FedDA | ZA1 |"
    assert "| paper | 40 | 417 (1.42× prev.) | 2364 (5.67×; 2.09× prev.) |" in "\n".join(md)
    assert "| ours | 1 | 2.0 | 6.0 (3.00×) | 6.0 (3.00×) | 8.0 (4.00×) |" in md
    assert (
        "| ours | 2 | 4.0 (2.00× prev.) | 12.0 (3.00×; 2.00× prev.) | 12.0 (3.00×; 2.00× prev.) | 16.0 (4.00×; 2.00× prev.) |"
        in md
    )
    tex = made["tex"]
    assert "\\toprule" in tex and "$\\times$" in tex and "\\caption{FedCanon Table V:" in tex


def test_table6_bolds_ours_only_beyond_the_spread(tmp_path):
    assert tables._best([(0.80, 0.01), (0.70, 0.01), (0.60, 0.0)], "test_acc") == [
        True,
        False,
        False,
    ]
    assert tables._best([(0.75, 0.15), (0.71, 0.01)], "test_acc") == [False, False]
    assert tables._best([(10.0, 0.0), (20.0, 0.0)], "time_s") == [True, False]  # lower is better


def test_a_claims_accuracy_axis_reads_in_percent_beside_the_papers_number(tmp_path):
    """FedCEF Fig. 3 (test accuracy against bytes): the axis in percent as the tables show it
    (plotting.metric_axis), the paper's 98% drawn at the runs' fraction 0.98."""
    from test_plot_scripts import in_percent

    c = claim("fedcef-fig3")
    runs = []
    for alg in ("fedcef_fig3_4/fedda", "fedcef_fig3_4/za2"):
        for s in (0, 1):
            r = run(tmp_path, f"{alg}{s}", n=10, K=10, seed=s, acc=0.95 + s / 100)
            r.config["choice:algorithm"] = alg
            runs.append(r)
    rs = dataclasses.replace(c.ran[0], seeds=(0, 1))
    import unittest.mock as mock

    kept = []
    with mock.patch.object(figures, "save_figure", lambda fig, path, **kw: kept.append(fig)):
        figures.draw(c, rs, runs, tmp_path)
    ax = kept[0].axes[0]
    assert ax.get_ylabel() == "test accuracy (%)" and in_percent(ax)
    (paper,) = [line for line in ax.get_lines() if line.get_color() == "0.3"]  # its grey
    assert paper.get_ydata()[0] == 0.98


def test_a_figure_of_one_seed_says_its_lines_are_that_seeds_runs(tmp_path):
    """A referee: FedCanon Fig. 3's caption said "lines: mean over the seeds" of one seed."""
    c = claim("fednmap-fig5b")
    runs = [run(tmp_path, f"K{K}_0", n=30, K=K, seed=0) for K in (5, 10)]
    rs = dataclasses.replace(c.ran[0], seeds=(0,))
    import unittest.mock as mock

    said = []
    with mock.patch.object(figures, "save_figure", lambda fig, path, **kw: said.append(kw)):
        figures.draw(c, rs, runs, tmp_path)
    assert "lines: that seed's runs" in said[0]["caption"]
    assert "mean over the seeds" not in said[0]["caption"]
