"""Algorithm tests derived from the update rules (ALGORITHMS.md): equivalences between methods,
the per-round communication / prox table, convergence to the centralized optimum, descent,
partial participation and prox-parameter validation."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
import torch
from hydra import compose, initialize_config_dir

from fedprox_cli import regularizers, runner
from fedprox_cli.cli import CONF_DIR
from fedprox_cli.errors import UserError
from fedprox_cli.regularizers import Regularizer, soft_threshold

ROOT = Path(__file__).resolve().parent.parent
BASE = ["dataset=digits", "model=linear", "model.init=zeros", "dtype=float64", "B=full",
        "device=cpu", "engine=vmap", "n=4", "K=3", "T=20"]
L1 = ["regularizer=l1", "regularizer.lam=1e-2"]
COMPOSITE = ["fedcanon", "fedcanon2", "fedcef", "fednmap", "scaffnew", "fedmid", "fedda", "za1",
             "za2", "feddr", "fedadmm"]
SMOOTH_ONLY = ["fedavg", "scaffold"]
PARTIAL = ["fedavg", "scaffold", "fedmid", "fedda", "feddr", "fedadmm"]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny problems: one thread avoids oversubscribing a shared CPU."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def config(*overrides):
    """BASE + overrides, with the l1 regularizer unless the overrides choose one."""
    reg = [] if any(o.startswith("regularizer=") for o in overrides) else L1
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=BASE + reg + list(overrides))


def trajectory(*overrides, T=5, h=None):
    """(experiment, [state after round t+1 for t < T])."""
    exp = runner.build(config(*overrides))
    if h is not None:
        exp.h = exp.env.h = h
    s = exp.alg.init(exp.flat.flat(), exp.s.n)
    states = []
    for t in range(T):
        exp.env.start_round(t)
        s = exp.alg.round(s, exp.env, t)
        states.append(s)
    return exp, states


def objective(exp, x):
    f, _ = exp.oracle.full(x, with_grad=False)
    return (f + exp.env.h.value(x)).item()


# --- equivalences -----------------------------------------------------------------------------

def test_fedcanon2_has_fedcanons_z_trajectory_and_identical_rows():
    _, a = trajectory("algorithm=fedcanon", "algorithm.alpha=0.3", "algorithm.beta=0.05")
    _, b = trajectory("algorithm=fedcanon2", "algorithm.alpha=0.3", "algorithm.beta=0.05")
    for sa, sb in zip(a, b):
        assert torch.equal(sb["X0"], sb["X0"][:1].expand_as(sb["X0"]))
        torch.testing.assert_close(sb["X0"][0], sa["z"], rtol=0, atol=1e-12)
    assert a[-1]["z"].count_nonzero() < a[-1]["z"].numel()  # the prox acted


def test_fednmap_without_h_is_scaffold():
    """With h = 0: x_t = z, FedNMap's c_i = SCAFFOLD's c - c_i, and z <- z - K eta_s eta_a ybar
    is SCAFFOLD's z <- z + alpha mean_i (x_i - z) with alpha = eta_s, beta = eta_a (gamma is
    irrelevant)."""
    common = ("regularizer=none", "B=8")
    _, a = trajectory("algorithm=fednmap", "algorithm.eta_a=0.05", "algorithm.eta_s=0.7",
                      "algorithm.gamma=0.3", *common, T=6)
    _, b = trajectory("algorithm=scaffold", "algorithm.beta=0.05", "algorithm.alpha=0.7",
                      *common, T=6)
    for sa, sb in zip(a, b):
        torch.testing.assert_close(sa["x"], sb["z"], rtol=0, atol=1e-12)
        torch.testing.assert_close(sa["C"], sb["c"] - sb["C"], rtol=0, atol=1e-10)


@pytest.mark.parametrize("participation", [1.0, 0.5])
def test_fedadmm_is_feddr_with_alpha_dr_1(participation):
    """y_i := z - eta lam_i turns FedADMM's steps into FedDR's with alpha_dr = 1."""
    common = ("B=8", f"participation={participation}", "algorithm.eta=0.5", "algorithm.beta=0.05")
    _, a = trajectory("algorithm=fedadmm", *common, T=6)
    _, b = trajectory("algorithm=feddr", "algorithm.alpha_dr=1.0", *common, T=6)
    for sa, sb in zip(a, b):
        torch.testing.assert_close(sa["z"], sb["z"], rtol=0, atol=1e-11)
        torch.testing.assert_close(sa["X"], sb["X"], rtol=0, atol=1e-11)
    if participation == 1:  # y_i^t = z^t - eta lam_i^t (the z and lam a round started from)
        for prev, sb in zip(a, b[1:]):
            torch.testing.assert_close(sb["Y"], prev["z"] - 0.5 * prev["Lam"], rtol=0, atol=1e-11)


def test_za2_is_fedcef_with_identity_and_eta_1():
    _, a = trajectory("algorithm=za2", "algorithm.alpha=0.05")
    _, b = trajectory("algorithm=fedcef", "algorithm.alpha=0.05", "algorithm.eta=1.0")
    for sa, sb in zip(a, b):
        for key in ("z", "c", "C", "V"):
            assert torch.equal(sa[key], sb[key])


@pytest.mark.parametrize("compressor", ["identity", "topk"])
def test_fedcef_server_control_is_mean_of_client_controls(compressor):
    """c^{t+1} = c^t + mean_i Delta_i and c_i^{t+1} = c_i^t + Delta_i from c = c_i = 0."""
    _, states = trajectory("algorithm=fedcef", f"compressor={compressor}", "B=8")
    for s in states:
        torch.testing.assert_close(s["c"], s["C"].mean(0), rtol=0, atol=1e-12)
    assert states[-1]["c"].abs().sum() > 0
