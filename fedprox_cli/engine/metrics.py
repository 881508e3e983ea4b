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
from collections.abc import Sequence

import torch

from ..common import metric_table as mt
from ..common.plugin_calls import calling
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
    return {mt.HOYER.name: hoyer(x), mt.NNZ_FRAC.name: (x != 0).float().mean(), "h": h.value(x)}


def evaluate(
    x: torch.Tensor,
    oracle: Oracle,
    h: Regularizer,
    s: float,
    test_x: torch.Tensor,
    test_y: torch.Tensor,
    plugins: Sequence[mt.Metric] = (),
) -> dict[str, float]:
    """All model metrics of x (:data:`metric_table.COMPUTED`), computed on the device and moved
    to the host once; then each of ``plugins`` (:func:`metric_table.plugins`) by its own
    ``compute(x, h)``."""
    f, g = oracle.full(x, with_grad=True)
    test_loss, test_acc = oracle.test(x, test_x, test_y)
    stats = _model_stats(x, h)
    with torch.no_grad():
        G = prox_grad_mapping(x, g, h, s)
    values = {
        mt.TRAIN_LOSS.name: f,
        mt.OBJECTIVE.name: f + stats["h"],
        mt.TEST_LOSS.name: test_loss,
        mt.TEST_ACC.name: test_acc,
        mt.STATIONARITY.name: G.square().sum(),
        **stats,
    }
    names = [m.name for m in mt.COMPUTED]
    row = dict(zip(names, torch.stack([values[n] for n in names]).double().cpu().tolist()))
    for m in plugins:
        compute = m.compute
        assert compute is not None  # the registry's contract
        with calling(compute, "metric", "compute(x, h)", m.name), torch.no_grad():
            row[m.name] = float(torch.as_tensor(compute(x, h)).double())
    return row
