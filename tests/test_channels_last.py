"""The loop engine feeds a network with 2-D convolutions its mini-batches channels-last on the
CPU (engine/loop.py): the same function, its numbers within float32 rounding of the contiguous
layout's, bounded against float64 for every algorithm and regularizer."""

import pytest
import torch
from test_dense import N_CLIENTS, digits, rounds  # noqa: F401 (digits: a fixture)

from fedprox_cli import algorithms
from fedprox_cli.engine import models
from fedprox_cli.engine.client_data import ClientData
from fedprox_cli.engine.models import FlatModel
from fedprox_cli.engine.oracle import Oracle
from fedprox_cli.operators import regularizers

RTOL, ATOL = 1e-4, 1e-5  # one float32 gradient against float64
FACTOR, REL = 4.0, 1e-4  # rounds: see test_every_algorithm_and_regularizer_within_float32...


def oracle(digits, dtype, layout=True, model="cnn"):  # noqa: F811 (the fixture's value)
    ds, clients = digits
    torch.manual_seed(0)
    flat = FlatModel(models.build(model, ds.input_shape, 10).to(dtype))
    cd = ClientData.build(ds.train_x.to(dtype), ds.train_y, clients, "cpu")
    o = Oracle(flat, cd, 16, seed=3, engine="loop")
    o.engine.channels_last = o.engine.channels_last and layout
    return o


def test_only_convolution_networks_on_the_cpu_go_channels_last(digits):  # noqa: F811
    assert oracle(digits, torch.float32).engine.kind == "autograd, channels-last"
    assert oracle(digits, torch.float32, model="mlp").engine.kind == "dense"
    assert oracle(digits, torch.float32, model="cnn", layout=False).engine.kind == "autograd"


def test_gradients_agree_with_the_contiguous_layout_and_float64(digits):  # noqa: F811
    cl32, nchw32, ref = (
        oracle(digits, torch.float32),
        oracle(digits, torch.float32, layout=False),
        oracle(digits, torch.float64, layout=False),
    )
    gen = torch.Generator().manual_seed(1)
    X = ref.model.flat() + 0.1 * torch.randn(N_CLIENTS, ref.model.d, generator=gen).double()
    G_ref, L_ref = ref.grad(X, 1, 0)
    G_cl, L_cl = cl32.grad(X.float(), 1, 0)
    G_nchw, _ = nchw32.grad(X.float(), 1, 0)
    torch.testing.assert_close(G_cl.double(), G_ref, rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(L_cl.double(), L_ref, rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(G_cl, G_nchw, rtol=RTOL, atol=ATOL)
    assert cl32.engine.channels_last and not nchw32.engine.channels_last


@pytest.mark.parametrize("name", algorithms.names())
@pytest.mark.parametrize("reg", regularizers.names())
def test_every_algorithm_and_regularizer_within_float32_of_float64(digits, name, reg):  # noqa: F811
    """Each state entry after 2 rounds in float32 channels-last is as close to float64 as the
    contiguous float32 path's (within FACTOR times its distance), or within REL of the entry's
    largest value. Neither bound alone: a correction such as FedCanon's (z - x) / (beta K)
    multiplies a float32 rounding of x by 1 / (beta K), and a nonconvex prox (mcp, scad) can
    put a coordinate on either side of its threshold, so float32's own distance from float64
    varies by orders of magnitude between entries."""
    flat = {"mcp": {"theta": 100.0}, "scad": {"a": 100.0}}.get(reg, {})  # 1/rho above any step
    h = regularizers.build(reg, **flat)
    cl = rounds(oracle(digits, torch.float32), name, h)
    nchw = rounds(oracle(digits, torch.float32, layout=False), name, h)
    ref = rounds(oracle(digits, torch.float64, layout=False), name, h)
    assert cl.keys() == ref.keys()
    for key in ref:
        r = torch.as_tensor(ref[key]).double()
        err_cl = (torch.as_tensor(cl[key]).double() - r).abs().max().item()
        err_nchw = (torch.as_tensor(nchw[key]).double() - r).abs().max().item()
        assert err_cl <= max(FACTOR * err_nchw, REL * r.abs().max().item()), (key, err_cl)
