"""Per-client metrics (``metrics.per_client=true``): at every evaluation, each client's loss and
accuracy of the output model x on its own training data, and on the test set reweighted by its
label distribution: the rows of ``clients.csv`` (one per round and client) and the table of
``clients_summary.csv`` (per round: mean, std and worst 10% over the clients), which the run
writes (``runs.client_log``).

Reweighted test metrics of client i: the weighted mean over the test samples s with weight
w_s = p_i(y_s) / p_test(y_s), where p_i is the label distribution of client i's training data
and p_test that of the test set:

    test_loss_rw_i = sum_s w_s l(x; s) / sum_s w_s
                   = sum_c p_i(c) L_c / sum_{c in test} p_i(c),

L_c the mean test loss over the test samples of class c (classes absent from the test set drop
out and p_i is renormalised over the others); the same for accuracy. A client whose label
distribution equals the test set's gets the plain test metric.

Everything is computed in one forward pass over the clients' training samples and one over the
test set (``eval_batch`` samples at a time), then summed per client and per class with
``index_add_``: no loop over clients.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F

from ..common import metric_table as mt
from .oracle import Oracle

if TYPE_CHECKING:  # pandas loads with the first per-client table, not with every run
    import pandas as pd

METRICS = [m.name for m in mt.CLIENT]
COLUMNS = [mt.ROUND.name, "client", *METRICS]
WORST_SHARE = 0.1


@torch.no_grad()
def _per_sample(
    oracle: Oracle, x: torch.Tensor, inputs: torch.Tensor, targets: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Loss and correctness (0/1) of the model x on every sample, ``eval_batch`` at a time."""
    oracle.work.load(x)
    loss: list[torch.Tensor] = []
    correct: list[torch.Tensor] = []
    for s in range(0, len(targets), oracle.eval_batch):
        logits = oracle.work.module(inputs[s : s + oracle.eval_batch])
        yb = targets[s : s + oracle.eval_batch]
        loss.append(F.cross_entropy(logits, yb, reduction="none"))
        correct.append((logits.argmax(1) == yb).to(logits.dtype))
    return torch.cat(loss), torch.cat(correct)


def label_distributions(oracle: Oracle, num_classes: int) -> torch.Tensor:
    """(n, C): p_i(c), the share of class c among client i's training samples."""
    d = oracle.data
    mask = torch.arange(d.index.shape[1], device=d.index.device) < d.sizes[:, None]
    client = torch.arange(d.n, device=d.index.device)[:, None].expand_as(d.index)[mask]
    counts = torch.zeros(d.n, num_classes, dtype=d.x.dtype, device=d.x.device)
    counts.index_put_(
        (client, d.y[d.index[mask]]), torch.ones_like(client, dtype=d.x.dtype), accumulate=True
    )
    return counts / counts.sum(1, keepdim=True)


@torch.no_grad()
def evaluate(
    oracle: Oracle, x: torch.Tensor, test_x: torch.Tensor, test_y: torch.Tensor, num_classes: int
) -> dict[str, np.ndarray]:
    """Per client i (arrays of length n): ``train_loss`` f_i(x) and ``train_acc`` over client i's
    training samples, ``test_loss_rw`` and ``test_acc_rw`` (see the module docstring)."""
    d = oracle.data
    mask = torch.arange(d.index.shape[1], device=d.index.device) < d.sizes[:, None]
    ids = d.index[mask]
    client = torch.arange(d.n, device=d.index.device)[:, None].expand_as(d.index)[mask]
    loss, correct = _per_sample(oracle, x, d.x[ids], d.y[ids])
    sizes = d.sizes.to(loss.dtype)
    train_loss = (
        torch.zeros(d.n, dtype=loss.dtype, device=loss.device).index_add_(0, client, loss) / sizes
    )
    train_acc = torch.zeros_like(train_loss).index_add_(0, client, correct) / sizes
    t_loss, t_correct = _per_sample(oracle, x, test_x, test_y)
    per_class = torch.zeros(3, num_classes, dtype=t_loss.dtype, device=t_loss.device)
    for row, v in enumerate((t_loss, t_correct, torch.ones_like(t_loss))):
        per_class[row].index_add_(0, test_y, v)
    present = per_class[2] > 0
    mean_c = torch.where(
        present, per_class[:2] / per_class[2].clamp_min(1), torch.zeros_like(per_class[:2])
    )
    p = label_distributions(oracle, num_classes) * present
    rw = (p @ mean_c.T) / p.sum(1, keepdim=True)  # (n, 2): loss, accuracy
    out = torch.stack([train_loss, train_acc, rw[:, 0], rw[:, 1]]).double().cpu().numpy()
    return dict(zip(METRICS, out))


def rows(t: int, values: dict[str, np.ndarray]) -> list[dict[str, float]]:
    """The ``clients.csv`` rows of round t."""
    n = len(values[METRICS[0]])
    return [
        {mt.ROUND.name: t, "client": i, **{m: float(values[m][i]) for m in METRICS}}
        for i in range(n)
    ]


def worst(v: pd.Series, higher_is_worse: bool) -> float:
    """Mean of the worst 10% of the values (at least one): the highest losses, lowest accuracies."""
    k = max(1, math.ceil(WORST_SHARE * len(v)))
    ordered = np.sort(v.to_numpy(float))
    return float(np.mean(ordered[-k:] if higher_is_worse else ordered[:k]))


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per round: ``<metric>_mean``, ``<metric>_std`` (sample std over clients) and
    ``<metric>_worst10`` of every per-client metric."""
    import pandas as pd

    out = {}
    for t, g in table.groupby(mt.ROUND.name, sort=True):
        row = {}
        for c in mt.CLIENT:
            m = c.name
            row[f"{m}_mean"] = g[m].mean()
            row[f"{m}_std"] = g[m].std(ddof=1) if len(g) > 1 else 0.0
            row[f"{m}_worst10"] = worst(g[m], higher_is_worse=c.lower_is_better)
        out[t] = row
    return pd.DataFrame.from_dict(out, orient="index").rename_axis(mt.ROUND.name).reset_index()
