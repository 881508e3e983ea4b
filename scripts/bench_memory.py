"""Peak memory of a few training rounds and one evaluation, against fedprox_cli.engine.memory's plan.

    python scripts/bench_memory.py --model mlp --n 100 --memory-gb 0.5
    python scripts/bench_memory.py --model mobilenetv3_small --n 100 --memory-gb 2

For each client chunking -- ``oracle.chunk=auto`` under the budget, and all n clients at once
-- a fresh child process builds the run (``experiment.build``, CPU), resets the kernel's peak-RSS
mark (Linux ``/proc/self/clear_refs``), runs the rounds and one evaluation, and reports the
peak resident memory above the resident memory before the rounds (``--device cuda``: PyTorch's
peak of allocated GPU memory above what was allocated before the rounds). Next to it: the plan's
estimate for one vmap call of the chosen chunk, and the size of the algorithm's state. No
allocation tracing is involved, so the numbers are those of an ordinary run.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MB = 2**20


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False where that is not possible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def child(args) -> dict:
    import resource

    import torch
    from hydra import compose, initialize_config_dir

    from fedprox_cli.cli.main import CONF_DIR
    from fedprox_cli.engine import memory
    from fedprox_cli.engine.metrics import evaluate
    from fedprox_cli.runs import experiment

    torch.set_num_threads(args.threads)
    from fedprox_cli import algorithms

    smooth = type(algorithms.build(args.algorithm)).smooth_only
    overrides = [
        f"algorithm={args.algorithm}",
        f"regularizer={'none' if smooth else 'l1'}",
        f"dataset={args.dataset}",
        f"model={args.model}",
        f"n={args.n}",
        f"K={args.K}",
        f"B={args.B}",
        f"T={args.rounds}",
        f"device={args.device}",
        "engine=vmap",
        f"oracle.chunk={args.chunk}",
        f"oracle.eval_batch={args.eval_batch}",
        f"oracle.memory_gb={args.memory_gb}",
        f"data.root={args.data_root}",
    ]
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    exp = experiment.build(cfg)
    state = exp.alg.init(exp.flat.flat(), exp.cfg.n)
    oracle = exp.oracle
    fp = memory.footprint(
        exp.flat.module, exp.flat.d, exp.dataset.input_shape, exp.cfg.dtype, exp.cfg.device
    )
    gc.collect()
    gpu = exp.cfg.device.type == "cuda"
    if gpu:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base, exact = torch.cuda.memory_allocated() // 1024, True
    else:
        base = _status_kb("VmRSS")
        exact = _reset_peak()
    for t in range(args.rounds):
        exp.env.start_round(t)
        state = exp.alg.round(state, exp.env, t)
    evaluate(
        exp.alg.output(state),
        oracle,
        exp.h,
        exp.stationarity_step,
        exp.dataset.test_x,
        exp.dataset.test_y,
    )
    if gpu:
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() // 1024
    else:
        peak = _status_kb("VmHWM") if exact else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    state_bytes = sum(v.numel() * v.element_size() for v in state.values() if torch.is_tensor(v))
    nd_bytes = exp.cfg.n * exp.flat.d * torch.tensor([], dtype=exp.cfg.dtype).element_size()
    samples = exp.cfg.B or oracle.data.index.shape[1]
    return {
        "chunk": oracle.chunk,
        "eval_batch": oracle.eval_batch,
        "d": exp.flat.d,
        "base_mb": base / 1024,
        "peak_above_base_mb": (peak - base) / 1024,
        "plan_train_mb": fp.call_bytes(oracle.chunk, samples) / MB,
        "plan_eval_mb": fp.call_bytes(1, oracle.eval_batch) / MB,
        "state_mb": state_bytes / MB,
        "nd_mb": nd_bytes / MB,
        "peak_is_exact": exact,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--algorithm", default="fedcanon")
    ap.add_argument("--dataset", default="fmnist")
    ap.add_argument("--data-root", default="null")
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--K", type=int, default=2)
    ap.add_argument("--B", default="64")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--memory-gb", type=float, default=1.0)
    ap.add_argument("--eval-batch", default="auto")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--device", default="cpu", help="cpu (peak RSS) or cuda (peak allocated GPU memory)"
    )
    ap.add_argument("--chunks", default="auto,null", help="oracle.chunk values to compare")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        args.chunk = args.child
        print(json.dumps(child(args)))
        return
    print(
        f"{args.algorithm}, {args.model} on {args.dataset}, n={args.n}, K={args.K}, B={args.B}, "
        f"{args.rounds} rounds + 1 evaluation, {args.device}, oracle.memory_gb={args.memory_gb}"
    )
    print(
        f"{'oracle.chunk':>14} {'chunk':>6} {'eval_batch':>10} {'plan train MB':>14} "
        f"{'plan eval MB':>13} {'state MB':>9} {'peak-base MB':>13} {'base MB':>8} {'(state+peak-base)/nd':>21}"
    )
    for chunk in args.chunks.split(","):
        argv = [*sys.argv[1:], "--child", chunk]
        out = subprocess.run(
            [sys.executable, __file__, *argv],
            capture_output=True,
            text=True,
            env={
                **os.environ,
                "PYTHONPATH": os.pathsep.join(  # keeps carried wheels
                    [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
                ),
            },
        )
        if out.returncode != 0:
            print(f"{chunk:>14} failed: {out.stderr.strip().splitlines()[-1:]}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(
            f"{chunk:>14} {r['chunk']:>6} {r['eval_batch']:>10} {r['plan_train_mb']:>14.1f} "
            f"{r['plan_eval_mb']:>13.1f} {r['state_mb']:>9.1f} {r['peak_above_base_mb']:>13.1f} "
            f"{r['base_mb']:>8.0f} {(r['state_mb'] + r['peak_above_base_mb']) / r['nd_mb']:>21.2f}"
            + ("" if r["peak_is_exact"] else "  (peak: process lifetime)")
        )


if __name__ == "__main__":
    main()
