"""fedrun-check-algorithm ALGORITHM: the contracts every built-in algorithm keeps, run on any
algorithm -- a built-in or installed name, a class by dotted path (package.module.Class) or an
option's YAML (algorithm/mine.yaml: name, _target_, parameters) -- one line per contract; exit
code 0 if all hold, 1 if one fails (naming it), 2 if the algorithm cannot be found or breaks its
interface before anything runs.

Each contract is a few tiny runs (digits, a linear model, n = 4 clients, T = 4 rounds, a few
seconds in all) compared with each other. Every run goes through the calls a ``fedrun`` run makes
(:mod:`fedprox_cli.algorithms.contract`): the state's keys, and each entry's shape, dtype and
device, checked after every round against what ``init`` made, so a run and the check say the
same words.

- interface: the class contract (docs/extending.md) and its defaults in their declared ranges;
- state: a run stopped after round 2 and extended to 4 from its checkpoint equals the
  uninterrupted run, number for number (the state is a dict of tensors saved whole);
- no global randomness: the run equals itself with torch's, numpy's and Python's global
  generators reseeded before every round;
- seeds=R: two seeds in one process equal the two runs made alone, number for number;
- engines: the loop and vmap engines agree (rtol 1e-4);
- messages: bytes up and down and gradient calls are counted (every message through
  ``env.up`` / ``env.down``), the same in every round at full participation;
- h = 0 only: an algorithm declaring ``smooth_only`` is refused ``regularizer=l1``; one that
  does not calls ``env.prox`` with it (else it ignores h and must declare ``smooth_only``);
- partial participation, a compressor: declared, a run with ``participation=0.5`` (2 of 4
  clients a round) and one with ``compressor=topk`` finish, keeping the state contract; not
  declared, each is refused;
- float64: a run with ``dtype=float64`` finishes (every state tensor made of z0's dtype).

A failing contract is one line naming the plugin's own file and line, the contract and the fix.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import sys
import tempfile
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..common import run_files, streams

if TYPE_CHECKING:
    import pandas as pd

    from ..algorithms import Algorithm, Env, State
from ..common import metric_table as mt
from ..common.errors import EXIT, UserError
from . import usage
from .algorithm_spec import resolve

BASE = [
    "dataset=digits",
    "model=linear",
    "T=4",
    "K=2",
    "n=4",
    "B=8",
    "eval_every=1",
    "participation=1",
    "compressor=identity",
    "checkpoint_every=0",
]


# a contract does not hold (0: all hold; 2, EXIT["error"]: the algorithm is refused before any runs)
FAILED = 1


class Failed(Exception):
    """A contract that does not hold (the message says how)."""


class Checker:
    """Tiny runs of one algorithm in a temporary folder, compared (module docstring)."""

    def __init__(self, name: str, choose: list[str], folder: Path):
        from .. import algorithms

        self.name, self.folder = name, folder
        self.cls = algorithms.base.lookup(name)
        reg = "regularizer=none" if self.cls.smooth_only else "regularizer=l1"
        self.base = [*BASE, *choose, reg]
        self.runs = 0

    def run(self, *overrides: str, folder: Path | None = None) -> pd.DataFrame:
        """The metrics of a run (without time_s); a run that does not finish fails the contract."""
        import fedprox_cli

        self.runs += 1
        out = folder or self.folder / f"run{self.runs}"
        quiet = io.StringIO()
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            r = fedprox_cli.run([*self.base, *overrides], folder=out)
        if r.status != "finished":  # why: its summary's error, else the last error it said
            said = [line for line in quiet.getvalue().splitlines() if "error: " in line]
            why = r.summary.get("error") or (said[-1].split("error: ", 1)[1] if said else "")
            raise Failed(
                f"the run with {' '.join(overrides) or 'the defaults'} ended {r.status}: "
                f"{why or 'without a reason recorded (its fedrun.log has its lines)'}"
            )
        return r.metrics.drop(columns=mt.TIME.name)

    @staticmethod
    def same(a: pd.DataFrame, b: pd.DataFrame, what: str, rtol: float = 0.0) -> None:
        """Fail with ``what`` and the first value that differs (its column and round) unless
        the metrics ``a`` and ``b`` are equal (within ``rtol``)."""
        import numpy as np

        if list(a.columns) != list(b.columns) or len(a) != len(b):
            raise Failed(f"{what} (its metrics have {len(a)} rows, the other run's {len(b)})")
        for col in a.columns:
            x, y = a[col].to_numpy(dtype=float), b[col].to_numpy(dtype=float)
            close = (
                np.isclose(x, y, rtol=rtol, atol=0, equal_nan=True)
                if rtol
                else (x == y) | (np.isnan(x) & np.isnan(y))
            )
            if not close.all():
                i = int(np.argmin(close))
                raise Failed(
                    f"{what} (first in {col} at round {int(a[mt.ROUND.name].iloc[i])}: {x[i]:.6g} "
                    f"against {y[i]:.6g})"
                )

    def interface(self) -> str:
        from dataclasses import fields

        from .. import algorithms
        from ..common import ranges

        declared = ranges.declared(self.cls, "algorithm")
        untyped = [f.name for f in fields(self.cls) if f.init and f.name not in declared]
        if untyped:
            raise Failed(
                f"parameter {', '.join(untyped)} has no range: declare one with "
                f"fedprox_cli.common.ranges.param(default, ge=..., ...)"
            )
        algorithms.build(self.name)
        return (
            f"a dataclass with name {self.name!r}; "
            f"{ranges.signature(self.cls, 'algorithm') or 'no parameters'}"
        )

    @cached_property
    def reference(self) -> pd.DataFrame:
        """The uninterrupted run (vmap engine) the contracts compare with."""
        return self.run("engine=vmap", folder=self.folder / "reference")

    def state(self) -> str:
        out = self.folder / "resumed"
        self.run("engine=vmap", "T=2", "checkpoint_every=1", "keep_checkpoint=true", folder=out)
        self.same(
            self.run("engine=vmap", "checkpoint_every=1", folder=out),
            self.reference,
            "extended from round 2's checkpoint, the run differs from the uninterrupted one: keep "
            "everything "
            "a round needs in the state dict init returns (a checkpoint saves that dict only, not "
            "attributes "
            "set on self)",
        )
        if "resuming" not in run_files.read_log(out):
            raise Failed(
                "the run asked to extend to T = 4 did not resume from round 2's checkpoint"
            )
        return "a run extended from round 2's checkpoint equals the uninterrupted run"

    def global_randomness(self) -> str:
        import numpy as np
        import torch

        from ..algorithms import contract

        plain = contract.round

        def reseeded(alg: Algorithm[Any], state: State, env: Env, t: int) -> State:
            torch.manual_seed(1000 + t)
            np.random.seed(1000 + t)
            random.seed(1000 + t)
            return plain(alg, state, env, t)

        contract.round = reseeded
        try:
            self.same(
                self.run("engine=vmap"),
                self.reference,
                "with the global random generators reseeded before each round the run differs "
                "(the algorithm draws from them: draw from a torch.Generator keyed by (seed, t))",
            )
        finally:
            contract.round = plain
        return "the run is unchanged with torch's, numpy's and Python's global generators reseeded"

    def seeds(self) -> str:
        self.run("seeds=2", folder=self.folder / "batched")
        alone = self.run("engine=vmap", "seed=1")
        batched = self.folder / "batched"
        for s, ref in ((0, self.reference), (1, alone)):
            got = run_files.read_metrics(batched / run_files.seed_folder(s)).drop(
                columns=mt.TIME.name
            )
            self.same(got, ref, f"seed {s} of seeds=2 differs from the run made alone")
        return "seeds=2 in one process equals the two runs made alone"

    def engines(self) -> str:
        self.same(
            self.run("engine=loop"),
            self.reference,
            "the loop engine's run differs from the vmap engine's",
            rtol=1e-4,
        )
        return "the loop and vmap engines agree (rtol 1e-4)"

    def messages(self) -> str:
        per_round = self.reference[[mt.BYTES_UP.name, mt.BYTES_DOWN.name, mt.GRAD_EVALS.name]]
        per_round = per_round.diff().dropna()
        for col in per_round:
            if not (per_round[col] > 0).all():
                raise Failed(
                    f"{col} does not grow in every round ({per_round[col].tolist()}): send every "
                    "message through env.up / env.down, every gradient through env.grad / "
                    f"env.sgd_steps"
                )
            if per_round[col].nunique() != 1:
                raise Failed(
                    f"{col} per round changes at full participation ({per_round[col].tolist()})"
                )
        up, down, grads = (int(per_round[c].iloc[0]) for c in per_round)
        return (
            f"per round: {up} bytes up, {down} bytes down, {grads} gradient rows "
            f"(n = 4, d = 650, K = 2)"
        )

    def smooth_only(self) -> str:
        if self.cls.smooth_only:
            try:
                self.run("regularizer=l1")
            except UserError as e:
                return f"declared; regularizer=l1 refused ({e})"
            raise Failed("declares smooth_only but a run with regularizer=l1 was not refused")
        prox = self.reference[mt.PROX_CALLS.name].iloc[-1]
        if prox == 0:
            raise Failed(
                "with regularizer=l1 it never calls env.prox: it ignores h; apply the prox or "
                "declare smooth_only: ClassVar[bool] = True (h = 0 only)"
            )
        return (
            f"not declared; with regularizer=l1 it calls env.prox ({int(prox)} calls in 4 rounds)"
        )

    def _declared(self, flag: str, override: str, what: str) -> str:
        """A run with ``override`` finishes if the class declares ``flag``, else is refused."""
        if getattr(self.cls, flag):
            rows = self.run("engine=vmap", override)
            return (
                f"declared; a run with {override} ({what}) finishes, {len(rows) - 1} rounds, "
                f"state kept"
            )
        try:
            self.run(override)
        except UserError:
            return f"not declared; {override} refused"
        raise Failed(f"does not declare {flag} but a run with {override} was not refused")

    def participation(self) -> str:
        return self._declared(
            "partial_participation", "participation=0.5", "2 of 4 clients a round"
        )

    def compressor(self) -> str:
        return self._declared("takes_compressor", "compressor=topk", "top-10% uplink")

    def float64(self) -> str:
        self.run("engine=vmap", "dtype=float64")
        return "a run with dtype=float64 finishes, state kept"


CONTRACTS = (
    ("interface", "interface"),
    ("state", "state"),
    ("no global randomness", "global_randomness"),
    ("seeds=R", "seeds"),
    ("engines", "engines"),
    ("messages", "messages"),
    ("h = 0 only", "smooth_only"),
    ("partial participation", "participation"),
    ("compressor", "compressor"),
    ("float64", "float64"),
)


def _located(text: str, cls: object) -> str:
    """A failure line that names the plugin's own file (its ``round`` and line added if not)."""
    from ..common.plugin_calls import builtin, source_line

    at = source_line(cls, "round")
    file = at.rsplit(":", 1)[0]
    return (
        text
        if file in text or builtin(cls) and "fedprox_cli" in text
        else f"{text} (round at {at})"
    )


def check(spec: str, out: TextIO | None = None, only: tuple[str, ...] | None = None) -> int:
    """Run every contract on ``spec`` (those titled in ``only``, if given); print one line each
    (to ``out``, default stdout, through the one console); the exit code: 0 all hold, 1 one
    fails (:data:`FAILED`)."""

    def say(text: str) -> None:
        streams.line(out, text) if out is not None else streams.out(text)

    name, choose = resolve(spec)
    failed = []
    with tempfile.TemporaryDirectory(prefix="fedrun-check-") as tmp:
        checker = Checker(name, choose, Path(tmp))
        for title, method in CONTRACTS:
            if only is not None and title not in only:
                continue
            try:
                say(f"ok    {title}: {getattr(checker, method)()}")
            except (Failed, UserError) as e:
                failed.append(title)
                say(f"FAIL  {title}: {_located(' '.join(str(e).split()), checker.cls)}")
    say(f"{name}: {'all contracts hold' if not failed else 'fails ' + ', '.join(failed)}")
    return EXIT["finished"] if not failed else FAILED


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="fedrun-check-algorithm",
        description=usage.plain((__doc__ or "").split("\n\n")[0]) or None,
    )
    parser.add_argument(
        "algorithm",
        help="a registered or installed name (fedavg, fedcanon), a class by dotted path "
        "(my_pkg.my_module.MyAlgorithm) or an option's YAML (conf/algorithm/mine.yaml)",
    )
    if argv is None:
        streams.guard()
    args = parser.parse_args(argv)
    try:
        code = check(args.algorithm)
    except UserError as e:  # not found, or broke its interface before anything ran
        streams.trace(e)
        streams.err(f"fedrun-check-algorithm: error: {' '.join(str(e).split())}")
        code = EXIT["error"]
    if argv is None:
        sys.exit(code)
    return code


if __name__ == "__main__":
    main()
