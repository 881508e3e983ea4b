"""The one table of the metrics a run records (the columns of ``metrics.csv``): per metric its
name, its label in the papers' notation, whether lower or higher is better, whether the papers
draw it on a log scale, how a number of it is printed, and its help text. The engine computes
the built-in metrics (:mod:`engine.metrics`); every reader, figure, table, claim and help text
looks them up here (:func:`metric`), by the constants below, never by a bare name.

A plugin's metric is one :class:`Metric` with its computation ``compute(x, h)`` (x: the output
model, a 1-D tensor on the run's device; h: the regularizer; returns a number or a 0-d
tensor), registered like every other plugin (:mod:`.registry`): an entry point of the group
``fedprox_cli.metrics`` (``l2 = my_pkg:L2``) or :func:`register` (docs/extending.md). Every
run then records it in ``metrics.csv``, and ``fedrun-plot --y``, ``fedrun-table --metric``
and ``sweep_metric`` take it by name.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from .registry import Registry

Compute = Callable[[Any, Any], Any]
"""A plugin metric's computation: ``compute(x, h)`` -> a number or a 0-d tensor."""


class Direction(NamedTuple):
    """How a metric improves: the sign that makes better values smaller, and its words."""

    sign: int
    best: str  # "lowest"
    improves: str  # "falls"
    beyond: str  # "below": a better value lies below the other
    ends: str  # "lower"


LOWER = Direction(1, "lowest", "falls", "below", "lower")
HIGHER = Direction(-1, "highest", "rises", "above", "higher")


@dataclass(frozen=True)
class Metric:
    """One column of ``metrics.csv`` (or of ``clients.csv``: :data:`CLIENT`).

    ``kind``: ``counter`` (counted by the run: round, time, gradients, prox calls, bytes),
    ``loss`` (a loss of the model: a row whose loss is not finite describes no model) or
    ``model`` (a property of the model x)."""

    name: str
    words: str  # what it is, in words ("stationarity")
    symbol: str = ""  # the papers' symbol ("||G_s(x)||²"), if any
    paper: str = ""  # the words the papers' figures print for it, where not the label
    lower_is_better: bool = False
    log: bool = False  # drawn on a log y axis, as the papers draw it
    fmt: str = ".4f"  # a number of it, as a table cell prints it
    percent: bool = False  # a fraction (0-1) figures and tables show in percent (:meth:`shown`)
    help: str = ""
    kind: str = "model"
    compute: Compute | None = None  # a plugin's computation (the built-ins': engine.metrics)

    def label(self, symbol: str | None = None) -> str:
        """Its axis label: the words and the papers' symbol (``symbol``: another one, e.g. a
        paper's own)."""
        return " ".join(s for s in (self.words, self.symbol if symbol is None else symbol) if s)

    @property
    def direction(self) -> Direction:
        return LOWER if self.lower_is_better else HIGHER

    @property
    def unit(self) -> str:
        """What a table for people or a figure's axis says after its name: `` (%)`` for a
        percentage."""
        return " (%)" if self.percent else ""

    def shown(self, value: float) -> float:
        """``value`` as a table for people shows it: a fraction in percent (0.8253 -> 82.53)."""
        return 100 * value if self.percent else value

    def said(self, value: float) -> str:
        """``value`` in a sentence: a fraction in percent (0.2 -> ``20%``), else ``0.2``."""
        return f"{100 * value:g}%" if self.percent else f"{value:g}"

    def format_for(self, spread: float) -> str:
        """The format of a table's numbers of it (:meth:`shown`) whose largest std over seeds is
        ``spread`` (as shown; NaN: no cell holds two seeds): for a percentage, the decimals that
        give that std two significant digits (std 1.2: ``82.5 ± 1.2``; 0.43: ``82.53 ± 0.43``;
        at most 3), one decimal without a spread (the digits a single run supports are
        unknown); else :attr:`fmt`."""
        if not self.percent:
            return self.fmt
        if not (spread > 0 and math.isfinite(spread)):
            return ".1f"
        order = int(f"{spread:.1e}".split("e")[1])  # of the std at two digits: 0.999 -> 1.0
        return f".{min(3, max(0, 1 - order))}f"

    def number(self, value: object) -> str:
        """``value`` in its format; ``-`` when it is not a number."""
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return format(value, self.fmt) if ok else "-"


def _contract(obj: object) -> str | None:
    if not isinstance(obj, Metric):
        return f"it must be a fedprox_cli.common.metric_table.Metric (got {obj!r})"
    if not callable(obj.compute):
        return "it must come with its computation, compute(x, h) -> a number"
    return None


_REGISTRY: Registry[Metric] = Registry("metric", "metrics", _contract)
_BUILT_IN: dict[str, Metric] = {}


def _own(m: Metric) -> Metric:
    """A built-in metric (computed by the engine or counted by the run): in the table, in the
    order of ``metrics.csv``'s columns."""
    _BUILT_IN[m.name] = m
    return m


ROUND = _own(Metric("round", "round", kind="counter", fmt=".0f", help="rounds done"))
TIME = _own(
    Metric(
        "time_s",
        "wall time (s, training only)",
        lower_is_better=True,
        kind="counter",
        help="seconds of training so far (evaluations not counted)",
    )
)
GRAD_EVALS = _own(
    Metric(
        "grad_evals",
        "gradient evaluations",
        lower_is_better=True,
        kind="counter",
        fmt=".0f",
        help="stochastic gradient rows computed so far, all clients",
    )
)
PROX_CALLS = _own(
    Metric(
        "prox_calls",
        "prox evaluations",
        lower_is_better=True,
        kind="counter",
        fmt=".0f",
        help="evaluations of prox_{s h} so far",
    )
)
BYTES_UP = _own(
    Metric(
        "bytes_up",
        "bytes sent up (clients to server)",
        lower_is_better=True,
        kind="counter",
        fmt=".0f",
        help="bytes the clients sent so far",
    )
)
BYTES_DOWN = _own(
    Metric(
        "bytes_down",
        "bytes sent down (server to clients)",
        lower_is_better=True,
        kind="counter",
        fmt=".0f",
        help="bytes the server sent so far",
    )
)
TRAIN_LOSS = _own(
    Metric(
        "train_loss",
        "train loss",
        "f(x)",
        paper="training loss",
        lower_is_better=True,
        fmt=".4g",
        kind="loss",
        help="f(x) = (1/n) sum_i f_i(x), over all training data",
    )
)
OBJECTIVE = _own(
    Metric(
        "objective",
        "objective",
        "f(x) + h(x)",
        lower_is_better=True,
        fmt=".4g",
        kind="loss",
        help="f(x) + h(x), the composite objective",
    )
)
TEST_LOSS = _own(
    Metric(
        "test_loss",
        "test loss",
        lower_is_better=True,
        fmt=".4g",
        help="the loss of x on the test set",
    )
)
TEST_ACC = _own(
    Metric(
        "test_acc",
        "test accuracy",
        percent=True,
        help="the accuracy of x on the test set (a fraction; in percent in figures and in "
        "fedrun-table's Markdown and LaTeX)",
    )
)
STATIONARITY = _own(
    Metric(
        "stationarity",
        "stationarity",
        "||G_s(x)||²",
        lower_is_better=True,
        log=True,
        fmt=".3g",
        help="||G_s(x)||², the proximal gradient mapping at the algorithm's step s "
        "(= ||grad f(x)||² when h = 0)",
    )
)
HOYER = _own(
    Metric(
        "hoyer",
        "Hoyer sparsity",
        paper="sparsity (Hoyer)",
        help="(sqrt(d) - ||x||_1/||x||_2)/(sqrt(d) - 1): 1 sparsest",
    )
)
NNZ_FRAC = _own(
    Metric(
        "nnz_frac",
        "share of non-zero entries",
        lower_is_better=True,
        help="the share of entries of x that are not 0",
    )
)
for _m in _BUILT_IN.values():
    _REGISTRY[_m.name] = _m

BUILT_IN = tuple(_BUILT_IN)
COUNTERS = tuple(m.name for m in _BUILT_IN.values() if m.kind == "counter")
LOSSES = tuple(m.name for m in _BUILT_IN.values() if m.kind == "loss")
COMPUTED = tuple(m for m in _BUILT_IN.values() if m.kind != "counter")  # by engine.metrics
SHOWN = (TEST_ACC, OBJECTIVE, STATIONARITY)  # a run's one-line recap, a job's table
WATCHED = (TEST_ACC, TRAIN_LOSS, OBJECTIVE, STATIONARITY)  # fedrun-status's columns

# clients.csv (metrics.per_client: engine.clients): each client's, of the model x
CLIENT_TRAIN_LOSS = Metric("train_loss", "client train loss", lower_is_better=True, kind="loss")
CLIENT_TRAIN_ACC = Metric("train_acc", "client train accuracy", percent=True)
CLIENT_TEST_LOSS_RW = Metric("test_loss_rw", "client test loss (reweighted)", lower_is_better=True)
CLIENT_TEST_ACC_RW = Metric("test_acc_rw", "client test accuracy\n(reweighted)", percent=True)
CLIENT = (CLIENT_TRAIN_LOSS, CLIENT_TRAIN_ACC, CLIENT_TEST_LOSS_RW, CLIENT_TEST_ACC_RW)

register, _names, _lookup, _ = _REGISTRY.calls()


def names() -> list[str]:
    """Every metric's name: the built-ins in ``metrics.csv``'s order, then the plugins'."""
    return [*_BUILT_IN, *(n for n in _names() if n not in _BUILT_IN)]


def plugins() -> list[Metric]:
    """The installed plugins' metrics (their entry points loaded), which a run computes after
    the built-ins (:func:`engine.metrics.evaluate`)."""
    return [_REGISTRY[n] for n in names() if n not in _BUILT_IN]


def metric(name: str) -> Metric:
    """The entry of ``name`` (a plugin's loaded on demand). A column the table does not know (a
    run written by other code) reads as itself: its name as its label, higher is better."""
    if name not in _REGISTRY and name in _names():
        return _lookup(name)
    return _REGISTRY.get(name) or Metric(name, name)


def label(name: str) -> str:
    """``name``'s axis label (:meth:`Metric.label`)."""
    return metric(name).label()
