"""Metrics: the proximal gradient mapping, Hoyer sparsity, nnz share, and evaluate() end to end."""

import json
import math

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
import yaml

from fedprox_cli import data
from fedprox_cli.engine import models
from fedprox_cli.engine.client_data import ClientData
from fedprox_cli.common.metric_table import BUILT_IN as COLUMNS
from fedprox_cli.engine.metrics import evaluate, hoyer, prox_grad_mapping
from fedprox_cli.engine.models import FlatModel
from fedprox_cli.engine.oracle import Oracle
from fedprox_cli.operators import regularizers


def _least_squares(m=40, d=15, seed=0):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(m, d, generator=g, dtype=torch.float64)
    b = A @ torch.randn(d, generator=g, dtype=torch.float64) + 0.1 * torch.randn(
        m, generator=g, dtype=torch.float64
    )
    L = torch.linalg.matrix_norm(A, 2).item() ** 2 / m
    return (lambda x: A.T @ (A @ x - b) / m), L


@pytest.mark.parametrize(
    "name,params",
    [
        ("l1", dict(lam=0.3)),
        ("mcp", dict(lam=0.3, theta=3.0)),
        ("elastic_net", dict(l1=0.3, l2=0.05)),
    ],
)
def test_stationarity_vanishes_at_proximal_gradient_fixed_point(name, params):
    """Proximal gradient x <- prox_{s h}(x - s grad f(x)) on least squares converges to a
    stationary point, where G_s = 0; at the start (x = 0) it does not vanish."""
    grad, L = _least_squares()
    h = regularizers.build(name, **params)
    s = 1.0 / L
    x = torch.zeros(15, dtype=torch.float64)
    G0 = prox_grad_mapping(x, grad(x), h, s).square().sum()
    for _ in range(5000):
        x = h.prox(x - s * grad(x), s)
    assert G0 > 1e-2
    assert prox_grad_mapping(x, grad(x), h, s).square().sum() < 1e-20
    assert 0 < (x != 0).sum() < 15  # the regularizer is active


def test_stationarity_without_regularizer_is_the_gradient():
    g, x = torch.randn(2, 10, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    G = prox_grad_mapping(x, g, regularizers.build("none"), 0.37)
    assert torch.allclose(G, g, rtol=0, atol=1e-14)


def test_hoyer_and_nnz_on_hand_made_vectors():
    one_hot = torch.zeros(9)
    one_hot[4] = -2.5
    assert hoyer(one_hot).item() == pytest.approx(1.0)
    assert hoyer(torch.tensor([1.0, -1.0, 1.0, -1.0])).item() == pytest.approx(0.0, abs=1e-7)
    # ||x||_1 = 7, ||x||_2 = 5, d = 4: (2 - 7/5) / (2 - 1) = 0.6
    assert hoyer(torch.tensor([3.0, 4.0, 0.0, 0.0], dtype=torch.float64)).item() == pytest.approx(
        0.6
    )
    assert hoyer(torch.zeros(5)).item() == 1.0


def _digits_oracle():
    ds = data.load("digits")
    clients = data.partition("iid", ds.train_y.numpy(), 3, 0)
    torch.manual_seed(0)
    module = models.build("linear", ds.input_shape, ds.num_classes).to(torch.float64)
    flat = FlatModel(module)
    cd = ClientData.build(ds.train_x.double(), ds.train_y, clients, "cpu")
    return ds, clients, flat, Oracle(flat, cd, None, 0, engine="loop", eval_batch=500)


def test_evaluate_against_direct_autograd_on_digits():
    """evaluate() on the real oracle equals f, f + h, ||G_s||^2 computed directly with autograd
    from the definition f = (1/n) sum_i f_i (f_i the client's mean loss), and the sparsity stats."""
    ds, clients, flat, oracle = _digits_oracle()
    h = regularizers.build("l1", lam=2e-3)
    s = 0.5
    x = flat.flat().clone()
    x[::3] = 0.0
    m = evaluate(x, oracle, h, s, ds.test_x.double(), ds.test_y)

    xr = x.clone().requires_grad_(True)
    f = sum(F.cross_entropy(flat(xr, ds.train_x[c].double()), ds.train_y[c]) for c in clients) / 3
    (g,) = torch.autograd.grad(f, xr)
    u = x - s * g
    prox = torch.sign(u) * torch.clamp(u.abs() - s * 2e-3, min=0)
    stationarity = ((x - prox) / s).square().sum().item()
    assert m["train_loss"] == pytest.approx(f.item(), rel=1e-12)
    assert m["objective"] == pytest.approx(f.item() + 2e-3 * x.abs().sum().item(), rel=1e-12)
    assert m["stationarity"] == pytest.approx(stationarity, rel=1e-9)
    assert m["nnz_frac"] == pytest.approx((x != 0).double().mean().item())
    d = x.numel()
    assert m["hoyer"] == pytest.approx(
        (math.sqrt(d) - x.abs().sum().item() / x.norm().item()) / (math.sqrt(d) - 1)
    )
    assert m["stationarity"] > 0


TINY = ["dataset=digits", "model=linear", "T=3", "K=2", "n=4", "B=8", "eval_every=1"]


def test_runs_with_each_penalty_write_finite_metrics(run_fedrun, tmp_path):
    r = run_fedrun("-m", *TINY, "regularizer=mcp,scad,elastic_net", f"hydra.sweep.dir={tmp_path}")
    assert r.returncode == 0, r.stderr
    runs = sorted(p for p in tmp_path.iterdir() if (p / "metrics.csv").exists())
    assert len(runs) == 3
    for run in runs:
        df = pd.read_csv(run / "metrics.csv")
        assert list(df.columns) == list(COLUMNS) and list(df["round"]) == [0, 1, 2, 3]
        assert df[list(COLUMNS)].map(math.isfinite).all().all(), run
        assert json.loads((run / "summary.json").read_text())["status"] == "finished"
    names = {yaml.safe_load((p / "config.yaml").read_text())["regularizer"]["name"] for p in runs}
    assert names == {"mcp", "scad", "elastic_net"}


def test_prox_step_beyond_weak_convexity_is_a_clear_error(run_fedrun, tmp_path):
    """FedCanon's prox parameter alpha = 0.2 must be < theta for MCP."""
    r = run_fedrun(*TINY, "regularizer=mcp", "regularizer.theta=0.1", f"hydra.run.dir={tmp_path}")
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert lines[0].startswith("fedrun: error: algorithm.alpha") and "1/rho = 0.1" in lines[0]
