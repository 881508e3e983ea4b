"""FedCanon Table I: the time of one proximal mapping (l1, MCP, SCAD) on the full parameter vector
of a ResNet, against one forward + backward pass of that network on a batch of MNIST-shaped inputs.

    python scripts/bench_prox.py                                   # all four ResNets, auto device
    python scripts/bench_prox.py --models resnet18,resnet50 --reps 5 --batch 64 --device cpu
    python scripts/bench_prox.py --models cnn --batch 64     # Table V's CNN (fedprox_cli's model)

The ResNets are torchvision's resnetXX(num_classes=10) with the first convolution taking one
input channel (MNIST), as in Table I; any other name is a fedprox_cli model (conf/model/) built
for 1x28x28 inputs and 10 classes. Inputs are random 1x28x28 images, so only the shapes matter.
The prox is fedprox_cli's own (the one training uses), applied to the flat vector of all
parameters with step --step (FedCanon's default alpha). Every time is the median over --reps
repetitions after one warm-up, measured in this one process; CUDA times are synchronized.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
import torchvision

from fedprox_cli.common.errors import UserError
from fedprox_cli.engine import models
from fedprox_cli.engine.device import resolve_device
from fedprox_cli.operators import regularizers

MODELS = ("resnet18", "resnet34", "resnet50", "resnet101")  # Table I's, from torchvision
SHAPE = (1, 28, 28)  # MNIST images


def proxes(lam: float = 1e-5, scad_a: float = 3.7) -> dict:
    """Table I's three proxes at penalty level ``lam`` (SCAD with shape ``scad_a``)."""
    return {
        "l1": dict(name="l1", lam=lam),
        "MCP": dict(name="mcp", lam=lam),
        "SCAD": dict(name="scad", lam=lam, a=scad_a),
    }


PROXES = proxes()


def mnist_resnet(name: str) -> torch.nn.Module:
    """torchvision's ``name`` for 10 classes, with a 1-channel first convolution."""
    net = getattr(torchvision.models, name)(num_classes=10)
    net.conv1 = torch.nn.Conv2d(1, 64, kernel_size=7, stride=2, padding=3, bias=False)
    return net


def network(name: str) -> torch.nn.Module:
    """Table I's torchvision ResNet ``name``, else fedprox_cli's model ``name`` for MNIST."""
    return mnist_resnet(name) if name in MODELS else models.build(name, SHAPE, 10)


def median_ms(fn, device: torch.device, reps: int) -> float:
    """Median wall time of ``fn()`` in milliseconds, after one warm-up call."""

    def once():
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return 1e3 * (time.perf_counter() - start)

    once()
    return statistics.median(once() for _ in range(reps))


def bench(
    name: str, device: torch.device, batch: int, reps: int, step: float, specs: dict = PROXES
) -> dict:
    torch.manual_seed(0)
    net = network(name).to(device).train()
    inputs = torch.randn(batch, *SHAPE, device=device)
    labels = torch.randint(0, 10, (batch,), device=device)

    def fwd_bwd():
        net.zero_grad(set_to_none=True)
        F.cross_entropy(net(inputs), labels).backward()

    x = torch.cat([p.detach().reshape(-1) for p in net.parameters()])
    row = {"model": name, "d": x.numel(), "fwd_bwd": median_ms(fwd_bwd, device, reps)}
    for label, spec in specs.items():
        h = regularizers.build(**spec)
        row[label] = median_ms(lambda h=h: h.prox(x, step), device, reps)
    return row


HEADER = f"{'Models':<11}{'params':>12}{'Fwd & Bwd':>12}" + "".join(f"{k:>20}" for k in PROXES)


def table_row(r: dict) -> str:
    """One line of the table: times in ms, each prox also as a multiple of Fwd & Bwd."""
    cells = "".join(f"{r[k]:>10.2f} ({r[k] / r['fwd_bwd']:.3f}x)" for k in PROXES)
    return f"{r['model']:<11}{r['d']:>12,}{r['fwd_bwd']:>12.1f}{cells}"


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--models",
        default=",".join(MODELS),
        help=f"comma-separated names: {','.join(MODELS)} (torchvision's, the default) "
        "or fedprox_cli models (cnn, mlp, ...)",
    )
    p.add_argument("--device", default="auto", help="auto (CUDA if present) | cpu | cuda")
    p.add_argument(
        "--batch",
        type=int,
        default=64,
        help="images per forward+backward pass (default 64; Table I states none)",
    )
    p.add_argument("--reps", type=int, default=5, help="timed repetitions; the median is reported")
    p.add_argument("--step", type=float, default=0.2, help="prox step (FedCanon's alpha, 0.2)")
    p.add_argument("--lam", type=float, default=1e-5, help="every prox's penalty level lam")
    p.add_argument(
        "--scad-a", type=float, default=3.7, help="SCAD's shape a (Fan and Li's 3.7; > 2)"
    )
    args = p.parse_args(argv)
    names = args.models.split(",")
    known = set(MODELS) | set(models.names())
    unknown = sorted(set(names) - known)
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(sorted(known))}")
    if args.batch < 1 or args.reps < 1:
        p.error("--batch and --reps must be >= 1")
    if args.scad_a <= 2 or args.lam < 0:
        p.error("--scad-a must be > 2 and --lam >= 0")
    specs = proxes(args.lam, args.scad_a)
    try:
        device = resolve_device(args.device)
    except UserError as e:
        p.error(str(e))
    where = (
        torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"CPU, {torch.get_num_threads()} threads"
    )
    print(
        f"# one prox on the flat parameter vector vs one forward+backward pass, milliseconds "
        f"(median of {args.reps}); {where}; float32; batch {args.batch} of 1x28x28; "
        f"prox step {args.step}; "
        + ", ".join(repr(regularizers.build(**spec)) for spec in specs.values())
    )
    print(HEADER, flush=True)
    for name in names:
        print(table_row(bench(name, device, args.batch, args.reps, args.step, specs)), flush=True)


if __name__ == "__main__":
    main()
