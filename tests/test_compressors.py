"""Compressors: what they keep, their byte cost, their (un)biasedness / contraction, seeding."""

from __future__ import annotations

import math

import pytest
import torch

from fedprox_cli.common.errors import UserError
from fedprox_cli.operators import compressors


@pytest.fixture
def V():
    return torch.randn(6, 200, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def test_topk_keeps_the_largest_entries_at_8_bytes_each(V):
    out, nbytes = compressors.build("topk", ratio=0.1)(V)
    assert nbytes == 6 * 20 * 8
    assert (out != 0).sum(1).tolist() == [20] * 6
    kept = out != 0
    assert torch.equal(out[kept], V[kept])
    assert (
        V.abs()[kept].view(6, 20).min(1).values >= V.abs().masked_fill(kept, 0).max(1).values
    ).all()
    # contractive with q^2 = 1 - k/d (FedCEF Definition 1)
    assert ((out - V).square().sum(1) <= (1 - 20 / 200) * V.square().sum(1)).all()


def test_randk_contractive_unscaled_and_unbiased_scaled(V):
    plain, scaled = (
        compressors.build("randk", ratio=0.1),
        compressors.build("randk", ratio=0.1, scaled=True),
    )
    draws = [plain(V, seed) for seed in range(400)]
    assert all(b == 6 * 20 * 8 for _, b in draws)
    err = torch.stack([(o - V).square().sum(1) for o, _ in draws]).mean(0)
    torch.testing.assert_close(err, 0.9 * V.square().sum(1), rtol=0.05, atol=0)
    mean = torch.stack([scaled(V, seed)[0] for seed in range(400)]).mean(0)
    assert (mean - V).norm() < 0.2 * V.norm()  # unbiased: the mean error is O(1/sqrt(draws))
    assert (torch.stack([o for o, _ in draws]).mean(0) - 0.1 * V).norm() < 0.1 * V.norm()


def test_randk_is_reproducible_from_its_seed(V):
    c = compressors.build("randk", ratio=0.05)
    assert torch.equal(c(V, 7)[0], c(V, 7)[0])
    assert not torch.equal(c(V, 7)[0], c(V, 8)[0])
    rows = c(V, 7)[0] != 0
    assert not torch.equal(rows[0], rows[1])  # independent per row


def test_qsgd_is_unbiased_on_its_grid_with_stated_bytes(V):
    c = compressors.build("qsgd", levels=4)
    out, nbytes = c(V, 0)
    assert nbytes == 6 * (4 + math.ceil(200 * (1 + 3) / 8))
    norm = V.norm(dim=1, keepdim=True)
    levels = out.abs() * 4 / norm
    torch.testing.assert_close(levels, levels.round(), rtol=0, atol=1e-9)
    assert ((out == 0) | (out.sign() == V.sign())).all()
    mean = torch.stack([c(V, seed)[0] for seed in range(400)]).mean(0)
    assert (mean - V).norm() < 0.1 * V.norm()


def test_zero_rows_compress_to_zero():
    Z = torch.zeros(2, 10)
    for name, p in [("topk", {"ratio": 0.5}), ("randk", {"ratio": 0.5}), ("qsgd", {"levels": 2})]:
        assert torch.equal(compressors.build(name, **p)(Z, 0)[0], Z)


@pytest.mark.parametrize(
    "name,params",
    [
        ("topk", {"ratio": 0}),
        ("randk", {"ratio": 1.5}),
        ("randk", {"scaled": "yes"}),
        ("qsgd", {"levels": 0}),
        ("qsgd", {"levels": 2.5}),
        ("topk", {"k": 3}),
    ],
)
def test_bad_parameters_are_refused(name, params):
    with pytest.raises(UserError):
        compressors.build(name, **params)
