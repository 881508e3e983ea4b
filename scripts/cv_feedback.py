#!/usr/bin/env python
"""The local correction c - c_i of a control-variate method round by round, beside the gradient
heterogeneity it stands for, printed as markdown (FedCEF Figs. 3-4: why ZA2 and FedCanon
diverge at the paper's steps; the claim fedcef-fig3's note).

  python scripts/cv_feedback.py T=16 experiment=fedcef_fig3_4 dataset=mnist5k \\
      algorithm=fedcef_fig3_4/za2 --out results/reproduction/cv_feedback_za2.md

Any fedrun overrides; the method must keep c and c_i (fedcef, za2: their state's ``c``, ``C``).
Before each round t (from the state the previous round left), with G_i client i's gradient
at the server model z averaged over ``--batches`` fresh mini-batches (drawn for steps K+1, ...
of round t, none a local step draws):

- ``|c - c_i|``: the Frobenius norm over clients of the correction the local steps add
  (FedCEF's eq. (5)); c_i = 0 before round 0 (Algorithm 1's initialization);
- ``|g - g_i|``: the same norm of mean_j G_j - G_i, what an exact correction would be;
- ``relative error``: |(c - c_i) - (g - g_i)| / |g - g_i| (1: no better than no correction);

and the training loss (mean over the clients' samples) after the round. Stops at the first
non-finite loss. The figures are a diagnosis of one run, not evidence a claim reads.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch
from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException

from fedprox_cli.common.errors import EXIT, UserError
from fedprox_cli.config.compose import compose
from fedprox_cli.runs import experiment


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="cv_feedback.py", description=__doc__.split("\n\n")[0])
    p.add_argument("overrides", nargs="+", help="fedrun overrides (KEY=VALUE)")
    p.add_argument("--batches", type=int, default=4, help="mini-batches per G_i (default 4)")
    p.add_argument("--out", type=Path, help="also write the table here")
    return p.parse_args(argv)


def fresh(exp: experiment.Experiment, z: torch.Tensor, t: int, batches: int) -> torch.Tensor:
    """G: row i is client i's gradient at z, the mean over ``batches`` unused mini-batches."""
    env = exp.env
    Z = z.expand(env.n, -1).contiguous()
    G = torch.zeros_like(Z)
    for j in range(batches):
        G += env.grad(Z, t, env.K + 1 + j)
    return G / batches


def rows(exp: experiment.Experiment, T: int, batches: int) -> list[str]:
    """One markdown row per round (see the module docstring)."""
    s = exp.alg.init(exp.flat.flat(), exp.cfg.n)
    if "c" not in s or "C" not in s:
        raise UserError(f"{exp.alg.name} keeps no control variates c, c_i")
    out = []
    for t in range(T):
        exp.env.start_round(t)
        G = fresh(exp, s["z"], t, batches)
        exact = G.mean(0) - G
        corr = s["c"] - s["C"]
        rel = (corr - exact).norm() / exact.norm()
        s = exp.alg.round(s, exp.env, t)
        loss = exp.oracle.full(s["z"], with_grad=False)[0].item()
        out.append(f"| {t} | {corr.norm():.3g} | {exact.norm():.3g} | {rel:.2f} | {loss:.4g} |")
        if not math.isfinite(loss):
            break
    return out


def main(argv: list[str] | None = None) -> int:
    a = parse(sys.argv[1:] if argv is None else argv)
    try:
        cfg = compose(a.overrides)
        exp = experiment.build(cfg)
        start = time.perf_counter()
        body = rows(exp, int(cfg.T), a.batches)
    except (UserError, HydraException, OmegaConfBaseException) as e:
        print(f"cv_feedback.py: error: {str(e).splitlines()[0]}", file=sys.stderr)
        return EXIT["error"]
    took = time.perf_counter() - start
    text = "\n".join(
        [
            f"`python scripts/cv_feedback.py {' '.join(a.overrides)}` "
            f"({a.batches} mini-batches of B = {cfg.B} per G_i; {took:.0f} s)",
            "",
            "| round t | \\|c - c_i\\| | \\|g - g_i\\| | relative error | training loss after t |",
            "|---|---|---|---|---|",
            *body,
        ]
    )
    print(text)
    if a.out:
        a.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
