"""fedrun-plot and fedrun-table as a researcher uses them for a paper: legends that name only what
differs (methods by their printed names), seed counts that never read as n, the shared settings
on the figure, a legend that fits a 3.4-inch panel, bands clipped to a log axis, bytes in MB/GB,
and a table that bolds a best mean only beyond the spread."""

from __future__ import annotations

import numpy as np
import pytest
from test_plot_scripts import fake_run, figures, real, table_rows  # noqa: F401 -- figures: a fixture

from fedprox_cli.algorithms import base
from fedprox_cli.analysis import plotting, results, table
from fedprox_cli.analysis.names import algorithm_title, method_names
from fedprox_cli.cli import plot as plot_cli
from fedprox_cli.cli import table as table_cli
from fedprox_cli.common import metric_table as mt


@pytest.fixture
def kept(figures):
    """The figures drawn, kept open (their caption attached) instead of written."""
    return figures


def two_methods(root, seeds=3, proxy="fedmid", acc=(0.8, 0.7)):
    """FedAvg (alpha = 1, beta = 0.02) and another method without alpha but with mu."""
    for seed in range(seeds):
        for name, a in (("fedavg", acc[0]), (proxy, acc[1])):
            cfg = real(seed, **{"algorithm.name": name})
            cfg["algorithm"] = {
                "name": name,
                "beta": 0.02,
                **({"alpha": 1.0} if name == "fedavg" else {"mu": 0.01}),
            }
            loss = [2.0, 1.0, 0.5 + seed / 100]
            fake_run(
                root,
                f"{name}_{seed}",
                cfg,
                train_loss=loss,
                objective=loss,
                test_acc=[0.1, 0.5, a + seed / 1000],
                stationarity=[1.0, 0.5, 0.2],
            )


def legend(fig) -> list[str]:
    return [t.get_text() for t in fig.legends[0].get_texts()]


def test_printed_names_from_the_class_and_a_default_for_a_plugin():
    assert algorithm_title("fedmid") == "FedMiD" and algorithm_title("za1") == "ZA1"
    assert (
        algorithm_title("scaffnew") == "SCAFFNEW"
        and algorithm_title("not_installed") == "not_installed"
    )

    class Mine(base.Algorithm):
        name = "my_method"

    assert Mine.display_name == "my_method"  # no declaration: its config name

    class Named(base.Algorithm):
        name = "x"
        display_name = "X-Fed"

    assert Named.display_name == "X-Fed"
    assert method_names(
        [{"algorithm.name": "fedcanon"}, {"algorithm.name": "za1"}], "algorithm.name"
    ) == {"fedcanon": "FedCanon", "za1": "ZA1"}
    assert method_names([{"K": 1}], "K") == {}


def test_legend_names_only_what_differs_and_a_label_changes_only_what_it_names(tmp_path, kept):
    two_methods(tmp_path)
    assert plot_cli.main([str(tmp_path), "--out", str(tmp_path / "f.png")]) == 0
    (fig,) = kept
    assert legend(fig) == ["FedAvg", "FedMiD"]  # alpha is FedAvg's alone, mu FedMiD's: in neither
    # one sentence in the papers' notation: each method with its own parameters (FedAvg's beta
    # and FedMiD's are declared by two classes: each method's own), then the shared setting
    assert fig.caption.startswith("FedAvg (α = 1, β = 0.02) and FedMiD (β = 0.02, μ = 0.01) on ")
    assert "n = 3 clients" in fig.caption and "Lines: mean of 3 seeds" in fig.caption
    assert "=" not in fig.caption.replace(" = ", "")  # no config dump (beta=0.02)
    assert (
        plot_cli.main(
            [
                str(tmp_path),
                "--label",
                "fedavg=FedAvg (server step 1)",
                "--out",
                str(tmp_path / "g.png"),
            ]
        )
        == 0
    )
    assert legend(kept[1]) == ["FedAvg (server step 1)", "FedMiD"]  # the other entry as before


def test_a_label_that_renames_nothing_is_an_error_and_a_whole_label_may_hold_an_equals_sign(
    tmp_path, kept, capsys
):
    two_methods(tmp_path / "m")
    for K in (1, 2):
        cfg = real(9, K=K, **{"algorithm.name": "fedavg"})
        cfg["algorithm"] = {"name": "fedavg", "beta": 0.02, "alpha": 1.0}
        fake_run(
            tmp_path / "k",
            f"K{K}",
            cfg,
            train_loss=[2, 1, 0.5],
            objective=[2, 1, 0.5],
            test_acc=[0.1, 0.5, 0.7 + K / 100],
            stationarity=[1, 0.5, 0.2],
        )
    out = tmp_path / "f.png"
    assert (
        plot_cli.main([str(tmp_path / "k"), "--label", "K = 1=few steps", "--out", str(out)]) == 0
    )
    assert legend(kept[0]) == ["few steps", "K = 2"]  # split at the last '='
    assert (
        plot_cli.main([str(tmp_path / "m"), "--label", "FedAvg (α = 1)=FedAvg", "--out", str(out)])
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        err[-1].startswith(
            "fedrun-plot: error: --label 'FedAvg (α = 1)=FedAvg' renames nothing in the figure"
        )
        and "(FedAvg; FedMiD)" in err[-1]
    )
    assert len(kept) == 1  # refused before anything was written


def test_a_parameter_shared_by_name_but_not_by_meaning_is_its_methods(tmp_path, kept):
    """FedCanon's alpha is a server step, FedCEF's a local step: two parameters. Neither
    "varies" between the two methods; each is stated with its method. FedCanon's alpha that
    does vary between FedCanon's curves is in their labels."""
    for name, alpha in (("fedcanon", 0.2), ("fedcanon", 0.5), ("fedcef", 0.01)):
        cfg = real(0, **{"algorithm.name": name})
        cfg["algorithm"] = {"name": name, "alpha": alpha}
        fake_run(
            tmp_path,
            f"{name}_{alpha}",
            cfg,
            train_loss=[2, 1, 0.5],
            objective=[2, 1, 0.5],
            test_acc=[0.1, 0.5, alpha],
            stationarity=[1, 0.5, 0.2],
        )
    assert plot_cli.main([str(tmp_path), "--out", str(tmp_path / "f.png")]) == 0
    (fig,) = kept
    assert legend(fig) == ["FedCanon (α = 0.2)", "FedCanon (α = 0.5)", "FedCEF"]
    assert fig.caption.startswith("FedCEF (α = 0.01) on ")


def test_the_caption_may_be_left_to_the_paper_and_round_ticks_are_evaluations(tmp_path, kept):
    two_methods(tmp_path)  # evaluations every 5 rounds
    out = tmp_path / "f.png"
    assert plot_cli.main([str(tmp_path), "--no-caption", "--out", str(out)]) == 0
    (fig,) = kept
    assert fig.texts == [] and fig.caption  # not drawn; still the file's and the side file's
    assert (tmp_path / "f.caption.txt").read_text().strip() == fig.caption
    ticks = [t for t in fig.axes[0].get_xticks() if 0 <= t <= 10]
    assert ticks == [0, 5, 10]


def test_seed_counts_in_the_entry_only_where_curves_differ_in_them(tmp_path, kept):
    two_methods(tmp_path, seeds=2)
    cfg = real(2, **{"algorithm.name": "fedavg"})
    cfg["algorithm"] = {"name": "fedavg", "beta": 0.02, "alpha": 1.0}
    fake_run(
        tmp_path,
        "fedavg_2",
        cfg,
        train_loss=[2, 1, 0.5],
        objective=[2, 1, 0.5],
        test_acc=[0.1, 0.5, 0.8],
        stationarity=[1, 0.5, 0.2],
    )
    assert plot_cli.main([str(tmp_path), "--out", str(tmp_path / "f.png")]) == 0
    assert legend(kept[0]) == ["FedAvg (3 seeds)", "FedMiD (2 seeds)"]


def test_paper_style_legend_fits_the_panel_and_the_caption_is_on_the_figure(tmp_path, kept):
    for seed in range(2):
        for K in (1, 2, 5, 10, 20):
            loss = [2.0, 1.0, 0.5 / K]
            fake_run(
                tmp_path,
                f"K{K}_{seed}",
                real(seed, K=K),
                train_loss=loss,
                objective=loss,
                test_acc=[0.1, 0.5, 0.7],
                stationarity=[1.0, 0.5, 0.2 / K],
            )
    assert (
        plot_cli.main(
            [
                str(tmp_path),
                "--style",
                "paper",
                "--y",
                "stationarity",
                "--out",
                str(tmp_path / "f.pdf"),
            ]
        )
        == 0
    )
    (fig,) = kept
    r = fig.canvas.get_renderer()
    assert fig.get_figwidth() == pytest.approx(3.4)
    assert fig.legends[0].get_window_extent(r).width <= fig.bbox.width + 1
    (text,) = fig.texts
    assert text.get_text().replace("\n", " ") == fig.caption
    assert text.get_window_extent(r).width <= fig.bbox.width + 1
    assert "bands: ± 1 std over the seeds" in fig.caption


def test_a_band_reaching_zero_on_a_log_axis_is_clipped_to_the_axis(tmp_path, kept):
    for seed, last in enumerate((0.001, 0.2)):  # mean - std < 0 at the end
        fake_run(
            tmp_path,
            f"s{seed}",
            real(seed),
            train_loss=[2, 1, 0.5],
            objective=[2, 1, 0.5],
            test_acc=[0.1, 0.5, 0.7],
            stationarity=[1.0, 0.5, last],
        )
    assert (
        plot_cli.main([str(tmp_path), "--y", "stationarity", "--out", str(tmp_path / "f.png")]) == 0
    )
    (fig,) = kept
    ax = fig.axes[0]
    bottom = ax.get_ylim()[0]
    assert bottom > 0.001
    (band,) = ax.collections
    ys = np.concatenate([p.vertices[:, 1] for p in band.get_paths()])
    assert ys.min() >= bottom * (1 - 1e-9)
    assert "clipped at the axis's bottom" in fig.caption


def test_bytes_read_in_a_unit_without_an_offset(tmp_path, kept):
    for seed in range(2):
        d = fake_run(
            tmp_path,
            f"s{seed}",
            real(seed),
            train_loss=[2, 1, 0.5],
            objective=[2, 1, 0.5],
            test_acc=[0.1, 0.5, 0.7],
            stationarity=[1, 0.5, 0.2],
        )
        m = d / "metrics.csv"
        import pandas as pd

        df = pd.read_csv(m)
        df["bytes_up"] = df["bytes_up"] * 1e7
        df.to_csv(m, index=False)
    assert plot_cli.main([str(tmp_path), "--x", "bytes", "--out", str(tmp_path / "f.png")]) == 0
    ax = kept[0].axes[0]
    assert ax.get_xlabel() == "transmitted GB (up + down)"
    kept[0].canvas.draw()
    assert ax.xaxis.get_offset_text().get_text() == ""
    assert ax.get_xlim()[1] == pytest.approx((2 * 100 * 1e7 + 2 * 200) / 1e9)
    assert plotting.byte_unit(5e7) == (1e6, "MB")


def test_table_bolds_a_best_mean_only_beyond_the_spread(tmp_path):
    two_methods(tmp_path, acc=(0.8, 0.7))  # 0.1 apart, std 0.001: bold
    rows = table_rows(table.render(results.load([tmp_path]), table.preset("table6")))
    assert rows[0] == ["FedAvg", "FedMiD"] and rows[1][0].startswith("**80.10 ± 0.10")
    noisy = tmp_path / "noisy"
    for seed, (a, b) in enumerate(
        ((0.9, 0.70), (0.6, 0.72), (0.75, 0.71))
    ):  # 0.75 vs 0.71, std 0.15
        for name, acc in (("fedavg", a), ("fedmid", b)):
            cfg = real(seed, **{"algorithm.name": name})
            fake_run(
                noisy,
                f"{name}_{seed}",
                cfg,
                train_loss=[2, 1, 0.5],
                objective=[2, 1, 0.5],
                test_acc=[0.1, 0.5, acc],
                stationarity=[1, 0.5, 0.2],
            )
    text = table.render(results.load([noisy]), table.preset("table6"))
    assert "**" not in text
    assert "beats the runner-up by more than the larger of their stds" in text
    assert table_cli.main([str(noisy), "--out", str(tmp_path / "t.tex")]) == 0
    assert "textbf" not in (tmp_path / "t.tex").read_text()


@pytest.mark.parametrize(
    "spread, decimals",
    [(1.2, ".1f"), (0.43, ".2f"), (0.99999, ".1f"), (12.0, ".0f"), (1e-4, ".3f"), (np.nan, ".1f")],
)
def test_accuracy_is_a_percentage_at_the_digits_its_spread_supports(spread, decimals):
    """One entry of the metric table (``percent``) decides it: shown x 100, ``(%)`` after its
    name, the decimals that give the largest std over seeds two significant digits (one decimal
    for a single seed); a metric that is no percentage keeps its format."""
    acc = mt.TEST_ACC
    assert (acc.percent, acc.shown(0.8253), acc.unit) == (True, pytest.approx(82.53), " (%)")
    assert acc.format_for(spread) == decimals
    assert mt.STATIONARITY.format_for(spread) == mt.STATIONARITY.fmt
    assert (mt.STATIONARITY.shown(0.5), mt.STATIONARITY.unit) == (0.5, "")


def test_a_subscripted_symbol_reads_as_text_outside_the_drawing(tmp_path, kept, capsys):
    for eta_g in (1.0, 2.0):
        cfg = real(0, **{"algorithm.name": "fedcef"})
        cfg["algorithm"] = {"name": "fedcef", "alpha": 0.1, "eta": 0.3, "eta_g": eta_g}
        fake_run(tmp_path, f"fedcef_{eta_g}", cfg, train_loss=[2, 1, 0.5], test_acc=[0.1, 0.5, 0.7])
    out = tmp_path / "f.png"
    assert plot_cli.main([str(tmp_path), "--y", "test_acc", "--out", str(out)]) == 0
    (fig,) = kept
    printed = capsys.readouterr().out
    assert "$" in legend(fig)[0]  # drawn in mathtext (the subscript)
    assert "legend: η_g = 1; " in printed and "η = 0.3" in fig.caption
    for text in (fig.caption, (tmp_path / "f.caption.txt").read_text(), printed):
        assert "$" not in text and "\\eta" not in text


def test_a_caption_gives_the_setting_in_words_one_meaning_per_symbol():
    """The partition's concentration and the model's size in words, never as a method's symbol
    (alpha) or a config key (min_size, hidden); LaTeX gets Greek letters in math mode."""
    from fedprox_cli.analysis.caption import setting
    from fedprox_cli.analysis.latex import tex

    words = ", ".join(
        setting(
            {
                "dataset.name": "digits",
                "model.name": "mlp",
                "model.hidden": 200,
                "n": 10,
                "partition.name": "dirichlet",
                "partition.alpha": 0.5,
                "partition.min_size": 10,
            }
        )
    )
    assert words == (
        "on digits, MLP (200 hidden units), n = 10 clients, Dirichlet label skew (concentration "
        "0.5, at least 10 samples a client)"
    )
    assert tex("FedCanon (α = 0.2), λ = 1e-05") == r"FedCanon ($\alpha$ = 0.2), $\lambda$ = 1e-05"


@pytest.mark.parametrize("extra", [[], ["--logy"], ["--slope", "n"]])
def test_accuracy_reads_in_percent_in_fedrun_plots_figures(tmp_path, kept, extra):
    """The metric table's ``percent`` decides a figure's axis as it decides a table's
    (plotting.metric_axis): fedrun-plot's accuracy axis, linear, log (its labels between the
    decades too) and the slope figure's, reads 100 times its data, which stay metrics.csv's
    fractions; a metric that is no percentage keeps its labels."""
    from test_plot_scripts import acc_run, in_percent

    for n in (10, 20):
        for seed in range(2):
            acc_run(tmp_path, f"n{n}_{seed}", 0.7 + n / 1000 + seed / 100, seed=seed, n=n)
    args = [str(tmp_path), "--y", "test_acc", *extra, "--out", str(tmp_path / "f.png")]
    assert plot_cli.main(args) == 0
    ax = kept[0].axes[0]
    assert ax.get_ylabel().endswith("test accuracy (%)") and ax.get_ylim()[1] < 1
    assert in_percent(ax)
    if extra:  # log y: the labels between the decades in percent too
        minor = [t.get_text() for t in ax.get_yticklabels(minor=True) if t.get_text()]
        assert minor and all(float(t) > 1 for t in minor)
    assert (
        plot_cli.main([str(tmp_path), "--y", "train_loss", "--out", str(tmp_path / "g.png")]) == 0
    )
    assert kept[1].axes[0].get_ylabel() == "train loss f(x)" and not in_percent(kept[1].axes[0])


def test_what_a_line_is_says_one_seed_as_one_seed():
    from fedprox_cli.analysis.caption import what_lines_are

    assert what_lines_are({1}, False, False) == "Lines: one seed each."
    assert what_lines_are({3}, True, False) == "Lines: mean of 3 seeds; bands: ± 1 std over the seeds."
    assert what_lines_are({1, 3}, False, False) == "Lines: mean over each curve's seeds."
