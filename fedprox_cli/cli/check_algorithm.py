"""``fedrun-check-algorithm NAME_OR_DOTTED_PATH``: the contracts every built-in algorithm keeps,
run on any algorithm (a built-in or installed name, or ``package.module.Class``), one line per
contract; exit code 0 if all hold, 1 if one fails (naming it), 2 if the algorithm cannot be
found or breaks its interface before anything runs.

Each contract is a few tiny runs (digits, a linear model, n = 4 clients, T = 4 rounds, a few
seconds in all) compared with each other:

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
  does not calls ``env.prox`` with it (else it ignores h and must declare ``smooth_only``).
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

from ..common import guarded, streams
from ..common.errors import EXIT, UserError

BASE = ["dataset=digits", "model=linear", "T=4", "K=2", "n=4", "B=8", "eval_every=1", "participation=1",
        "compressor=identity", "checkpoint_every=0"]


class Failed(Exception):
    """A contract that does not hold (the message says how)."""


def _resolve(spec: str) -> tuple[str, list[str]]:
    """The algorithm's config name and the overrides that choose it: a registered or installed
    name, or a dotted path to its class (stored as a config option with its defaults)."""
    from hydra.core.config_store import ConfigStore

    from .. import algorithms
    from ..config import plugin_defaults
    if "." not in spec and ":" not in spec:
        algorithms.base.lookup(spec)  # a UserError naming the choices if unknown
        plugin_defaults.store([f"algorithm={spec}"])
        return spec, [f"algorithm={spec}"]
    from ..common.plugins import located
    target = spec.replace(":", ".")
    cls = located(target)
    algorithms.base.lookup(getattr(cls, "name", "?"), target)  # the class contract, at the door
    node = {**plugin_defaults.defaults("algorithm", cls.name, cls), "_target_": target}
    ConfigStore.instance().store(group="algorithm", name=cls.name, node=node, provider="fedrun-check-algorithm")
    return cls.name, [f"algorithm={cls.name}"]


class Checker:
    """Tiny runs of one algorithm in a temporary folder, compared (module docstring)."""

    def __init__(self, name: str, choose: list[str], folder: Path):
        from .. import algorithms
        self.name, self.folder = name, folder
        self.cls = algorithms.base.lookup(name)
        reg = "regularizer=none" if self.cls.smooth_only else "regularizer=l1"
        self.base = [*BASE, *choose, reg]
        self.runs = 0

    def run(self, *overrides: str, folder: Path | None = None):
        """The metrics of a run (without time_s); a run that does not finish fails the contract."""
        import fedprox_cli
        self.runs += 1
        out = folder or self.folder / f"run{self.runs}"
        quiet = io.StringIO()
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            r = fedprox_cli.run([*self.base, *overrides], folder=out)
        if r.status != "finished":
            raise Failed(f"the run with {' '.join(overrides) or 'the defaults'} ended {r.status}: "
                         f"{r.summary.get('error', '')}".rstrip(": "))
        return r.metrics.drop(columns="time_s")

    @staticmethod
    def same(a, b, what: str, rtol: float = 0.0) -> None:
        import pandas as pd
        try:
            pd.testing.assert_frame_equal(a, b, check_exact=rtol == 0, rtol=rtol or 1e-5, atol=0)
        except AssertionError as e:
            raise Failed(f"{what}: {' '.join(str(e).split())[:300]}") from None

    def interface(self) -> str:
        from dataclasses import fields

        from .. import algorithms
        from ..common import ranges
        declared = ranges.declared(self.cls, "algorithm")
        untyped = [f.name for f in fields(self.cls) if f.init and f.name not in declared]
        if untyped:
            raise Failed(f"parameter {', '.join(untyped)} has no range: declare one with "
                         f"fedprox_cli.common.ranges.param(default, ge=..., ...)")
        algorithms.build(self.name)
        return f"a dataclass with name {self.name!r}; {ranges.signature(self.cls, 'algorithm') or 'no parameters'}"

    @cached_property
    def reference(self):
        """The uninterrupted run (vmap engine) the contracts compare with."""
        return self.run("engine=vmap", folder=self.folder / "reference")

    def state(self) -> str:
        out = self.folder / "resumed"
        self.run("engine=vmap", "T=2", "checkpoint_every=1", "keep_checkpoint=true", folder=out)
        self.same(self.run("engine=vmap", "checkpoint_every=1", folder=out), self.reference,
                  "extended from round 2's checkpoint, the run differs from the uninterrupted one")
        if "resuming" not in (out / "fedrun.log").read_text():
            raise Failed("the run asked to extend to T = 4 did not resume from round 2's checkpoint")
        return "a run extended from round 2's checkpoint equals the uninterrupted run"

    def global_randomness(self) -> str:
        import numpy as np
        import torch

        from ..algorithms import contract
        plain = contract.round

        def reseeded(alg, state, env, t):
            torch.manual_seed(1000 + t)
            np.random.seed(1000 + t)
            random.seed(1000 + t)
            return plain(alg, state, env, t)
        contract.round = reseeded
        try:
            self.same(self.run("engine=vmap"), self.reference,
                      "with the global random generators reseeded before each round the run differs "
                      "(the algorithm draws from them: draw from a torch.Generator keyed by (seed, t))")
        finally:
            contract.round = plain
        return "the run is unchanged with torch's, numpy's and Python's global generators reseeded"

    def seeds(self) -> str:
        self.run("seeds=2", folder=self.folder / "batched")
        alone = self.run("engine=vmap", "seed=1")
        batched = self.folder / "batched"
        for s, ref in ((0, self.reference), (1, alone)):
            got = guarded.read_csv(batched / f"seed_{s}" / "metrics.csv").drop(columns="time_s")
            self.same(got, ref, f"seed {s} of seeds=2 differs from the run made alone")
        return "seeds=2 in one process equals the two runs made alone"

    def engines(self) -> str:
        self.same(self.run("engine=loop"), self.reference, "the loop engine's run differs from the vmap engine's",
                  rtol=1e-4)
        return "the loop and vmap engines agree (rtol 1e-4)"

    def messages(self) -> str:
        per_round = self.reference[["bytes_up", "bytes_down", "grad_evals"]].diff().dropna()
        for col in per_round:
            if not (per_round[col] > 0).all():
                raise Failed(f"{col} does not grow in every round ({per_round[col].tolist()}): send every "
                             f"message through env.up / env.down, every gradient through env.grad / env.sgd_steps")
            if per_round[col].nunique() != 1:
                raise Failed(f"{col} per round changes at full participation ({per_round[col].tolist()})")
        up, down, grads = (int(per_round[c].iloc[0]) for c in per_round)
        return f"per round: {up} bytes up, {down} bytes down, {grads} gradient rows (n = 4, d = 650, K = 2)"

    def smooth_only(self) -> str:
        if self.cls.smooth_only:
            try:
                self.run("regularizer=l1")
            except UserError as e:
                return f"declared; regularizer=l1 refused ({e})"
            raise Failed("declares smooth_only but a run with regularizer=l1 was not refused")
        prox = self.reference["prox_calls"].iloc[-1]
        if prox == 0:
            raise Failed("with regularizer=l1 it never calls env.prox: it ignores h; apply the prox or "
                         "declare smooth_only: ClassVar[bool] = True (h = 0 only)")
        return f"not declared; with regularizer=l1 it calls env.prox ({int(prox)} calls in 4 rounds)"


CONTRACTS = (("interface", "interface"), ("state", "state"), ("no global randomness", "global_randomness"),
             ("seeds=R", "seeds"), ("engines", "engines"), ("messages", "messages"), ("h = 0 only", "smooth_only"))


def check(spec: str, out=None) -> int:
    """Run every contract on ``spec``; print one line each (to ``out``, default stdout, through
    the one console); the exit code."""
    def say(text: str) -> None:
        streams.line(out, text) if out is not None else streams.out(text)

    name, choose = _resolve(spec)
    failed = []
    with tempfile.TemporaryDirectory(prefix="fedrun-check-") as tmp:
        checker = Checker(name, choose, Path(tmp))
        for title, method in CONTRACTS:
            try:
                say(f"ok    {title}: {getattr(checker, method)()}")
            except (Failed, UserError) as e:
                failed.append(title)
                say(f"FAIL  {title}: {' '.join(str(e).split())}")
    say(f"{name}: {'all contracts hold' if not failed else 'fails ' + ', '.join(failed)}")
    return EXIT["finished"] if not failed else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fedrun-check-algorithm", description=__doc__.split("\n\n")[0])
    parser.add_argument("algorithm", help="a registered or installed name (fedavg, fedprox) or a class by "
                                          "dotted path (my_pkg.my_module.MyAlgorithm)")
    if argv is None:
        streams.guard()
    args = parser.parse_args(argv)
    try:
        code = check(args.algorithm)
    except UserError as e:
        streams.err(f"fedrun-check-algorithm: error: {' '.join(str(e).split())}")
        code = EXIT["error"]
    if argv is None:
        sys.exit(code)
    return code


if __name__ == "__main__":
    main()
