"""``compile`` (engine/compile.py): the compiled vmap call computes the eager engine's rounds to
float32 rounding for every algorithm; ``auto`` decides by measurement with the compile time
counted, caches, and falls back when compiling fails; bad combinations are refused.

Compiling costs seconds (tens on a busy machine with a cold inductor cache): every algorithm
shares one compiled oracle (one program per input layout), and the command-line run uses the
same shapes, so inductor's on-disk cache serves it."""

import json
from pathlib import Path

import pytest
import torch

from fedprox_cli import algorithms
from fedprox_cli.common.errors import UserError
from fedprox_cli.config.compose import compose
from fedprox_cli.config.validate import params
from fedprox_cli.engine import choice as engine_choice
from fedprox_cli.engine import compile as compile_choice
from fedprox_cli.operators import compressors, regularizers
from fedprox_cli.runs import experiment

SHAPES = ["dataset=digits", "model=mlp", "model.hidden=16", "n=4", "K=2", "B=8", "T=2", "seed=1"]
DEVICES = [
    "cpu",
    pytest.param(
        "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU here")
    ),
]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module", params=DEVICES)
def oracles(request):
    """(eager, compiled) oracles of the same run on one device."""
    built = {
        c: experiment.build(
            compose([*SHAPES, f"device={request.param}", "engine=vmap", f"compile={c}"])
        )
        for c in ("false", "true")
    }
    assert built["true"].oracle.compile_choice["compiled"] is True
    assert built["false"].oracle.compile_choice == {"compiled": False, "source": "forced"}
    return built["false"].oracle, built["true"].oracle


def rounds(name: str, oracle, T: int = 2) -> dict:
    cfg = compose([*SHAPES, f"algorithm={name}"])
    alg = algorithms.build(name, **params(cfg.algorithm))
    h = regularizers.build(
        "none" if alg.smooth_only else "l1", **({} if alg.smooth_only else {"lam": 1e-2})
    )
    env = algorithms.Env(oracle, h, compressors.build("identity"), 4, 2, T)
    state = alg.init(oracle.model.flat(), 4)
    for t in range(T):
        env.start_round(t)
        state = alg.round(state, env, t)
    return state


@pytest.mark.compiles
@pytest.mark.parametrize("name", algorithms.names())
def test_compiled_rounds_equal_eager_rounds(oracles, name):
    eager, fast = oracles
    ref, got = rounds(name, eager), rounds(name, fast)
    assert set(ref) == set(got)
    for key in ref:
        torch.testing.assert_close(
            got[key], ref[key], rtol=1e-4, atol=1e-5, msg=f"{name} state {key}"
        )


def test_every_shipped_algorithm_is_covered():
    """Every shipped algorithm (one file each) is among the parametrized names (an installed
    plugin's algorithm joins them)."""
    shipped = {
        p.stem
        for p in Path(algorithms.__file__).parent.glob("*.py")
        if not p.stem.startswith("_") and p.stem not in ("base", "contract")
    }
    assert len(shipped) == 14 and shipped <= set(algorithms.names())


@pytest.fixture
def stubbed(tmp_path, monkeypatch):
    """compile.json in a temporary folder; ``compiled`` a plain pass-through and the timer a
    stub returning ``times`` (seconds per client-step) and ``compile_s`` (no real compile)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(compile_choice, "compiled", lambda fn, device: fn)
    stub = {"times": {"vmap": 2e-3, "compiled": 1e-3}, "compile_s": 10.0, "calls": 0}

    def timer(oracle, clients, variants, repeats=engine_choice.REPEATS):
        stub["calls"] += repeats > 0  # timings, not a warm-up (compiling) call
        return (
            {v: stub["times"][v] for v in variants},
            {v: stub["compile_s"] if v == "compiled" else 0.0 for v in variants},
        )

    monkeypatch.setattr(engine_choice, "time_steps", timer)
    return stub


def build(*overrides):
    return experiment.build(compose([*SHAPES, "device=cpu", "engine=vmap", *overrides]))


def test_auto_counts_the_compile_time_against_the_runs_length(stubbed):
    # 10 s of compiling saves 1 ms per client-step: worth it from 10,000 client-steps on
    short = build("compile=auto", "T=100", "K=10")  # 4,000 client-steps
    assert (
        short.oracle.compile_choice["compiled"] is False
        and short.oracle.compile_choice["source"] == "measured"
    )
    assert stubbed["calls"] == 1
    long = build("compile=auto", "T=1000", "K=10")  # 40,000: from the cache, no timing
    rec = long.oracle.compile_choice
    assert rec["compiled"] is True and rec["source"] == "cache" and stubbed["calls"] == 1
    assert rec["s_per_client_step"] == {"vmap": 2e-3, "compiled": 1e-3} and rec["compile_s"] == 10.0
    assert len(json.loads(compile_choice.cache_file().read_text())) == 1


def test_auto_keeps_eager_where_compiled_is_slower_and_compares_with_the_chosen_engine(stubbed):
    stubbed["times"] = {"vmap": 1e-3, "loop": 5e-4, "compiled": 8e-4}
    o = experiment.build(compose([*SHAPES, "device=cpu", "engine=loop", "compile=auto"])).oracle
    assert o.compile_choice == {
        "compiled": False,
        "source": "engine=loop (only the vmap engine compiles)",
    }
    o = build("compile=auto", "T=100000").oracle  # vmap forced: the compiled call beats it
    assert o.compile_choice["compiled"] is True and o.engine.name == "vmap"
    stubbed["times"]["compiled"] = 3e-3
    o = build("compile=auto", "T=100000", "B=4").oracle  # other shapes: measured again, slower
    assert o.compile_choice["compiled"] is False and stubbed["calls"] == 2


def test_a_failing_compile_is_eager_under_auto_and_an_error_under_true(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    def broken(*args):
        raise RuntimeError("InvalidCxxCompiler: no working C++ compiler found")

    monkeypatch.setattr(compile_choice, "compiled", lambda fn, device: broken)
    o = build("compile=auto").oracle
    assert o.compile_choice == {"compiled": False, "source": "unavailable (RuntimeError)"}
    X = o.model.flat().expand(4, -1).contiguous()
    o.grad(X, 0, 0)  # the eager call is back
    with pytest.raises(UserError, match="compile=true: torch.compile failed here"):
        build("compile=true")


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["compile=true", "engine=loop"], "compile=true compiles the vmap engine"),
        (["compile=maybe"], "compile must be true, false or auto, got 'maybe'"),
        (["compile=1"], "compile must be true, false or auto, got 1"),
        (
            ["compile=true", "seeds=2"],
            "seeds=2 joins the runs' gradient calls, which are not compiled",
        ),
    ],
)
def test_bad_compile_settings_are_refused(overrides, message):
    with pytest.raises(UserError, match=message):
        experiment.validate(compose([*SHAPES, *overrides]))


def test_compile_true_with_engine_loop_is_refused_from_the_command_line(run_fedrun, tmp_path):
    p = run_fedrun(*SHAPES, "compile=true", "engine=loop", f"hydra.run.dir={tmp_path / 'run'}")
    assert p.returncode == 2 and "compile=true compiles the vmap engine" in p.stderr, p.stderr[
        -1000:
    ]
    assert not (tmp_path / "run").exists()  # refused at validation: no folder


@pytest.mark.compiles
def test_compile_true_from_the_command_line_records_it(run_fedrun, tmp_path):
    out = tmp_path / "run"
    p = run_fedrun(
        *SHAPES, "device=cpu", "engine=auto", "compile=true", "eval_every=1", f"hydra.run.dir={out}"
    )
    assert p.returncode == 0, p.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["compile"]["compiled"] is True and summary["compile"]["source"] == "forced"
    assert summary["compile"]["mode"] == "default" and summary["compile"]["compile_s"] > 0
    assert summary["engine"]["engine"] == "vmap" and summary["status"] == "finished"


def test_seed_batched_runs_with_compile_auto_stay_eager_and_say_so(run_fedrun, tmp_path):
    out = tmp_path / "run"
    p = run_fedrun(*SHAPES, "device=cpu", "seeds=2", "compile=auto", "T=1", f"hydra.run.dir={out}")
    assert p.returncode == 0, p.stderr[-2000:]
    for s in ("seed_1", "seed_2"):
        rec = json.loads((out / s / "summary.json").read_text())["compile"]
        assert rec == {"compiled": False, "source": "seeds=2: the joined call is not compiled"}
