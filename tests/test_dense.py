"""The hand-written dense networks compute what autograd computes, bit for bit: the loop
engine's (engine/dense.py) what autograd gives client by client, the vmap engine's
(engine/dense_vmap.py) what ``vmap(grad_and_value(...))`` gives chunk by chunk: gradients,
losses, fused local steps, and every algorithm's rounds under every regularizer."""

import numpy as np
import pytest
import torch
from torch import nn

from fedprox_cli import algorithms, data
from fedprox_cli.engine import dense, models
from fedprox_cli.engine.client_data import ClientData
from fedprox_cli.engine.dense import dense_activations
from fedprox_cli.engine.models import FlatModel
from fedprox_cli.engine.oracle import Oracle
from fedprox_cli.engine.vmap import VmapEngine
from fedprox_cli.operators import compressors, regularizers

N_CLIENTS = 5
DENSE = ("linear", "mlp", "sigmoid_mlp")
ENGINES = ("loop", "vmap")
CHUNK = 2  # the vmap engine's rows per call: 5 clients in calls of 2, 2 and 1


@pytest.fixture(scope="module")
def digits():
    ds = data.load("digits")
    clients = data.partition("dirichlet", ds.train_y.numpy(), N_CLIENTS, 0, min_size=10, alpha=0.5)
    return ds, clients


def oracles(digits, model, dtype=torch.float32, B=16, engine="loop"):
    """Two oracles of the same model and engine: the hand-written path and autograd."""
    ds, clients = digits
    return oracles_of(ds.train_x, ds.train_y, clients, model, dtype, B, engine)


def oracles_of(x, y, clients, model, dtype=torch.float32, B=16, engine="loop", classes=10):
    """:func:`oracles` on the samples ``x``, labels ``y`` split as ``clients``."""
    made = []
    for _ in range(2):
        torch.manual_seed(0)
        width = {} if model == "linear" else {"hidden": 24}
        flat = FlatModel(models.build(model, tuple(x.shape[1:]), classes, **width).to(dtype))
        cd = ClientData.build(x.to(dtype), y, clients, "cpu")
        made.append(Oracle(flat, cd, B, seed=3, engine=engine, chunk=CHUNK))
    hand, auto = made
    assert hand.engine.kind == "dense"
    if engine == "loop":
        auto.engine.dense = None  # the autograd path of the same engine
    else:  # the transform's engine
        auto.engine = VmapEngine(auto.model, auto.data.samples, CHUNK)
    assert auto.engine.kind == "autograd"
    return hand, auto


class LinearPlus(nn.Linear):
    """A subclass: its forward may be anything, so it is not taken by hand."""


@pytest.mark.parametrize(
    "module,dense",
    [
        (models.linear((1, 8, 8), 10), True),
        (models.mlp((1, 8, 8), 10), True),
        (models.sigmoid_mlp((1, 8, 8), 10), True),
        (models.cnn((1, 8, 8), 10), False),
        (nn.Sequential(nn.Flatten(), nn.Linear(64, 8), nn.Tanh(), nn.Linear(8, 10)), False),
        (nn.Sequential(nn.Flatten(), LinearPlus(64, 10)), False),
        (nn.Sequential(nn.Flatten(), nn.Linear(64, 10, bias=False)), False),
        (
            nn.Sequential(nn.Flatten(), nn.Linear(64, 8), nn.ReLU(), nn.ReLU(), nn.Linear(8, 10)),
            False,
        ),
        (nn.Sequential(nn.Linear(64, 10)), False),
        (nn.Sequential(nn.Flatten(2), nn.Linear(64, 10)), False),
    ],
)
def test_only_exactly_the_dense_layers_are_taken_by_hand(module, dense):
    assert (dense_activations(module) is not None) == dense


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("model", DENSE)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("B", [16, None])  # None: full local data, zero weights on the padding
def test_gradients_losses_and_local_steps_are_autograds_bit_for_bit(
    digits, engine, model, dtype, B
):
    hand, auto = oracles(digits, model, dtype, B, engine)
    gen = torch.Generator().manual_seed(1)
    X = hand.model.flat() + 0.1 * torch.randn(N_CLIENTS, hand.model.d, generator=gen, dtype=dtype)
    for k in range(2):
        G, L = hand.grad(X, 1, k)
        G_ref, L_ref = auto.grad(X, 1, k)
        assert torch.equal(G, G_ref) and torch.equal(L, L_ref)
    out = torch.empty_like(X)
    assert hand.grad(X, 1, 1, out=out)[0] is out and torch.equal(out, G_ref)
    clients = torch.tensor([0, 2, 3])
    for shift in (
        torch.randn(len(clients), hand.model.d, generator=gen, dtype=dtype),
        torch.randn(hand.model.d, generator=gen, dtype=dtype),
        0.0,
        0.25,
    ):
        got = hand.sgd_steps(X[clients].clone(), 2, 3, 0.05, shift, clients)
        ref = auto.sgd_steps(X[clients].clone(), 2, 3, 0.05, shift, clients)
        assert torch.equal(got, ref)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("model", DENSE)
@pytest.mark.parametrize("features,classes", [(30, 2), (5, 3), (64, 10)])
def test_the_gradients_are_autograds_at_other_shapes(engine, model, features, classes):
    """Other widths take other kernels (e.g. a batched product written into a strided view of
    a row sums in another order than into its own tensor at 2 x 30 but not at 10 x 64): the
    numbers stay autograd's at each."""
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(90, features, generator=gen)
    y = torch.randint(0, classes, (90,), generator=gen)
    clients = [np.arange(i, 90, N_CLIENTS) for i in range(N_CLIENTS)]
    hand, auto = oracles_of(x, y, clients, model, engine=engine, classes=classes)
    X = hand.model.flat() + 0.1 * torch.randn(N_CLIENTS, hand.model.d, generator=gen)
    for k in range(2):
        G, L = hand.grad(X, 0, k)
        G_ref, L_ref = auto.grad(X, 0, k)
        assert torch.equal(G, G_ref) and torch.equal(L, L_ref)
    shift = torch.randn(hand.model.d, generator=gen)
    got = hand.sgd_steps(X.clone(), 1, 3, 0.05, shift)
    assert torch.equal(got, auto.sgd_steps(X.clone(), 1, 3, 0.05, shift))


def rounds(oracle, name, h, T=2, K=2):
    alg = algorithms.build(name)
    h = regularizers.build("none") if alg.smooth_only else h
    env = algorithms.Env(oracle, h, compressors.build("identity"), N_CLIENTS, K, T)
    state = alg.init(oracle.model.flat(), N_CLIENTS)
    for t in range(T):
        env.start_round(t)
        state = alg.round(state, env, t)
    return state


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", algorithms.names())
@pytest.mark.parametrize("reg", regularizers.names())
def test_every_algorithm_and_regularizer_runs_the_same_numbers(digits, engine, name, reg):
    hand, auto = oracles(digits, "mlp", engine=engine)
    flat = {"mcp": {"theta": 100.0}, "scad": {"a": 100.0}}.get(reg, {})  # 1/rho above any step
    got, ref = (rounds(o, name, regularizers.build(reg, **flat)) for o in (hand, auto))
    assert got.keys() == ref.keys()
    for key in ref:
        assert torch.equal(torch.as_tensor(got[key]), torch.as_tensor(ref[key])), key


@pytest.mark.parametrize("model", DENSE)
@pytest.mark.parametrize("B,cap,at_once", [(16, None, True), (3, None, False), (16, 1000, False)])
def test_mini_batches_gathered_at_once_or_step_by_step_give_autograds_numbers(
    model, B, cap, at_once, monkeypatch
):
    """A client's K mini-batches are gathered in one call where each one's start stays aligned
    (30 float32 features: B = 16 is 1,920 bytes, 30 x 64) and they fit ``GATHER_BYTES``, else
    step by step (B = 3: 360 bytes; or a cap below 2 x 1,920): each path gives autograd's
    rounds, local steps with a prox (FedNMap) and fused SGD steps (FedCanon), bit for bit."""
    if cap is not None:
        monkeypatch.setattr(dense, "GATHER_BYTES", cap)
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(120, 30, generator=gen), torch.randint(0, 10, (120,), generator=gen)
    clients = [np.arange(i, 120, N_CLIENTS) for i in range(N_CLIENTS)]
    for name in ("fednmap", "fedcanon"):
        hand, auto = oracles_of(x, y, clients, model, B=B)
        got, ref = (rounds(o, name, regularizers.build("l1", lam=0.01)) for o in (hand, auto))
        assert (hand.engine.dense.ids is None) == at_once
        for key in ref:
            assert torch.equal(torch.as_tensor(got[key]), torch.as_tensor(ref[key])), key


def test_a_wrapped_vmap_engine_wraps_the_hand_written_call_or_the_transforms(digits):
    """Joined seed batches wrap the engine's own call (by hand for a dense network); a compile
    wraps the transform's call, which it traces."""
    hand, _ = oracles(digits, "mlp", engine="vmap")
    vmap = hand.engine
    got = []
    joined = vmap.wrapped(lambda call: got.append(call) or call)
    compiled = vmap.wrapped(lambda call: got.append(call) or call, transform=True)
    assert got == [vmap.dense, vmap.transform] and vmap.dense is not None
    assert joined.kind == vmap.kind == "dense" and compiled.kind == "autograd"
    X = hand.model.flat().expand(N_CLIENTS, -1).contiguous()
    ref = hand.sgd_steps(X.clone(), 0, 2, 0.05)
    hand.engine = joined  # the flat call's steps, as a seed batch takes them
    assert torch.equal(hand.sgd_steps(X.clone(), 0, 2, 0.05), ref)
