"""Regularizers: every prox is checked against its definition argmin_u h(u) + (u - x)^2 / (2 step)."""

import math

import pytest
import torch

from fedprox_cli.common.errors import UserError
from fedprox_cli.operators import regularizers

LAM, THETA, A = 1.0, 3.0, 3.7
SEPARABLE = {  # name -> (params, steps < 1/rho, kinks of h and of its prox as functions of step)
    "l1": (dict(lam=LAM), [0.1, 1.0, 4.0], lambda s: [LAM * s]),
    "elastic_net": (dict(l1=LAM, l2=0.5), [0.1, 1.0, 4.0], lambda s: [LAM * s]),
    "mcp": (dict(lam=LAM, theta=THETA), [0.1, 1.0, 2.9], lambda s: [LAM * s, THETA * LAM]),
    "scad": (
        dict(lam=LAM, a=A),
        [0.1, 1.0, 2.6],
        lambda s: [LAM, 2 * LAM, (1 + s) * LAM, A * LAM, LAM * s],
    ),
    "none": ({}, [0.5], lambda s: []),
}


def _inputs(kinks, dtype):
    """Random points in [-8, 8], 0, and every kink exactly, with both signs."""
    torch.manual_seed(0)
    special = torch.tensor([0.0, *kinks], dtype=torch.float64)
    return torch.cat([16 * torch.rand(40, dtype=torch.float64) - 8, special, -special]).to(dtype)


def _grid_argmin(h, x, step, lo, hi, points=2001):
    """Per entry of x: the grid point of [lo, hi] minimizing F(u) = h(u) + (u - x)^2 / (2 step),
    and the grid spacing."""
    t = torch.linspace(0, 1, points, dtype=torch.float64)
    u = lo[:, None] + (hi - lo)[:, None] * t
    F = h.value(u[..., None]) + (u - x[:, None]) ** 2 / (2 * step)
    return u.gather(1, F.argmin(1, keepdim=True))[:, 0], (hi - lo) / (points - 1)


def _brute_force_prox(h, x, step):
    """A dense grid search, refined once around the coarse minimizer: F is strongly convex for
    step < 1/rho, so the minimizer lies within one coarse spacing of the coarse grid's argmin."""
    x = x.double()
    u, du = _grid_argmin(h, x, step, -x.abs() - 1, x.abs() + 1)
    return _grid_argmin(h, x, step, u - du, u + du)


@pytest.mark.parametrize("name", sorted(SEPARABLE))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_prox_minimizes_the_prox_objective(name, dtype):
    params, steps, kinks = SEPARABLE[name]
    h = regularizers.build(name, **params)
    for step in steps:
        x = _inputs(kinks(step), dtype)
        p = h.prox(x, step)
        assert p.dtype == dtype and p.shape == x.shape
        u, du = _brute_force_prox(h, x, step)
        tol = 2 * du + (1e-5 if dtype == torch.float32 else 1e-12) * (1 + x.double().abs())
        assert torch.all((p.double() - u).abs() <= tol), (name, step)
        F = lambda v: h.value(v[:, None]) + (v - x.double()) ** 2 / (2 * step)  # noqa: E731
        assert torch.all(F(p.double()) <= F(u) + (1e-5 if dtype == torch.float32 else 1e-12))


@pytest.mark.parametrize("name", ["l1", "elastic_net", "mcp", "scad"])
def test_rows_and_flat_agree(name):
    params, steps, _ = SEPARABLE[name]
    h = regularizers.build(name, **params)
    X = 6 * torch.randn(5, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    assert torch.equal(h.prox(X, steps[1]), h.prox(X.reshape(-1), steps[1]).reshape(5, 7))
    v = h.value(X)
    assert v.shape == (5,)
    assert torch.allclose(v, torch.stack([h.value(row) for row in X]))
    assert h.value(X.reshape(-1)).shape == ()


@pytest.mark.parametrize("name", ["mcp", "scad"])
def test_weak_convexity_modulus(name):
    """h + (rho/2) x^2 is convex (second differences >= 0) and no smaller modulus works."""
    h = regularizers.build(name, **SEPARABLE[name][0])
    u = torch.linspace(-6, 6, 12001, dtype=torch.float64)[:, None]
    second = lambda g: g[2:] - 2 * g[1:-1] + g[:-2]  # noqa: E731
    assert second(h.value(u) + h.rho / 2 * u[:, 0] ** 2).min() >= -1e-12
    assert second(h.value(u) + 0.9 * h.rho / 2 * u[:, 0] ** 2).min() < 0


def test_values_of_the_penalties():
    mcp = regularizers.build("mcp", lam=2.0, theta=3.0)
    scad = regularizers.build("scad", lam=2.0, a=3.7)
    x = torch.tensor([0.0, 1.0, -6.0, 100.0], dtype=torch.float64)[:, None]
    # MCP: 2|x| - x^2/6 up to theta lam = 6, then theta lam^2 / 2 = 6
    assert mcp.value(x).tolist() == pytest.approx([0.0, 2 - 1 / 6, 6.0, 6.0])
    # SCAD: lam |x| up to lam = 2, then the quadratic, then lam^2 (a + 1) / 2 = 9.4
    x = torch.tensor([1.0, 2.0, 3.0, 7.4, 50.0], dtype=torch.float64)[:, None]
    assert scad.value(x).tolist() == pytest.approx(
        [2.0, 4.0, (2 * 3.7 * 2 * 3 - 9 - 4) / 5.4, 9.4, 9.4]
    )
    en = regularizers.build("elastic_net", l1=0.1, l2=0.5)
    assert en.value(torch.tensor([3.0, -4.0])).item() == pytest.approx(0.7 + 12.5)


def test_l1_is_soft_threshold_and_elastic_net_closed_form():
    x = torch.tensor([-3.0, -0.5, 0.0, 0.2, 0.5, 2.0], dtype=torch.float64)
    soft = torch.tensor([-2.5, 0.0, 0.0, 0.0, 0.0, 1.5], dtype=torch.float64)
    assert torch.equal(regularizers.build("l1", lam=1.0).prox(x, 0.5), soft)
    en = regularizers.build("elastic_net", l1=1.0, l2=2.0)
    assert torch.allclose(en.prox(x, 0.5), soft / 3.0)


def test_l2_ball_projection_facts():
    h = regularizers.build("l2_ball", radius=2.0)
    torch.manual_seed(1)
    X = (
        torch.randn(6, 5, dtype=torch.float64)
        * torch.tensor([0.1, 0.3, 1.0, 3.0, 10.0, 0.0])[:, None]
    )
    P = h.prox(X, 0.7)
    inside = X.norm(dim=1) <= 2
    assert torch.equal(P[inside], X[inside])  # fixed points
    assert torch.allclose(
        P[~inside].norm(dim=1), torch.full(((~inside).sum(),), 2.0, dtype=X.dtype)
    )
    assert torch.allclose(
        P[~inside] * X[~inside].norm(dim=1, keepdim=True), 2 * X[~inside]
    )  # same direction
    Y = torch.randn(200, 5, dtype=torch.float64)
    Y = Y * (2 * torch.rand(200, 1, dtype=X.dtype) / Y.norm(dim=1, keepdim=True))
    # variational inequality <x - p, y - p> <= 0 for all y in the ball
    assert (((X - P)[:, None, :] * (Y[None] - P[:, None, :])).sum(-1) <= 1e-12).all()
    assert h.value(P).tolist() == [0.0] * 6
    assert torch.isinf(h.value(X)).tolist() == (~inside).tolist()
    assert h.rho == 0 and h.prox(X.float(), 1.0).dtype == torch.float32


def test_box_projection_facts():
    h = regularizers.build("box", lo=-0.5, hi=2.0)
    X = torch.tensor([[-1.0, 0.0, 3.0], [0.1, 1.9, -0.5]], dtype=torch.float64)
    P = h.prox(X, 0.3)
    assert torch.equal(P, torch.tensor([[-0.5, 0.0, 2.0], [0.1, 1.9, -0.5]], dtype=X.dtype))
    assert h.value(P).tolist() == [0.0, 0.0]
    assert h.value(X).tolist() == [math.inf, 0.0]


@pytest.mark.parametrize(
    "name,params,bad_step",
    [
        ("mcp", dict(theta=3.0), 3.0),
        ("mcp", dict(theta=0.5), 0.7),
        ("scad", dict(a=3.7), 2.7),
        ("scad", dict(a=2.5), 10.0),
    ],
)
def test_prox_refuses_step_at_or_above_one_over_rho(name, params, bad_step):
    h = regularizers.build(name, **params)
    with pytest.raises(UserError, match="1/rho"):
        h.prox(torch.ones(3), bad_step)
    h.prox(torch.ones(3), 0.99 * bad_step if bad_step == h.max_step() else 0.1)


@pytest.mark.parametrize(
    "name,params,match",
    [
        ("mcp", dict(theta=0.0), "theta must be > 0"),
        ("scad", dict(a=2.0), "a must be > 2"),
        ("box", dict(lo=1.0, hi=0.0), "lo = 1 must be <= hi"),
        ("l2_ball", dict(radius=0.0), "radius must be > 0"),
        (
            "l1",
            dict(lam=-1.0),
            r"regularizer.lam must be >= 0, got -1.0 \(as declared by regularizer l1\)",
        ),
        ("elastic_net", dict(l3=1.0), "no parameter l3"),
    ],
)
def test_bad_parameters(name, params, match):
    with pytest.raises(UserError, match=match):
        regularizers.build(name, **params)


def test_every_regularizer_has_a_config_and_is_registered():
    from pathlib import Path

    conf = Path(__file__).resolve().parent.parent / "conf" / "regularizer"
    assert (
        sorted(p.stem for p in conf.glob("*.yaml"))
        == regularizers.names()
        == sorted(["none", "l1", "elastic_net", "mcp", "scad", "l2_ball", "box"])
    )


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("name", regularizers.names())
def test_cuda_matches_cpu(name):
    h = regularizers.build(name)
    x = torch.randn(4, 1000, dtype=torch.float64)
    assert torch.allclose(h.prox(x.cuda(), 0.1).cpu(), h.prox(x, 0.1))
    assert torch.allclose(h.value(x.cuda()).cpu(), h.value(x))
