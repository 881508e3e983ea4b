"""FedCanon against facts that follow from its update rules (the FedCanon paper, eqs. 7a-7f)."""

import torch

from fedprox_cli.config.compose import compose
from fedprox_cli.runs.experiment import build

DIGITS_LOGREG = [
    "dataset=digits",
    "model=linear",
    "model.init=zeros",
    "dtype=float64",
    "n=5",
    "partition=dirichlet",
    "partition.alpha=0.3",
    "regularizer=l1",
    "regularizer.lam=1e-3",
]


def test_k1_full_batch_is_proximal_gradient_descent():
    """K=1, B=full: Delta_i = grad f_i(z) + c_i and sum_i c_i = 0, so Dbar = grad f(z) and
    z+ = prox_{alpha h}(z - alpha grad f(z)) -- proximal gradient descent with step alpha."""
    exp = build(
        compose(DIGITS_LOGREG + ["K=1", "B=full", "algorithm.alpha=0.5", "algorithm.beta=0.1"])
    )
    state = exp.alg.init(exp.flat.flat(), exp.cfg.n)
    x = exp.flat.flat()
    for t in range(15):
        exp.env.start_round(t)
        state = exp.alg.round(state, exp.env, t)
        _, g = exp.oracle.full(x)
        x = exp.h.prox(x - 0.5 * g, 0.5)
        torch.testing.assert_close(state["z"], x, rtol=1e-10, atol=1e-12)
    assert (x == 0).any() and (x != 0).any()  # the l1 prox is active: a real composite check


def test_control_variates_sum_to_zero_and_objective_decreases():
    exp = build(compose(DIGITS_LOGREG + ["K=5", "B=16"]))
    state = exp.alg.init(exp.flat.flat(), exp.cfg.n)
    f0 = exp.oracle.full(state["z"], with_grad=False)[0] + exp.h.value(state["z"])
    for t in range(10):
        exp.env.start_round(t)
        state = exp.alg.round(state, exp.env, t)
        assert state["C"].abs().max() > 0
        torch.testing.assert_close(
            state["C"].sum(0), torch.zeros_like(state["z"]), atol=1e-12, rtol=0
        )
    f1 = exp.oracle.full(state["z"], with_grad=False)[0] + exp.h.value(state["z"])
    assert f1 < 0.7 * f0


def test_accounting_per_round():
    """Up d per client, down 2d per client (Dbar, z), one prox per round."""
    exp = build(compose(DIGITS_LOGREG + ["K=3", "B=8"]))
    state = exp.alg.init(exp.flat.flat(), exp.cfg.n)
    for t in range(2):
        exp.env.start_round(t)
        state = exp.alg.round(state, exp.env, t)
    d, n = exp.flat.d, exp.cfg.n
    assert (exp.env.bytes_up, exp.env.bytes_down, exp.env.prox_calls) == (
        2 * 4 * n * d,
        2 * 4 * 2 * n * d,
        2,
    )
    assert exp.oracle.grad_evals == 2 * 3 * n
