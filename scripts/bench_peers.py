"""fedrun side by side with Flower and pfl-research on the same FedAvg workloads.

``python scripts/bench_peers.py`` (``make bench-peers``) creates side environments for the
peers under ``.peers/`` (ignored by git) from the package index, pinned (:data:`PEERS`); each
reuses this environment's torch through a ``.pth`` file instead of installing a second one. The
project itself does not depend on them. Then it runs each workload (:data:`WORKLOADS`: fedrun's
MLP 784-200-200-10 on Fashion-MNIST, iid, B = 64, lr 0.02, no evaluation inside the rounds) in
each system, interleaved (repetition by repetition, workload by workload, system by system),
one thread each, as a fresh process, and prints per system: the whole process's wall time, the
training time by the framework's own timer (fedrun: ``time_s`` of its last metrics row; pfl:
its ``StopwatchCallback``; Flower: its strategy's rounds), client-steps/s over that training
time, overhead (wall minus training), the outputs of the same job (:data:`SAME_JOB`), and the
ratios against fedrun in the same run (> 1: fedrun faster). Best of ``--repeats`` per cell.
Per peer, its client calls (Flower: the ClientApp's ``train``; pfl: ``simulate_one_user``),
timed inside the peer's process (``PEER_CALL_LOG``): their number, the first's and the median's
seconds, so that a peer paying a set-up on every call (reading the data, say) shows.
For each goal not met (:data:`GOALS`), what bounds it: fedrun's process by phase
(``scripts/profile_run.py``) and, where client-steps/s fell short, its training steps against
the same matrix products replayed alone (``scripts/bench_engine.py``). Then a tiny run's
start-up: ``fedrun dataset=digits model=linear T=1`` against ``python -c 'import torch'``,
interleaved (and its phases when its goal is not met).

The peers' scripts are in ``scripts/peers/``, each at its own documentation's best for one
CPU (Flower: the PyTorch quickstart's app layout, the data read once per worker, one CPU per
ClientApp and one exposed to the simulation; pfl: one process, in-memory datasets, no central
evaluation during training); docs/performance.md says what was done for each and what is
unfair in either direction.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIDE = ROOT / ".peers"
PEER_SCRIPTS = ROOT / "scripts" / "peers"
PEERS = {
    "pfl": ("pfl[pytorch]==0.6.0", "pfl_fedavg.py"),
    "flower": ("flwr[simulation]==1.42.0", "flower_fedavg.py"),
}
WORKLOADS = {  # name: (n, K, T, participation)
    "n10": (10, 20, 20, 1.0),
    "n100": (100, 10, 5, 1.0),
    "n100-p0.2": (100, 10, 5, 0.2),
    "n10-T100": (10, 20, 100, 1.0),  # of a paper's length (FedCanon Fig. 2's n, K and B)
}
B, LR = 64, 0.02
GOALS = {
    "pfl": (1.3, 1.5),
    "flower": (5.0, None),
}  # fedrun's wall-time and steps/s ratios
OUTPUTS = ("train_loss", "stationarity", "test_loss", "test_acc")
SAME_JOB = (
    "the same job in every system: FedAvg, T rounds of K local SGD steps (B = 64, step 0.02) "
    "on iid clients, plain averaging; its outputs, computed at round T only and by every system "
    "(no other evaluation: fedrun eval_every=0, pfl evaluation_frequency > T and no validation "
    "cohort, Flower fraction_evaluate=0): the final model's train loss and stationarity "
    "||grad f||^2 over all 60,000 training samples, its test loss and accuracy over the 10,000 "
    "test samples (scripts/peers/common.py's final_metrics: fedrun's round-T metrics row)"
)
STARTUP_GOAL_S = 1.0  # a tiny run's wall seconds beyond import torch


def side_env(name: str, requirement: str) -> Path:
    """The side environment of peer ``name`` (created and installed on first use); its python."""
    env = SIDE / name
    python = env / "bin" / "python"
    if (env / ".installed").exists():
        return python
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    import torch

    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "zz_main_torch.pth").write_text(str(Path(torch.__file__).parent.parent) + "\n")
    print(f"installing {requirement} into {env} ...", flush=True)
    p = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", requirement], capture_output=True, text=True
    )
    if p.returncode:
        raise SystemExit(f"bench_peers: installing {requirement} failed:\n{p.stderr[-2000:]}")
    (env / ".installed").write_text(requirement + "\n")
    return python


def one_thread() -> dict[str, str]:
    """One thread per process, every process at the same priority (Ray starts its workers at
    nice 15 unless told otherwise, which would slow Flower on a shared machine)."""
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
        "RAY_worker_niceness": "0",
    }


def timed(
    cmd: list[str], cwd: Path | None = None, env: dict | None = None
) -> tuple[float, str, float]:
    """Wall seconds of a fresh process, its stdout and its CPU seconds (user + system; robust to
    other jobs on a shared machine); a failure stops the benchmark."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, cwd=cwd, env=env or one_thread(), stdout=out, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - start
        out.seek(0), err.seek(0)
        if os.waitstatus_to_exitcode(status):
            raise SystemExit(
                f"bench_peers: {' '.join(cmd[:4])} ... failed ({os.waitstatus_to_exitcode(status)}):\n"
                f"{err.read().decode(errors='replace')[-3000:]}"
            )
        return wall, out.read().decode(errors="replace"), usage.ru_utime + usage.ru_stime


def fedrun_args(n, K, T, participation, out: Path) -> list[str]:
    """fedrun's overrides for a workload, its run folder ``out``."""
    return [
        "algorithm=fedavg",
        "regularizer=none",
        "dataset=fmnist",
        "model=mlp",
        "partition=iid",
        f"n={n}",
        f"K={K}",
        f"T={T}",
        f"B={B}",
        f"algorithm.beta={LR}",
        f"participation={participation}",
        "eval_every=0",
        "seed=0",
        f"hydra.run.dir={out}",
    ]


def run_fedrun(n, K, T, participation, tmp: Path) -> dict:
    out = Path(tempfile.mkdtemp(dir=tmp))
    wall, _, _ = timed(
        [sys.executable, "-m", "fedprox_cli", *fedrun_args(n, K, T, participation, out / "run")],
        cwd=tmp,
    )
    final = json.loads((out / "run" / "summary.json").read_text())["final"]
    return {
        "wall_s": wall,
        "train_s": final["time_s"],
        "client_steps": final["grad_evals"],
        **{k: final[k] for k in OUTPUTS},
    }


def call_times(log: Path) -> dict:
    """The client calls a peer's script logged (``PEER_CALL_LOG``, one line of seconds per call,
    in the order they ended): their number, the first call's seconds and the median's."""
    calls = [float(x) for x in log.read_text().split()] if log.exists() else []
    return {
        "calls": len(calls),
        "first_call_s": calls[0] if calls else float("nan"),
        "median_call_s": statistics.median(calls) if calls else float("nan"),
    }


def run_peer(python: Path, script: str, n, K, T, participation, tmp: Path) -> dict:
    log = Path(tempfile.mkdtemp(dir=tmp)) / "calls.log"
    wall, out, _ = timed(
        [str(python), script, *map(str, (n, K, T, B, LR, participation))],
        cwd=PEER_SCRIPTS,
        env={**one_thread(), "PEER_CALL_LOG": str(log)},
    )
    line = next(x for x in reversed(out.splitlines()) if x.startswith("{"))
    return {"wall_s": wall, **json.loads(line), **call_times(log)}


def call_table(results: dict, systems: list[str]) -> list[str]:
    """Per peer, its client calls: a call that sets itself up afresh (reads the data, say) shows
    as a median near the first call's time, a set-up paid once as a first call above the median."""
    lines = [
        "| workload | system | client calls | first call s | median call s | K local steps / median call |",
        "|---|---|---|---|---|---|",
    ]
    for wl, by_system in results.items():
        K = WORKLOADS[wl][1]
        for s in systems:
            r = by_system.get(s)
            if r is None or "calls" not in r:
                continue
            lines.append(
                f"| {wl} | {s} | {r['calls']} | {r['first_call_s']:.4f} | {r['median_call_s']:.4f} "
                f"| {K / r['median_call_s']:,.0f} steps/s |"
            )
    return lines


def startup(repeats: int, tmp: Path) -> dict[str, tuple[float, float]]:
    """Best (wall, CPU) seconds of a tiny run, of ``import torch`` and of ``import torch,
    torch._dynamo`` (what vmap's gradient transform would import: fedprox_cli.engine.batched),
    interleaved."""
    cmds = {
        "import torch": [sys.executable, "-c", "import torch"],
        "import torch._dynamo": [sys.executable, "-c", "import torch, torch._dynamo"],
    }
    times: dict[str, list] = {k: [] for k in ["tiny run", *cmds]}
    for r in range(repeats):
        for k, cmd in cmds.items():
            times[k].append(timed(cmd)[::2])
        times["tiny run"].append(
            timed(
                [
                    sys.executable,
                    "-m",
                    "fedprox_cli",
                    "dataset=digits",
                    "model=linear",
                    "T=1",
                    f"hydra.run.dir={tmp / f'tiny{r}'}",
                ],
                cwd=tmp,
            )[::2]
        )
    return {k: tuple(map(min, zip(*v))) for k, v in times.items()}


def machine() -> str:
    """CPU model (family and model number where the name is generic), cores, load."""
    info = {}
    if Path("/proc/cpuinfo").exists():
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    cpu = f"{info.get('model name', platform.processor())} (family {info.get('cpu family', '?')} model {info.get('model', '?')})"
    return f"{cpu}, {os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"


def table(results: dict, systems: list[str]) -> list[str]:
    lines = [
        (
            "| workload | system | wall s | training s | overhead s | client-steps/s | train loss "
            "| stationarity | test loss | test acc | fedrun faster, wall | fedrun faster, steps/s |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for wl, by_system in results.items():
        base = by_system["fedrun"]
        for s in systems:
            r = by_system.get(s)
            if r is None:
                continue
            rate = r["client_steps"] / r["train_s"]
            ratios = (
                "" if s == "fedrun" else f"{r['wall_s'] / base['wall_s']:.2f}x",
                ""
                if s == "fedrun"
                else f"{rate and (base['client_steps'] / base['train_s']) / rate:.2f}x",
            )
            lines.append(
                f"| {wl} | {s} | {r['wall_s']:.1f} | {r['train_s']:.2f} | {r['wall_s'] - r['train_s']:.1f} "
                f"| {rate:,.0f} | {r['train_loss']:.4f} | {r['stationarity']:.4g} "
                f"| {r['test_loss']:.4f} | {r['test_acc']:.4f} | {ratios[0]} | {ratios[1]} |"
            )
    return lines


def profile(args: list[str], tmp: Path) -> str:
    """Where a fedrun process with ``args`` spends its wall time (scripts/profile_run.py), one line."""
    _, out, _ = timed([sys.executable, str(ROOT / "scripts" / "profile_run.py"), *args], cwd=tmp)
    got = json.loads(next(x for x in reversed(out.splitlines()) if x.startswith("{")))
    parts = sorted(got["seconds"].items(), key=lambda kv: -kv[1])
    return f"{got['total']:.2f} s: " + ", ".join(f"{k} {v:.2f}" for k, v in parts)


def roofline(n: int, K: int, participation: float, tmp: Path) -> str:
    """fedrun's training steps against the same matrix products replayed alone
    (scripts/bench_engine.py, both engines, one thread, its ``--csv`` rows), one line per engine."""
    m = max(1, round(participation * n))
    rows_csv = Path(tempfile.mkdtemp(dir=tmp)) / "roofline.csv"
    timed(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench_engine.py"),
            "--model",
            "mlp",
            "--algorithm",
            "fedavg",
            "--regularizer",
            "none",
            "--shape",
            "fmnist",
            "--n",
            str(m),
            "--K",
            str(K),
            "--B",
            str(B),
            "--engines",
            "loop,vmap",
            "--threads",
            "1",
            "--repeats",
            "2",
            "--no-eval",
            "--csv",
            str(rows_csv),
        ]
    )
    with rows_csv.open(newline="") as f:
        rows = list(csv.DictReader(f))
    return "; ".join(
        f"{r['engine']} {float(r['steps/s']):,.0f} client-steps/s at {float(r['GFLOP/s']):.1f} GFLOP/s, "
        f"{float(r['of roofline']):.0%} of its products' rate replayed alone "
        f"({float(r['roofline GFLOP/s']):.1f})"
        for r in rows
    )


def goals(results: dict) -> tuple[list[str], dict[str, set[str]]]:
    """The goals' lines, and per workload the goals not met (``wall``, ``steps``)."""
    out, unmet = [], {}
    for wl, by_system in results.items():
        base = by_system["fedrun"]
        for s, (wall_goal, rate_goal) in GOALS.items():
            if s not in by_system:
                continue
            r = by_system[s]
            wall = r["wall_s"] / base["wall_s"]
            out.append(
                f"{wl} vs {s}: wall {wall:.2f}x (goal {wall_goal}x: {'met' if wall >= wall_goal else 'NOT met'})"
            )
            if wall < wall_goal:
                unmet.setdefault(wl, set()).add("wall")
                out.append(shortfall(f"{wl} vs {s}", wall_goal, base, r["wall_s"]))
            if rate_goal:
                rate = (base["client_steps"] / base["train_s"]) / (r["client_steps"] / r["train_s"])
                out.append(
                    f"{wl} vs {s}: client-steps/s {rate:.2f}x (goal {rate_goal}x: "
                    f"{'met' if rate >= rate_goal else 'NOT met'})"
                )
                if rate < rate_goal:
                    unmet.setdefault(wl, set()).add("steps")
    return out, unmet


def shortfall(what: str, goal: float, base: dict, peer_wall: float) -> str:
    """By how much fedrun (its run ``base``) misses a wall-time ``goal`` against a peer's
    ``peer_wall`` seconds: the process it would need, and what bounds it -- its training alone
    longer than that (the client-steps/s it would need), or its fixed cost (wall minus
    training) and the size it would have to shrink to."""
    need, wall, train = peer_wall / goal, base["wall_s"], base["train_s"]
    line = (
        f"  {what}: {goal}x needs fedrun's process in {need:.1f} s, {wall - need:.1f} s "
        f"({1 - need / wall:.0%}) less than its {wall:.1f} s"
    )
    if train >= need:
        rate, needed = base["client_steps"] / train, base["client_steps"] / need
        return line + (
            f"; its training alone takes {train:.1f} s: with no fixed cost at all it would need "
            f"{needed:,.0f} client-steps/s, {train / need:.1f}x its {rate:,.0f}"
        )
    return line + (
        f"; with its training as it is ({train:.1f} s), its fixed cost would have to fall from "
        f"{wall - train:.1f} s to {need - train:.1f} s"
    )


def bounds(unmet: dict[str, set[str]], tmp: Path) -> list[str]:
    """What bounds each goal not met: fedrun's process by phase, and its training steps against
    the roofline where client-steps/s fell short."""
    lines = []
    for wl, which in unmet.items():
        n, K, T, participation = WORKLOADS[wl]
        lines.append(
            f"{wl}, fedrun's process by phase: "
            f"{profile(fedrun_args(n, K, T, participation, Path(tempfile.mkdtemp(dir=tmp)) / 'run'), tmp)}"
        )
        if "steps" in which:
            lines.append(f"{wl}, fedrun's training steps: {roofline(n, K, participation, tmp)}")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--workloads",
        default=",".join(WORKLOADS),
        help=f"of {', '.join(WORKLOADS)} (empty: the start-up only)",
    )
    ap.add_argument("--systems", default="fedrun,pfl,flower")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--no-startup", action="store_true", help="skip the tiny run's start-up")
    args = ap.parse_args(argv)
    systems = args.systems.split(",")
    pythons = {s: side_env(s, PEERS[s][0]) for s in systems if s in PEERS}
    print(f"machine: {machine()}; torch threads 1 per process", flush=True)
    print(SAME_JOB, flush=True)
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="bench_peers_") as tmp:
        for r in range(args.repeats):
            for wl in filter(None, args.workloads.split(",")):
                n, K, T, participation = WORKLOADS[wl]
                for s in systems:
                    got = (
                        run_fedrun(n, K, T, participation, Path(tmp))
                        if s == "fedrun"
                        else run_peer(pythons[s], PEERS[s][1], n, K, T, participation, Path(tmp))
                    )
                    calls = (
                        f", {got['calls']} client calls: first {got['first_call_s']:.3f} s, median "
                        f"{got['median_call_s']:.3f} s"
                        if "calls" in got
                        else ""
                    )
                    print(
                        f"  repeat {r}, {wl}, {s}: wall {got['wall_s']:.1f} s, training {got['train_s']:.2f} s, "
                        f"loss {got['train_loss']:.4f}, test acc {got['test_acc']:.4f}{calls}; "
                        f"load average {os.getloadavg()[0]:.2f}",
                        flush=True,
                    )
                    best = results.setdefault(wl, {}).get(s)
                    if best is None or got["wall_s"] < best["wall_s"]:
                        # the best process; its training time is its own framework's
                        results[wl][s] = {
                            **got,
                            "train_s": min(got["train_s"], best["train_s"])
                            if best
                            else got["train_s"],
                        }
        if results:
            met, unmet = goals(results)
            print(
                "\n".join(
                    [
                        "",
                        *table(results, systems),
                        "",
                        "the peers' client calls (of the process above):",
                        *call_table(results, systems),
                        "",
                        *met,
                    ]
                ),
                flush=True,
            )
            if unmet and "fedrun" in systems:
                print("\n".join(["", "what bounds the goals not met:", *bounds(unmet, Path(tmp))]))
        if not args.no_startup:
            best = startup(max(3, args.repeats), Path(tmp))
            run, torch_, dynamo = (
                best["tiny run"],
                best["import torch"],
                best["import torch._dynamo"],
            )
            overhead = [r - t for r, t in zip(run, torch_)]
            print(
                f"\ntiny run (dataset=digits model=linear T=1): {run[0]:.2f} s wall, {run[1]:.2f} s CPU; "
                f"import torch: {torch_[0]:.2f} s wall, {torch_[1]:.2f} s CPU; overhead beyond import torch: "
                f"{overhead[0]:.2f} s wall, {overhead[1]:.2f} s CPU (goal <= {STARTUP_GOAL_S} s: "
                f"{'met' if overhead[0] <= STARTUP_GOAL_S else 'NOT met'} in wall time); importing torch._dynamo "
                f"as well would add {dynamo[0] - torch_[0]:.2f} s wall, {dynamo[1] - torch_[1]:.2f} s CPU"
            )
            if overhead[0] > STARTUP_GOAL_S:
                tiny = [
                    "dataset=digits",
                    "model=linear",
                    "T=1",
                    f"hydra.run.dir={Path(tmp) / 'tiny-profile'}",
                ]
                print(f"what bounds it, the tiny run by phase: {profile(tiny, Path(tmp))}")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
