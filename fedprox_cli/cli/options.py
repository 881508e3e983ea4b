"""What ``fedrun-plot``, ``fedrun-table`` and the analysis scripts share on the command line:
their common options, the renames ``--label``/``--labels`` give, and how a command ends (one
line per error, never a traceback)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from ..analysis.renames import Renames, from_arguments
from ..analysis.run import FINALS
from ..common import guarded, streams
from ..common import metric_table as mt
from ..common.dependencies import missing
from ..common.errors import UserError, describe, first_line, require


def _repeated(p: argparse.ArgumentParser, flag: str, metavar: str, help: str) -> None:
    """A text option that may be given again and again (each value kept, in order)."""
    p.add_argument(
        flag, action="append", default=[], type=streams.as_text, metavar=metavar, help=help
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments ``fedrun-plot`` and ``fedrun-table`` share (argparse parser ``p``)."""
    _repeated(
        p,
        "--where",
        "KEY=VALUE",
        "keep runs whose config has KEY=VALUE (a dotted key, or a config group "
        "such as algorithm=fedcanon_fig2/fedavg), or one of KEY=V1,V2,...; repeatable",
    )
    p.add_argument(
        "--final",
        choices=FINALS,
        default="last",
        help="a run's final value: its last evaluation (last, the default) or the mean "
        "of its last 10%% of evaluations, at least one (tail)",
    )


def metrics_help(default: mt.Metric) -> str:
    """The help of a metric option: the metrics.csv columns a figure or a table reads (the
    installed plugins' included), the default, and the one ``--slope`` reads."""
    shown = ", ".join(f"{m.name} ({m.label()})" for m in map(mt.metric, mt.names()))
    return (
        f"a metrics.csv column: {shown}; default {default.name}, with --slope "
        f"{mt.STATIONARITY.name}"
    )


def add_label_arguments(p: argparse.ArgumentParser, what: str) -> None:
    """``--label KEY=TEXT`` and ``--labels FILE``: renames of ``what`` (see
    :class:`..analysis.renames.Renames`)."""
    _repeated(
        p,
        "--label",
        "KEY=TEXT",
        f"rename {what}: KEY a value (fedcanon=FedCanon), a config key or metric "
        "(algorithm.beta=β) or a whole legend label (split at the last '='); one that "
        "renames nothing is an error; repeatable",
    )
    p.add_argument(
        "--labels",
        type=Path,
        metavar="FILE",
        help="a YAML mapping of such renames (keys may hold '=': 'partition=dir/0.1': Dir(0.1))",
    )


def names(args: argparse.Namespace) -> Renames:
    """The renames of ``--labels FILE`` and ``--label KEY=TEXT`` (these win; each must rename
    something: :class:`..analysis.renames.Renames`)."""
    loaded = {}
    if args.labels is not None:
        try:
            loaded = guarded.read_yaml(args.labels)
        except guarded.Unreadable as e:
            raise UserError(f"--labels {args.labels} is not YAML ({e.why})") from None
        require(
            isinstance(loaded, dict), f"--labels {args.labels} must be a mapping of label: text"
        )
    return from_arguments(args.label, {str(k): str(v) for k, v in loaded.items()})


def script(prog: str, body: Callable[[Callable[[str], None]], int]) -> int:
    """Run ``body(warn)``, ``warn`` printing one ``prog: ...`` line on stderr; a user error or
    an unreadable / unwritable file is one line and exit code 2, anything else one line and
    exit code 1: never a traceback."""

    def warn(message: str) -> None:
        streams.err(f"{prog}: {message}")

    try:
        return body(warn)
    except (UserError, OSError) as e:
        warn(f"error: {describe(e)}")
        return 2
    except Exception as e:  # noqa: BLE001 -- a bug: still one line, with its type
        if missing(e):  # a package that is not installed: the environment's fault
            warn(f"error: {missing(e)}")
            return 2
        warn(f"error: unexpected {type(e).__name__}: {first_line(e)}")
        return 1
