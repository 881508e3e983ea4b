"""Devices: random draws come from CPU generators (fedprox_cli/engine/device.py) -- the numbers of
the recorded CPU runs, and the same numbers on every device; ``matmul_precision``; and, where a
GPU exists, CPU-vs-CUDA agreement of both engines on every model and rounds without host
synchronization (``scripts/gpu_check.sh`` runs these on the device machine)."""

import json
import linecache
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch.overrides import TorchFunctionMode

from fedprox_cli import algorithms, data
from fedprox_cli.common.draws import stream_seed
from fedprox_cli.common.errors import UserError
from fedprox_cli.config.compose import compose
from fedprox_cli.engine import models
from fedprox_cli.engine.client_data import ClientData
from fedprox_cli.engine.device import device_name, hardware, set_matmul_precision
from fedprox_cli.engine.models import FlatModel
from fedprox_cli.engine.oracle import Oracle
from fedprox_cli.operators import compressors
from fedprox_cli.runs import experiment

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def digits_oracle(device="cpu", B=16, seed=3):
    ds = data.load("digits")
    clients = data.partition("dirichlet", ds.train_y.numpy(), 6, 0, min_size=10, alpha=0.5)
    torch.manual_seed(0)
    flat = FlatModel(models.build("linear", ds.input_shape, 10).to(device))
    return Oracle(
        flat, ClientData.build(ds.train_x, ds.train_y, clients, device), B, seed=seed, engine="vmap"
    )


def old_batch_ids(oracle, t, k, clients):
    """The mini-batch ids as drawn before the draws moved to the CPU, on a CPU oracle (the
    generator lived on the run's device)."""
    gen = torch.Generator(device=oracle.device).manual_seed(stream_seed(oracle.seed, t, k))
    u = torch.rand(oracle.data.n, oracle.B, generator=gen, device=oracle.device)
    pos = (u * oracle.data.sizes[:, None]).long().clamp_max_(oracle.data.sizes[:, None] - 1)
    return oracle.data.index.gather(1, pos)[clients]


def test_cpu_batch_ids_are_those_of_recorded_runs():
    oracle = digits_oracle()
    for t, k in [(0, 0), (3, 7), (199, 39)]:
        for clients in (torch.arange(6), torch.tensor([4, 1])):
            assert torch.equal(
                oracle.batch_ids(t, k, clients), old_batch_ids(oracle, t, k, clients)
            )


def old_compress(comp, V, seed):
    """randk / qsgd as they drew before (generator on V's device; V on the CPU here)."""
    gen = torch.Generator(device=V.device).manual_seed(seed)
    if comp.name == "randk":
        k = compressors._kept(V.shape[-1], comp.ratio)
        idx = (
            torch.rand(V.shape, generator=gen, device=V.device, dtype=torch.float32)
            .topk(k, dim=-1)
            .indices
        )
        return torch.zeros_like(V).scatter_(
            -1, idx, V.gather(-1, idx) * (V.shape[-1] / k if comp.scaled else 1.0)
        )
    norm = V.norm(dim=-1, keepdim=True)
    scaled = comp.levels * V.abs() / norm.clamp_min(torch.finfo(V.dtype).tiny)
    low = scaled.floor()
    level = low + (
        torch.rand(V.shape, generator=gen, device=V.device, dtype=V.dtype) < scaled - low
    )
    return norm * V.sign() * level / comp.levels


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    "name,params",
    [("randk", {"ratio": 0.1}), ("randk", {"ratio": 0.3, "scaled": True}), ("qsgd", {"levels": 4})],
)
def test_cpu_compressor_draws_are_those_of_recorded_runs(name, params, dtype):
    V = torch.randn(5, 300, generator=torch.Generator().manual_seed(2), dtype=dtype)
    comp = compressors.build(name, **params)
    for seed in (0, 123456789):
        assert torch.equal(comp(V, seed)[0], old_compress(comp, V, seed))


@cuda
def test_batch_ids_do_not_depend_on_the_device():
    cpu, gpu = digits_oracle("cpu"), digits_oracle("cuda")
    clients = torch.tensor([5, 0, 3])
    for t, k in [(0, 0), (17, 3)]:
        assert torch.equal(gpu.batch_ids(t, k, clients.cuda()).cpu(), cpu.batch_ids(t, k, clients))


@cuda
@pytest.mark.parametrize("name", ["randk", "qsgd"])
def test_compressor_draws_do_not_depend_on_the_device(name):
    V = torch.randn(5, 300, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    comp = compressors.build(name)
    got, ref = comp(V.cuda(), 7)[0].cpu(), comp(V, 7)[0]
    if name == "randk":
        assert torch.equal(got, ref)  # the same kept coordinates and values
    else:
        assert torch.equal(got != 0, ref != 0)
        torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-15)


def test_matmul_precision_is_validated_applied_and_recorded(run_fedrun, tmp_path):
    with pytest.raises(
        UserError, match="matmul_precision must be one of highest, high, medium, got 'fast'"
    ):
        experiment.build(compose(["dataset=digits", "matmul_precision=fast"]))
    try:
        experiment.build(compose(["dataset=digits", "device=cpu", "matmul_precision=medium"]))
        assert torch.get_float32_matmul_precision() == "medium" and torch.backends.cudnn.allow_tf32
        experiment.build(compose(["dataset=digits", "device=cpu"]))
        assert torch.get_float32_matmul_precision() == "highest"  # the default: exact float32
        assert not torch.backends.cudnn.allow_tf32
    finally:
        set_matmul_precision("highest")
    p = run_fedrun(
        "dataset=digits",
        "model=linear",
        "n=3",
        "K=1",
        "T=1",
        "device=cpu",
        "matmul_precision=high",
        f"hydra.run.dir={tmp_path}",
    )
    assert p.returncode == 0, p.stderr
    assert "matmul_precision: high" in (tmp_path / "config.yaml").read_text()
    hw = json.loads((tmp_path / "summary.json").read_text())["hardware"]  # what it ran on
    assert (
        hw
        == {
            "name": device_name(torch.device("cpu")),
            "memory_gib": hw["memory_gib"],
            "torch": torch.__version__,
            "cuda": None,
            "driver": None,
            "gpu": "cpu",
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "placed_by": None,
        }
        and hw["memory_gib"] > 0
    )


def test_hardware_of_a_gpu_names_it_its_memory_and_versions(monkeypatch, tmp_path):
    """The CUDA branch with the GPU's answers stood in for: properties and nvidia-smi."""
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 580.159.03\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(
        torch.cuda,
        "get_device_properties",
        lambda d: SimpleNamespace(name="NVIDIA H100 80GB HBM3", total_memory=85_045_477_376),
    )
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert hardware(torch.device("cuda")) == {
        "name": "NVIDIA H100 80GB HBM3",
        "memory_gib": 79.2,
        "torch": torch.__version__,
        "cuda": "13.0",
        "driver": "580.159.03",
        "gpu": {"index": 0, "name": "NVIDIA H100 80GB HBM3"},
        "cuda_visible_devices": None,
        "placed_by": None,
    }
    monkeypatch.setenv("PATH", str(tmp_path / "none"))  # no nvidia-smi: the driver is unknown
    assert hardware(torch.device("cuda"))["driver"] is None


@cuda
def test_a_cuda_run_records_its_gpu(run_fedrun, tmp_path):
    p = run_fedrun(
        "dataset=digits",
        "model=linear",
        "n=3",
        "K=1",
        "T=1",
        "device=cuda",
        f"hydra.run.dir={tmp_path}",
    )
    assert p.returncode == 0, p.stderr
    hw = json.loads((tmp_path / "summary.json").read_text())["hardware"]
    assert (
        hw["name"] == torch.cuda.get_device_name(0)
        and hw["cuda"] == torch.version.cuda
        and hw["memory_gib"] > 1
    )
    assert hw["gpu"] == {"index": 0, "name": torch.cuda.get_device_name(0)}


def algorithm_config(name):
    """Overrides running ``name`` with its config defaults on digits: h = 0 where it must be,
    a random compressor and half the clients where it takes them."""
    cls = type(algorithms.build(name))
    return [
        f"algorithm={name}",
        f"regularizer={'none' if cls.smooth_only else 'l1'}",
        f"compressor={'randk' if cls.takes_compressor else 'identity'}",
        f"participation={0.5 if cls.partial_participation else 1}",
    ]


def tiny_run(device, *overrides):
    """The pieces of a 4-client digits run on ``device`` (float32, 2 local steps of B = 8)."""
    return experiment.build(
        compose(
            [
                "dataset=digits",
                "n=4",
                "K=2",
                "B=8",
                "T=3",
                f"device={device}",
                "matmul_precision=highest",
                *overrides,
            ]
        )
    )


def rounds(exp, T=2):
    state = exp.alg.init(exp.flat.flat(), exp.cfg.n)
    for t in range(T):
        exp.env.start_round(t)
        state = exp.alg.round(state, exp.env, t)
    return exp.alg.output(state)


def close(got, ref, rel=1e-4):
    """Float32 agreement relative to the reference's size (devices order sums differently)."""
    return (
        float((got.double().cpu() - ref.double()).norm()) <= rel * float(ref.double().norm()) + 1e-7
    )


@cuda
@pytest.mark.parametrize("engine", ["loop", "vmap"])
@pytest.mark.parametrize("model", models.names())
def test_cuda_gradients_and_rounds_match_the_cpu(model, engine):
    """Every model, both engines: the same mini-batches, gradients and FedCanon rounds on CUDA
    as on the CPU, to float32 tolerance."""
    cpu, gpu = (tiny_run(d, f"model={model}", f"engine={engine}") for d in ("cpu", "cuda"))
    X = cpu.flat.flat().expand(4, -1).clone()
    X += 0.01 * torch.randn(X.shape, generator=torch.Generator().manual_seed(0))
    G_cpu, L_cpu = cpu.oracle.grad(X, 1, 1)
    G_gpu, L_gpu = gpu.oracle.grad(X.cuda(), 1, 1)
    assert close(G_gpu, G_cpu) and close(L_gpu, L_cpu)
    assert close(rounds(gpu), rounds(cpu), rel=1e-3)


class HostReads(TorchFunctionMode):
    """Records the calls made from fedprox_cli's code that read a tensor's value on the host
    or make a tensor of host values (on CUDA each synchronizes the host with the device), except
    on lines that say why they do not (``# CPU: no sync``: a value drawn on the CPU)."""

    CALLS = {
        torch.Tensor.item,
        torch.Tensor.__bool__,
        torch.Tensor.__float__,
        torch.Tensor.__int__,
        torch.Tensor.__index__,
        torch.Tensor.tolist,
        torch.Tensor.numpy,
        torch.Tensor.cpu,
        torch.Tensor.new_tensor,
        torch.tensor,
        torch.as_tensor,
    }
    PACKAGE = str(Path(algorithms.__file__).parent.parent)

    def __init__(self):
        super().__init__()
        self.seen = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in self.CALLS:
            frame = sys._getframe(1)
            while frame is not None and not frame.f_code.co_filename.startswith(self.PACKAGE):
                frame = frame.f_back
            line = frame and linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
            if line and "no sync" not in line:
                self.seen.add(f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno}: {line}")
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("name", algorithms.names())
def test_a_round_reads_no_tensor_on_the_host(name):
    """The CPU counterpart of the CUDA test below, for machines without a GPU: a round of
    every algorithm (SCAFFNEW with its coin), both engines, makes none of the calls that
    synchronize on CUDA."""
    extra = ["algorithm.p=0.5"] if name == "scaffnew" else []
    for engine in ("loop", "vmap"):
        exp = tiny_run("cpu", "model=mlp", f"engine={engine}", *algorithm_config(name), *extra)
        state = exp.alg.init(exp.flat.flat(), exp.cfg.n)
        exp.env.start_round(0)
        state = exp.alg.round(state, exp.env, 0)
        with HostReads() as reads:
            exp.env.start_round(1)
            exp.alg.round(state, exp.env, 1)
        assert not reads.seen, (engine, sorted(reads.seen))


@cuda
@pytest.mark.parametrize("engine", ["loop", "vmap"])
@pytest.mark.parametrize("name", algorithms.names())
def test_cuda_round_does_not_synchronize_the_host(name, engine):
    """A round reads no tensor value on the host (no .item(), no blocking copy): with CUDA's
    sync debug mode set to "error", any synchronizing call inside the round raises."""
    exp = tiny_run("cuda", "model=mlp", f"engine={engine}", *algorithm_config(name))
    state = exp.alg.init(exp.flat.flat(), exp.cfg.n)
    exp.env.start_round(0)
    state = exp.alg.round(state, exp.env, 0)  # warm-up: lazy initialization, pinned memory pool
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        exp.env.start_round(1)
        exp.alg.round(state, exp.env, 1)
    finally:
        torch.cuda.set_sync_debug_mode("default")
