"""Per-round metrics of the output model x (docs/algorithms.md; the columns: docs/usage.md).

- train_loss = f(x) = (1/n) sum_i f_i(x), exact over all training data; objective = f(x) + h(x)
- stationarity = ||G_s(x)||^2, G_s(x) = (x - prox_{s h}(x - s grad f(x))) / s, the proximal
  gradient mapping (FedCanon eq. 9; FedNMap's ||F_nat^gamma||^2 with s = gamma); = ||grad f||^2
  when h = 0
- hoyer = (sqrt(d) - ||x||_1 / ||x||_2) / (sqrt(d) - 1) (1 for x = 0); nnz_frac = share of non-zero
entries
"""

from __future__ import annotations

import math

import torch

from ..common.run_files import COLUMNS
from ..operators.regularizers import Regularizer
from .oracle import Oracle


def prox_grad_mapping(
    x: torch.Tensor, grad: torch.Tensor, h: Regularizer, s: float
) -> torch.Tensor:
    """G_s(x) = (x - prox_{s h}(x - s grad)) / s."""
    return (x - h.prox(x - s * grad, s)) / s


def hoyer(x: torch.Tensor) -> torch.Tensor:
    """Hoyer sparsity (sqrt(d) - ||x||_1 / ||x||_2) / (sqrt(d) - 1) of all entries of x: 0 for a
    vector with equal |entries|, 1 for one non-zero entry; the zero vector counts as sparsest
    (1)."""
    d = x.numel()
    l2 = x.norm()
    ratio = x.abs().sum() / l2.clamp_min(torch.finfo(x.dtype).tiny)
    return torch.where(l2 > 0, (math.sqrt(d) - ratio) / (math.sqrt(d) - 1), torch.ones_like(l2))


@torch.no_grad()
def _model_stats(x: torch.Tensor, h: Regularizer) -> dict[str, torch.Tensor]:
    return {"hoyer": hoyer(x), "nnz_frac": (x != 0).float().mean(), "h": h.value(x)}


def evaluate(
    x: torch.Tensor,
    oracle: Oracle,
    h: Regularizer,
    s: float,
    test_x: torch.Tensor,
    test_y: torch.Tensor,
) -> dict[str, float]:
    """All model metrics of x, computed on the device and moved to the host once."""
    f, g = oracle.full(x, with_grad=True)
    test_loss, test_acc = oracle.test(x, test_x, test_y)
    stats = _model_stats(x, h)
    with torch.no_grad():
        G = prox_grad_mapping(x, g, h, s)
    vals = (
        torch.stack(
            [
                f,
                f + stats["h"],
                test_loss,
                test_acc,
                G.square().sum(),
                stats["hoyer"],
                stats["nnz_frac"],
            ]
        )
        .double()
        .cpu()
        .tolist()
    )
    return dict(zip(COLUMNS[COLUMNS.index("train_loss") :], vals, strict=True))
