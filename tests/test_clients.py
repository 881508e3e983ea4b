"""Per-client metrics (metrics.per_client=true): equal to a direct computation client by client,
the reweighting identity, and clients.csv through a run, a seed-batched run and a resume."""

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from fedprox_cli import data
from fedprox_cli.engine import clients as pc
from fedprox_cli.engine import models
from fedprox_cli.engine.client_data import ClientData
from fedprox_cli.engine.models import FlatModel
from fedprox_cli.engine.oracle import Oracle

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _oracle(x, y, parts, eval_batch=97):
    torch.manual_seed(0)
    flat = FlatModel(models.build("linear", (64,), 10).to(torch.float64))
    return flat, Oracle(
        flat, ClientData.build(x, y, parts, "cpu"), None, 0, engine="loop", eval_batch=eval_batch
    )


def test_per_client_metrics_equal_a_loop_over_clients_on_digits():
    ds = data.load("digits")
    parts = data.partition("dirichlet", ds.train_y.numpy(), 5, 0, alpha=0.3)
    flat, oracle = _oracle(ds.train_x.double(), ds.train_y, parts)
    x = flat.flat() + 0.05 * torch.randn(
        flat.d, generator=torch.Generator().manual_seed(1), dtype=torch.float64
    )
    test_x = ds.test_x.double()
    got = pc.evaluate(oracle, x, test_x, ds.test_y, 10)
    p_test = torch.bincount(ds.test_y, minlength=10).double() / len(ds.test_y)
    with torch.no_grad():
        test_logits = flat(x, test_x)
        test_l = F.cross_entropy(test_logits, ds.test_y, reduction="none")
        test_c = (test_logits.argmax(1) == ds.test_y).double()
        for i, c in enumerate(parts):  # brute force, one client after another
            logits = flat(x, ds.train_x[c].double())
            y = ds.train_y[c]
            assert got["train_loss"][i] == pytest.approx(
                F.cross_entropy(logits, y).item(), rel=1e-12
            )
            assert got["train_acc"][i] == pytest.approx(
                (logits.argmax(1) == y).double().mean().item()
            )
            p_i = torch.bincount(y, minlength=10).double() / len(y)
            w = p_i[ds.test_y] / p_test[ds.test_y]
            assert got["test_loss_rw"][i] == pytest.approx(
                ((w * test_l).sum() / w.sum()).item(), rel=1e-12
            )
            assert got["test_acc_rw"][i] == pytest.approx(
                ((w * test_c).sum() / w.sum()).item(), rel=1e-12
            )
    assert got["train_acc"].std() > 0 and got["test_acc_rw"].std() > 0


def test_a_client_with_the_test_label_distribution_gets_the_plain_test_metric():
    """Client 0 holds the test set itself (p_0 = p_test, all weights 1); client 1 one class only."""
    ds = data.load("digits")
    tx, ty = ds.test_x.double(), ds.test_y
    parts = [np.arange(len(ty)), np.flatnonzero(ty.numpy() == 3)]
    flat, oracle = _oracle(tx, ty, parts)
    x = flat.flat()
    got = pc.evaluate(oracle, x, tx, ty, 10)
    loss, acc = oracle.test(x, tx, ty)
    assert got["test_loss_rw"][0] == pytest.approx(loss.item(), rel=1e-12)
    assert got["test_acc_rw"][0] == pytest.approx(acc.item(), rel=1e-12)
    assert got["train_loss"][0] == pytest.approx(loss.item(), rel=1e-12)
    threes = ty == 3  # one class: the reweighted metric is that class's test metric
    with torch.no_grad():
        assert got["test_acc_rw"][1] == pytest.approx(
            (flat(x, tx[threes]).argmax(1) == 3).double().mean().item()
        )


def test_summary_mean_std_and_worst_ten_percent():
    t = pd.DataFrame(
        {
            "round": [0] * 20,
            "client": range(20),
            "train_loss": np.arange(20.0),
            "train_acc": np.arange(20) / 20,
            "test_loss_rw": 1.0,
            "test_acc_rw": 0.5,
        }
    )
    s = pc.summary(t).iloc[0]
    assert s["train_acc_mean"] == pytest.approx(np.mean(np.arange(20) / 20))
    assert s["train_acc_std"] == pytest.approx(np.std(np.arange(20) / 20, ddof=1))
    assert s["train_acc_worst10"] == pytest.approx((0 + 1) / 40)  # lowest 2 of 20
    assert s["train_loss_worst10"] == pytest.approx((18 + 19) / 2)  # highest 2 of 20
    assert s["test_acc_rw_std"] == 0


TINY = [
    "dataset=digits",
    "model=linear",
    "K=2",
    "n=4",
    "B=8",
    "eval_every=1",
    "device=cpu",
    "metrics.per_client=true",
]


def _csv(run, name="clients.csv"):
    return pd.read_csv(run / name)


def test_clients_csv_through_runs_seed_batches_and_resume(run_fedrun, tmp_path, monkeypatch):
    plain = tmp_path / "plain"
    p = run_fedrun(*TINY, "T=4", f"hydra.run.dir={plain}")
    assert p.returncode == 0, p.stderr
    table = _csv(plain)
    assert list(table.columns) == pc.COLUMNS
    assert table["round"].tolist() == [r for r in range(5) for _ in range(4)]
    assert table["client"].tolist() == [0, 1, 2, 3] * 5
    assert _csv(plain, "clients_summary.csv")["round"].tolist() == list(range(5))
    assert (plain / "clients.png").stat().st_size > 0
    _partition_plot_is_titled_by_its_setting(plain, monkeypatch)
    # the existing metrics do not change
    off = tmp_path / "off"
    assert run_fedrun(*TINY[:-1], "T=4", f"hydra.run.dir={off}").returncode == 0
    assert not (off / "clients.csv").exists()
    pd.testing.assert_frame_equal(
        _csv(plain, "metrics.csv").drop(columns="time_s"),
        _csv(off, "metrics.csv").drop(columns="time_s"),
    )
    # resume: a run stopped with rows after its checkpoint continues like metrics.csv
    resumed = tmp_path / "resumed"
    assert (
        run_fedrun(
            *TINY, "T=2", "keep_checkpoint=true", "checkpoint_every=2", f"hydra.run.dir={resumed}"
        ).returncode
        == 0
    )
    stale = _csv(resumed)
    extra = stale[stale["round"] == 2].assign(round=3)  # an evaluation the checkpoint missed
    pd.concat([stale, extra]).to_csv(resumed / "clients.csv", index=False)
    p = run_fedrun(*TINY, "T=4", f"hydra.run.dir={resumed}")
    assert p.returncode == 0 and "resuming" in p.stderr, p.stderr
    pd.testing.assert_frame_equal(_csv(resumed), table)
    # seed-batched: each seed's folder has the clients.csv of its own run
    batched = tmp_path / "batched"
    assert run_fedrun(*TINY, "T=4", "seeds=2", f"hydra.run.dir={batched}").returncode == 0
    assert (
        run_fedrun(
            *TINY, "T=4", "seed=1", "engine=vmap", f"hydra.run.dir={tmp_path / 's1'}"
        ).returncode
        == 0
    )
    pd.testing.assert_frame_equal(_csv(batched / "seed_1"), _csv(tmp_path / "s1"), rtol=1e-5)
    assert len(_csv(batched / "seed_0")) == 20


def _partition_plot_is_titled_by_its_setting(run, monkeypatch):
    """Not by the folder's name (a sweep's job folder is "0")."""
    from fedprox_cli.analysis import run_plots

    kept = []
    monkeypatch.setattr(run_plots, "save_figure", lambda fig, path, **kw: kept.append((fig, kw)))
    run_plots.plot_partition(run, run / "p.png")
    ((fig, kw),) = kept
    title = fig.axes[0].get_title()
    assert title.startswith("digits · partition dirichlet (alpha=0.5") and "4 clients" in title
    assert run.name not in title and "digits" in kw["caption"]


def test_per_client_must_be_a_boolean(run_fedrun, tmp_path):
    p = run_fedrun(*TINY[:-1], "T=1", "metrics.per_client=3", f"hydra.run.dir={tmp_path / 'r'}")
    assert p.returncode == 2
    assert "metrics.per_client must be true or false, got 3" in p.stderr
