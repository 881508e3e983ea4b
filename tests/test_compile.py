"""``compile`` (engine/compile.py): the compiled vmap call computes the eager engine's rounds to
float32 rounding for every algorithm; ``auto`` decides by measurement with the compile time
counted, caches, and falls back when compiling fails; bad combinations are refused.

Compiling costs seconds (tens on a busy machine with a cold inductor cache): every algorithm
shares one compiled oracle (one program per input layout), and the command-line run uses the
same shapes, so inductor's on-disk cache serves it."""

import ast
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

    monkeypatch.setattr(engine_choice, "time_rounds", timer)
    return stub


def build(*overrides):
    return experiment.build(compose([*SHAPES, "device=cpu", "engine=vmap", *overrides]))


def test_auto_takes_compiled_rounds_where_the_runs_steps_repay_the_compile(stubbed):
    # 10 s of compiling saves 1 ms per client-step: worth it from 10,000 client-steps on
    long = build("compile=auto", "T=100000", "K=10")  # eager 800 s: a trial could pay
    rec = long.oracle.compile_choice
    # timed: the forced engine's eager step, then the trial (eager and compiled in turn)
    assert rec["compiled"] is True and rec["source"] == "measured" and stubbed["calls"] == 2
    assert rec["client_steps"] == 4_000_000 and long.oracle.engine.name == "vmap"
    short = build("compile=auto", "T=100", "K=10")  # 4,000 client-steps: from the cache, eager
    rec = short.oracle.compile_choice
    assert rec["compiled"] is False and rec["source"] == "cache" and stubbed["calls"] == 2
    assert rec["s_per_client_step"] == {"vmap": 2e-3, "compiled": 1e-3} and rec["compile_s"] == 10.0
    rec = build("compile=auto", "T=1000", "K=10").oracle.compile_choice  # 40,000: compiled
    assert rec["compiled"] is True and rec["source"] == "cache" and stubbed["calls"] == 2
    assert len(json.loads(compile_choice.cache_file().read_text())) == 1
    assert compile_choice.line(rec).startswith(
        "compiled rounds (compile=auto, from the cache (measured "
    )


def test_auto_does_not_try_a_compile_that_cannot_repay_itself(stubbed, monkeypatch):
    """Without a record of the run's key, a trial compile only where the run's eager seconds,
    at the best speedup measured on such a device, would save more than the least compile
    seconds measured there: this device's records first, else the shipped numbers."""
    monkeypatch.setattr(compile_choice, "compiled", pytest.fail)  # nothing compiles
    rec = build("compile=auto", "T=100", "K=10").oracle.compile_choice  # eager 8 s
    assert rec["compiled"] is False and rec["source"].startswith("not tried")
    assert rec["prior"]["from"] == "shipped" and rec["s_per_client_step"] == {"vmap": 2e-3}
    assert stubbed["calls"] == 1  # the forced engine's eager step timed, nothing compiled
    assert not compile_choice.cache_file().exists()  # nothing measured about compiling
    assert compile_choice.line(rec) is None


def test_a_devices_own_records_are_its_prior():
    key = {"device": "cpu", "device_name": "a CPU"}

    def entry(name, eager, compiled, compile_s):
        k = json.dumps({"engine": {**key, "device_name": name, "B": eager}, "mode": "default"})
        times = {"vmap": eager, "loop": 2 * eager, "compiled": compiled}
        return k, {"s_per_client_step": times, "compile_s": compile_s}

    cache = dict(
        [entry("a CPU", 4.0, 2.0, 30.0), entry("a CPU", 3.0, 2.0, 12.0), entry("other", 9, 1, 1)]
    )
    assert compile_choice.prior(key, cache) == {
        "speedup": 2.0,
        "compile_s": 12.0,
        "from": "2 records of this device",
    }
    shipped = compile_choice.prior({"device": "cuda", "device_name": "a GPU"}, cache)
    assert shipped["from"] == "shipped" and shipped["speedup"] > 1
    assert compile_choice.prior({"device": "mps", "device_name": "x"}, {}) is None


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
    assert o.compile_choice["compiled"] is False and stubbed["calls"] == 4


def test_a_failing_compile_is_eager_under_auto_and_an_error_under_true(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    def broken(*args):
        raise RuntimeError("InvalidCxxCompiler: no working C++ compiler found")

    monkeypatch.setattr(compile_choice, "compiled", lambda fn, device: broken)
    o = build("compile=auto", "T=10000000").oracle  # long enough for a trial
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


PERFORMANCE = Path(__file__).parent.parent / "results" / "reproduction" / "performance"
H200 = PERFORMANCE / "gpu-runs-2026-11-26-h200" / "bench_workloads1-3_h200.txt"
XEON = PERFORMANCE / "compile_cpu_xeon_2026-11-26.txt"
PRESETS = {"FedCanon fig2": "fedcanon_fig2", "FedNMap fig2": "fednmap_fig2"}


def measured(path: Path) -> dict[str, dict]:
    """Per workload of a ``scripts/bench_engine.py`` output: the best eager client-steps/s
    (loop, vmap, auto), the compiled ones and the compile seconds of its first compile."""
    out: dict[str, dict] = {}
    for line in path.read_text().splitlines():
        if line.startswith("{'workload'"):
            row = ast.literal_eval(line)
            w = out.setdefault(row["workload"], {"eager": 0.0})
            if row["engine"] == "vmap+compile":
                w.setdefault("compiled", row["steps/s"])
                w.setdefault("compile_s", row["compile s"])
            else:
                w["eager"] = max(w["eager"], row["steps/s"])
    return out


def client_steps(preset: str) -> int:
    cfg = compose([f"experiment={preset}"])
    return cfg.T * cfg.K * round(cfg.n * cfg.participation)


@pytest.mark.parametrize(
    "path, workload, compiled",
    [
        (H200, "FedCanon fig2", True),  # eager 10.3 s; compiled 1.5 s + 6.3 s of compiling
        (H200, "FedNMap fig2", False),  # eager 0.5 s in all: no compile repays itself there
        (XEON, "FedCanon fig2", False),
        (XEON, "FedNMap fig2", False),
    ],
)
def test_the_decision_on_measured_numbers(path, workload, compiled):
    """The pure decision on the numbers measured by ``scripts/bench_engine.py`` (an H200's
    from the project's shared GPU runs, and this project's CPU's; both files committed), at
    the presets' run lengths: on the GPU, FedCanon fig2's compiled rounds repay their compile
    and a trial is worth making; elsewhere neither, and no trial compile is made."""
    prior = json.loads(compile_choice.PRIORS.read_text())["cuda" if path is H200 else "cpu"]
    m, steps = measured(path)[workload], client_steps(PRESETS[workload])
    eager_s, compiled_s = 1 / m["eager"], 1 / m["compiled"]
    assert compile_choice.pays(eager_s, compiled_s, m["compile_s"], steps) is compiled
    assert compile_choice.may_pay(eager_s, steps, prior) is compiled


def test_the_shipped_priors_are_the_committed_measurements():
    """compile_priors.json: per device type, the best speedup over the best eager engine and
    the least first compile, as the committed benchmark outputs give them."""
    priors = json.loads(compile_choice.PRIORS.read_text())
    for kind, path in (("cuda", H200), ("cpu", XEON)):
        rows = measured(path).values()
        assert priors[kind]["speedup"] == round(max(r["compiled"] / r["eager"] for r in rows), 3)
        assert priors[kind]["compile_s"] == round(min(r["compile_s"] for r in rows), 2)
        assert path.name in priors[kind]["measured"]


def test_compile_auto_computes_as_compile_false_for_a_runs_identity():
    """``compile=auto`` runs eager unless its measurement takes compiled rounds (numbers equal
    to float rounding, as another chunk's): one identity with compile=false, for the resume
    check's digest and the reports' groups; compile=true stays another."""
    from fedprox_cli.config.keys import complete
    from fedprox_cli.config.validate import resolved
    from fedprox_cli.runs import checkpoint

    def digest_of(compile: str) -> str:
        return checkpoint.digest(resolved(compose([*SHAPES, f"compile={compile}"])))

    digest = {c: digest_of(c) for c in ("auto", "false")}
    assert digest["auto"] == digest["false"]
    assert digest_of("true") != digest["false"]
    assert complete({"compile": "auto"})["compile"] is False and complete({})["compile"] is False


def test_a_resume_compiles_as_the_run_started():
    from fedprox_cli.config.validate import typed
    from fedprox_cli.runs import numerics

    auto, off = (typed(compose([*SHAPES, f"compile={c}"])) for c in ("auto", "false"))
    assert numerics.of_run("vmap", auto, True)["compiled"] is True
    assert numerics.compiled_on_resume({"compiled": True}, auto) is True
    assert numerics.compiled_on_resume({"compiled": False}, auto) is False
    assert numerics.compiled_on_resume({"engine": "vmap"}, auto) is None  # recorded before
    assert numerics.compiled_on_resume({"compiled": True}, off) is None  # the config decides


def test_torchs_trace_recorder_mending_an_interrupted_compile_says_nothing():
    """A compile stopped by Ctrl-C leaves torch's trace recorder saying ``ChromiumEventLogger:
    Detected overlapping events, fixing stack``: once fedrun compiles, that line is dropped at
    its logger (torch._dynamo.utils); the logger's other lines still come."""
    import logging

    compile_choice.compiled(lambda *a: a, torch.device("cpu"))  # compiles nothing until called
    compile_choice.compiled(lambda *a: a, torch.device("cpu"))  # the filter once, not twice
    dynamo = logging.getLogger("torch._dynamo.utils")
    assert dynamo.filters.count(compile_choice._not_trace_bookkeeping) == 1
    seen: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    dynamo.addHandler(handler)
    try:
        dynamo.warning("ChromiumEventLogger: Detected overlapping events, fixing stack")
        dynamo.warning("ChromiumEventLogger: Start event not in stack, ignoring")
        dynamo.warning("another line of torch's")
    finally:
        dynamo.removeHandler(handler)
    assert seen == ["another line of torch's"]
