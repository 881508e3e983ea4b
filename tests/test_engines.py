"""The gradient engines compute the same function (oracle.py): loop vs vmap, any chunking,
and the exact evaluation passes against a direct autograd reference."""

import json

import pytest
import torch
import torch.nn.functional as F
from conftest import child_env, fedrun

from fedprox_cli import algorithms, data
from fedprox_cli.engine import models
from fedprox_cli.engine.client_data import ClientData
from fedprox_cli.engine.models import FlatModel
from fedprox_cli.engine.oracle import Oracle
from fedprox_cli.operators import compressors, regularizers

N_CLIENTS = 6


@pytest.fixture(scope="module")
def digits():
    ds = data.load("digits")
    ds.train_x, ds.test_x = ds.train_x.double(), ds.test_x.double()
    clients = data.partition("dirichlet", ds.train_y.numpy(), N_CLIENTS, 0, min_size=10, alpha=0.5)
    return ds, clients


def make_oracle(digits, engine, B=16, chunk=None, eval_batch=4096):
    ds, clients = digits
    torch.manual_seed(0)
    flat = FlatModel(models.build("mlp", ds.input_shape, 10, hidden=32).double())
    cd = ClientData.build(ds.train_x, ds.train_y, clients, "cpu")
    return Oracle(flat, cd, B, seed=3, engine=engine, chunk=chunk, eval_batch=eval_batch)


def run_fedcanon(oracle, rounds=3, K=4):
    h = regularizers.build("l1", lam=1e-3)
    env = algorithms.Env(oracle, h, compressors.build("identity"), N_CLIENTS, K, rounds)
    alg = algorithms.build("fedcanon", alpha=0.5, beta=0.05)
    state = alg.init(oracle.model.flat(), N_CLIENTS)
    for t in range(rounds):
        env.start_round(t)
        state = alg.round(state, env, t)
    return state


@pytest.mark.parametrize("engine,chunk", [("vmap", None), ("vmap", 4), ("loop", None)])
def test_fedcanon_rounds_agree_across_engines_and_chunks(digits, engine, chunk):
    ref = run_fedcanon(make_oracle(digits, "vmap", chunk=1))
    got = run_fedcanon(make_oracle(digits, engine, chunk=chunk))
    assert (ref["z"] == 0).any() and ref["C"].abs().max() > 0  # prox active, drift corrected
    for key in ("z", "C"):
        torch.testing.assert_close(got[key], ref[key], rtol=1e-10, atol=1e-12)


def per_client_reference(oracle, X, ids, w):
    """Each client's loss and gradient from its own autograd pass through functional_call."""
    G, L = [], []
    for i in range(len(X)):
        x = X[i].clone().requires_grad_()
        logits = torch.func.functional_call(
            oracle.model.module, oracle.model.params(x), (oracle.data.x[ids[i]],)
        )
        loss = (w[i] * F.cross_entropy(logits, oracle.data.y[ids[i]], reduction="none")).sum()
        G.append(torch.autograd.grad(loss, x)[0])
        L.append(loss.detach())
    return torch.stack(G), torch.stack(L)


@pytest.mark.parametrize("engine", ["loop", "vmap"])
@pytest.mark.parametrize("B", [8, None])
def test_grad_matches_per_client_autograd(digits, engine, B):
    oracle = make_oracle(digits, engine, B=B, chunk=4)
    X = oracle.model.flat() + 0.1 * torch.randn(N_CLIENTS, oracle.model.d, dtype=torch.float64)
    clients = torch.tensor([5, 0, 2])
    G, L = oracle.grad(X[:3], t=1, k=2, clients=clients)
    ids, w = oracle.batches(1, 2, clients)
    G_ref, L_ref = per_client_reference(oracle, X[:3], ids, w)
    torch.testing.assert_close(G, G_ref, rtol=1e-10, atol=1e-13)
    torch.testing.assert_close(L, L_ref, rtol=1e-12, atol=0)
    assert oracle.grad_evals == 3


def test_full_is_the_gradient_of_the_mean_of_client_losses(digits):
    """f = (1/n) sum_i f_i: the full-batch client losses/gradients averaged (B=full), for any
    eval_batch; the working module leaves the model's own module untouched."""
    oracle = make_oracle(digits, "vmap", B=None)
    before = oracle.model.flat()
    x = before + 0.1 * torch.randn(oracle.model.d, dtype=torch.float64)
    G, L = oracle.grad(x.expand(N_CLIENTS, -1), t=0, k=0)
    for eval_batch in (50, 4096):
        oracle.eval_batch = eval_batch
        f, g = oracle.full(x)
        torch.testing.assert_close(f, L.mean(), rtol=1e-12, atol=0)
        torch.testing.assert_close(g, G.mean(0), rtol=1e-10, atol=1e-13)
        assert oracle.full(x, with_grad=False) == (f, None)
    assert torch.equal(oracle.model.flat(), before)


def test_train_samples_subset_is_a_fixed_client_stratified_estimate(digits):
    """metrics.train_samples: m_i ~ samples |D_i| / N distinct ids of client i, weights summing
    to 1/n per client (so a per-client constant loss is estimated exactly), the same subset for
    the same seed; with samples >= N it is the exact pass."""
    ds, clients = digits
    cd = ClientData.build(ds.train_x, ds.train_y, clients, "cpu")
    all_ids, all_w = cd.sample_weights()
    for big in (None, len(all_ids), 10**6):
        ids, w = cd.sample_weights(big, seed=1)
        assert torch.equal(ids, all_ids) and torch.equal(w, all_w)
    ids, w = cd.sample_weights(300, seed=1)
    assert len(set(ids.tolist())) == len(ids) and abs(len(ids) - 300) <= N_CLIENTS
    owner = {int(j): i for i, c in enumerate(clients) for j in c}
    per_client = torch.zeros(N_CLIENTS, dtype=w.dtype).index_add_(
        0, torch.tensor([owner[int(j)] for j in ids]), w
    )
    torch.testing.assert_close(per_client, torch.full_like(per_client, 1 / N_CLIENTS))
    for i, c in enumerate(clients):
        m_i = sum(owner[int(j)] == i for j in ids)
        assert m_i == max(1, round(300 * len(c) / len(all_ids)))
    ids2, _ = cd.sample_weights(300, seed=1)
    ids3, _ = cd.sample_weights(300, seed=2)
    assert torch.equal(ids, ids2) and not torch.equal(ids, ids3)


def test_train_samples_estimate_is_unbiased(digits):
    """The mean of the subset estimates of f over many subset seeds approaches the exact f."""
    oracle = make_oracle(digits, "vmap")
    x = oracle.model.flat() + 0.3 * torch.randn(oracle.model.d, dtype=torch.float64)
    f_exact, _ = oracle.full(x, with_grad=False)
    ests = []
    for seed in range(200):
        oracle._eval_ids, oracle._eval_w = oracle.data.sample_weights(60, seed)
        ests.append(oracle.full(x, with_grad=False)[0])
    ests = torch.stack(ests)
    assert ests.std() > 1e-3  # a real estimate, not the exact pass
    assert abs(ests.mean() - f_exact) < 4 * ests.std() / len(ests) ** 0.5


def test_test_pass_matches_direct_forward(digits):
    ds, _ = digits
    oracle = make_oracle(digits, "loop", eval_batch=100)
    x = oracle.model.flat() + 0.1 * torch.randn(oracle.model.d, dtype=torch.float64)
    logits = oracle.model(x, ds.test_x)
    loss, acc = oracle.test(x, ds.test_x, ds.test_y)
    torch.testing.assert_close(loss, F.cross_entropy(logits, ds.test_y), rtol=1e-12, atol=0)
    assert acc == (logits.argmax(1) == ds.test_y).double().mean()


@pytest.fixture
def engine_cache(tmp_path, monkeypatch):
    """engine=auto's cache in a temporary folder, and a stub for the timing: ``timings`` (seconds
    per client-step by engine) is what the next measurement returns; ``calls`` counts them."""
    from fedprox_cli.engine import choice as engine_choice

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    stub = {"timings": {"loop": 1.0, "vmap": 2.0}, "calls": 0}

    def fake(oracle, clients):
        stub["calls"] += 1
        return dict(stub["timings"])

    monkeypatch.setattr(engine_choice, "time_engines", fake)
    stub["file"] = tmp_path / "fedprox_cli" / "engine.json"
    return stub


def test_auto_takes_the_faster_engine_records_and_caches_it(digits, engine_cache):
    o = make_oracle(digits, "auto")
    assert o.engine.name == "loop" and engine_cache["calls"] == 1
    c = o.engine_choice
    assert c["engine"] == "loop" and c["source"] == "measured"
    assert c["s_per_client_step"] == {"loop": 1.0, "vmap": 2.0} and c["clients_timed"] == N_CLIENTS
    cached = json.loads(engine_cache["file"].read_text())
    ((key, rec),) = cached.items()
    assert rec["engine"] == "loop" and json.loads(key)["B"] == 16
    engine_cache["timings"] = {"loop": 3.0, "vmap": 1.0}  # would now pick vmap, if it measured
    o2 = make_oracle(digits, "auto")
    assert engine_cache["calls"] == 1 and o2.engine.name == "loop"
    assert (
        o2.engine_choice["source"] == "cache"
        and o2.engine_choice["s_per_client_step"]["loop"] == 1.0
    )
    o3 = make_oracle(digits, "auto", B=8)  # other shapes: another key, measured
    assert (
        engine_cache["calls"] == 2
        and o3.engine.name == "vmap"
        and len(json.loads(engine_cache["file"].read_text())) == 2
    )


@pytest.mark.parametrize("engine", ["loop", "vmap"])
def test_engine_loop_or_vmap_forces_without_timing(digits, engine_cache, engine):
    o = make_oracle(digits, engine)
    assert o.engine.name == engine and o.engine_choice == {"engine": engine, "source": "forced"}
    assert engine_cache["calls"] == 0 and not engine_cache["file"].exists()


def test_a_choice_written_while_measuring_wins(digits, engine_cache, monkeypatch):
    """Two jobs of a sweep measuring at once end with one engine: the first choice written."""
    from fedprox_cli.engine import choice as engine_choice

    first = make_oracle(digits, "auto")  # writes loop
    key_file = engine_cache["file"]
    key, rec = next(iter(json.loads(key_file.read_text()).items()))
    key_file.write_text("{}")
    engine_cache["timings"] = {"loop": 3.0, "vmap": 1.0}  # this job would pick vmap ...

    def measure_while_another_writes(oracle, clients):
        key_file.write_text(json.dumps({key: rec}))  # ... but another job writes loop first
        return {"loop": 3.0, "vmap": 1.0}

    monkeypatch.setattr(engine_choice, "time_engines", measure_while_another_writes)
    o = make_oracle(digits, "auto")
    assert o.engine.name == first.engine.name == "loop" and o.engine_choice["source"] == "cache"
    assert json.loads(key_file.read_text()) == {key: rec}


def test_unreadable_cache_is_measured_again_and_rewritten(digits, engine_cache):
    engine_cache["file"].parent.mkdir(parents=True)
    engine_cache["file"].write_text("{not json")
    o = make_oracle(digits, "auto")
    assert o.engine_choice["source"] == "measured" and engine_cache["calls"] == 1
    assert len(json.loads(engine_cache["file"].read_text())) == 1


def test_timing_runs_both_engines_and_leaves_the_oracle_as_it_was(digits):
    """The real timer (no stub): a time for each engine; counters and engine untouched."""
    from fedprox_cli.engine import choice as engine_choice

    o = make_oracle(digits, "vmap")
    t = engine_choice.time_engines(o, 3)
    assert set(t) == {"loop", "vmap"} and all(0 <= v < 10 for v in t.values())
    assert o.engine.name == "vmap" and o.grad_evals == 0


def fednmap_probe(K=10):
    h = regularizers.build("l1", lam=1e-3)
    alg = algorithms.build("fednmap", eta_a=0.05)
    return algorithms.TimedRound(alg, h, compressors.build("identity"), K, 5)


@pytest.mark.parametrize("slow", ["loop", "vmap"])
def test_auto_times_the_algorithms_round_not_a_gradient_step(digits, tmp_path, monkeypatch, slow):
    """A fake clock that advances only in the local steps of the algorithm's round (FedNMap's:
    its prox and update between gradients), by more with one engine: auto takes the other.
    A gradient step alone (the engines' grad) costs nothing on this clock, so timing it could
    not tell the engines apart."""
    from fedprox_cli.engine import choice as engine_choice
    from fedprox_cli.engine.loop import LoopEngine
    from fedprox_cli.engine.vmap import VmapEngine

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    now = [0.0]
    monkeypatch.setattr(engine_choice, "_clock", lambda device: lambda: now[0])
    for cls in (LoopEngine, VmapEngine):

        def timed(self, X, batches, at, update, real=cls.local_steps):
            now[0] += (2.0 if self.name == slow else 1.0) * len(X) * len(batches)
            return real(self, X, batches, at, update)

        monkeypatch.setattr(cls, "local_steps", timed)
    o = make_oracle(digits, "loop")
    o = Oracle(o.model, o.data, 16, seed=3, engine="auto", probe=fednmap_probe())
    fast = "vmap" if slow == "loop" else "loop"
    assert o.engine.name == fast and o.engine_choice["source"] == "measured"
    assert o.engine_choice["s_per_client_step"] == {slow: 2.0, fast: 1.0}
    assert o.engine_choice["timed"] == "fednmap (h l1, uplink identity) rounds, K=4"
    assert o.grad_evals == 0  # the timing leaves the counters as they were


def test_timing_leaves_the_global_generators_as_they_were(digits, tmp_path, monkeypatch):
    """A round that draws from the global generators (an algorithm breaking its contract)
    does not shift the run's own draws by being timed."""
    import random

    import numpy as np

    from fedprox_cli.engine import choice as engine_choice

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    class Noisy(engine_choice.LocalSGD):
        def start(self, oracle, m, K):
            go = super().start(oracle, m, K)
            return lambda: (torch.rand(3), np.random.rand(), random.random(), go())

    o = make_oracle(digits, "loop")
    torch.manual_seed(5), np.random.seed(5), random.seed(5)
    expected = torch.rand(2), np.random.rand(), random.random()
    torch.manual_seed(5), np.random.seed(5), random.seed(5)
    o = Oracle(o.model, o.data, 16, seed=3, engine="auto", probe=Noisy())
    assert o.engine_choice["source"] == "measured"
    got = torch.rand(2), np.random.rand(), random.random()
    assert torch.equal(got[0], expected[0]) and got[1:] == expected[1:]


def test_the_cache_key_holds_the_round_timed(digits):
    """Rounds of another algorithm, or of fewer local steps, are another measurement."""
    from fedprox_cli.engine import choice as engine_choice

    o = make_oracle(digits, "loop")
    keys = set()
    for probe in (fednmap_probe(10), fednmap_probe(2), engine_choice.LocalSGD()):
        o.probe = probe
        keys.add(engine_choice.cache_key(o, 3))
    assert len(keys) == 3
    assert json.loads(engine_choice.cache_key(o, 3))["round"] == "local sgd"


def test_a_run_with_engine_auto_times_its_own_algorithms_rounds(tmp_path, monkeypatch):
    from fedprox_cli.config.compose import compose
    from fedprox_cli.runs import experiment

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    exp = experiment.build(
        compose(
            [
                "dataset=digits",
                "model=linear",
                "algorithm=fednmap",
                "n=3",
                "K=2",
                "T=1",
                "device=cpu",
                "engine=auto",
                "compile=false",
            ]
        )
    )
    rec = exp.oracle.engine_choice
    assert rec["source"] == "measured" and rec["timed"].startswith("fednmap (h l1")
    assert rec["timed"].endswith("rounds, K=2") and exp.oracle.grad_evals == 0
    assert exp.env.prox_calls == 0 and exp.env.bytes_up == 0  # the run's counters untouched


@pytest.mark.parametrize("engine,chunk", [("loop", None), ("vmap", None), ("vmap", 4)])
@pytest.mark.parametrize("shift", ["rows", "row", "scalar"])
def test_fused_sgd_steps_are_bitwise_the_step_by_step_loop(digits, engine, chunk, shift):
    """Oracle.sgd_steps (client by client / chunk by chunk) computes exactly what K calls of
    grad over all clients with an (n, d) update after each computed: the same numbers, bit
    for bit, so runs recorded before the fusion do not change."""
    oracle = make_oracle(digits, engine, chunk=chunk)
    gen = torch.Generator().manual_seed(1)
    X0 = oracle.model.flat() + 0.1 * torch.randn(
        N_CLIENTS, oracle.model.d, generator=gen, dtype=torch.float64
    )
    S = {
        "rows": torch.randn(N_CLIENTS, oracle.model.d, generator=gen, dtype=torch.float64),
        "row": torch.randn(oracle.model.d, generator=gen, dtype=torch.float64),
        "scalar": 0.0,
    }[shift]
    clients = torch.tensor([0, 2, 3, 5])
    S_m = S[clients] if shift == "rows" else S
    ref = X0[clients].clone()
    for k in range(3):
        ref.sub_(oracle.grad(ref, 4, k, clients)[0].add_(S_m), alpha=0.05)
    got = oracle.sgd_steps(X0[clients].clone(), 4, 3, 0.05, S_m, clients)
    assert torch.equal(got, ref)
    assert oracle.grad_evals == 2 * 3 * len(clients)


def test_auto_chunk_stays_within_chunk_bytes():
    from fedprox_cli.engine import memory

    fp = memory.Footprint(per_client=2**20, per_sample=0)  # 1 MB per client
    assert memory.plan(fp, 1000, 64, "auto", 64, 4.0) == (memory.CHUNK_BYTES // 2**20, 64)
    assert memory.plan(fp, 1000, 64, "auto", 64, 0.01) == (10, 64)  # memory_gb below the cap
    gpu = memory.Footprint(per_client=2**20, per_sample=0, device_type="cuda")
    assert memory.plan(gpu, 1000, 64, "auto", 64, 0.5) == (512, 64)  # GPUs: memory_gb only


def test_a_run_shows_and_records_auto_s_choice_and_both_timings(tmp_path):
    """fedrun engine=auto on digits, real timing: the run's line and summary.json name the
    faster engine with both timings; the next run of the same shapes reads the cache."""
    env = child_env(XDG_CACHE_HOME=str(tmp_path / "cache"), OMP_NUM_THREADS="1")
    runs = []
    for name in ("a", "b"):
        p = fedrun(
            "dataset=digits",
            "model=linear",
            "n=3",
            "K=1",
            "T=1",
            "device=cpu",
            f"hydra.run.dir={tmp_path / name}",
            env=env,
            cwd=tmp_path,
        )
        assert p.returncode == 0, p.stderr
        runs.append(
            (p.stdout, json.loads((tmp_path / name / "summary.json").read_text())["engine"])
        )
    (out, first), (again, second) = runs
    times = first["s_per_client_step"]
    assert first["source"] == "measured" and first["engine"] == min(times, key=times.get)
    assert (
        f"fedrun: engine: {first['engine']} (engine=auto, measured: loop " in out
        and "per client-step" in out
    )
    assert second["source"] == "cache" and second["engine"] == first["engine"]
    assert f"from the cache (measured {first['measured_at']})" in again


def test_the_engine_line_names_the_choice_and_both_timings():
    from fedprox_cli.engine.choice import line

    assert line({"engine": "loop", "source": "forced"}) is None
    assert (
        line(
            {
                "engine": "vmap",
                "source": "measured",
                "s_per_client_step": {"vmap": 0.46e-3, "loop": 0.8e-3},
            }
        )
        == "vmap (engine=auto, measured: loop 0.8 ms, vmap 0.46 ms per client-step)"
    )
    assert line(
        {
            "engine": "loop",
            "source": "measured",
            "s_per_client_step": {"vmap": 1e-3, "loop": 0.5e-3},
            "timed": "fednmap (h l1, uplink identity) rounds, K=4",
        }
    ) == (
        "loop (engine=auto, measured: loop 0.5 ms, vmap 1 ms per client-step of fednmap "
        "(h l1, uplink identity) rounds, K=4)"
    )


@pytest.mark.parametrize("engine,chunk", [("loop", None), ("vmap", None), ("vmap", 4)])
def test_local_steps_are_bitwise_k_whole_grad_calls_with_their_updates(digits, engine, chunk):
    """Oracle.local_steps (client by client / chunk by chunk, gradients at at(rows, k)) computes
    exactly what K calls of grad on all rows with the same update after each compute."""
    oracle = make_oracle(digits, engine, chunk=chunk)
    gen = torch.Generator().manual_seed(2)
    X0 = oracle.model.flat() + 0.1 * torch.randn(
        N_CLIENTS, oracle.model.d, generator=gen, dtype=torch.float64
    )
    S = torch.randn(N_CLIENTS, oracle.model.d, generator=gen, dtype=torch.float64)
    h = regularizers.build("l1", lam=1e-2)
    at = lambda V, k: h.prox(V, 0.1 * (k + 1))  # noqa: E731
    seen = []

    def update(V, G, rows, k):
        seen.append((rows.start, k))
        V.sub_(G.add_(S[rows]).mul_(0.05))

    ref = X0.clone()
    for k in range(3):
        ref.sub_(oracle.grad(at(ref, k), 4, k)[0].add_(S).mul_(0.05))
    got = oracle.local_steps(X0.clone(), 4, 3, at, update, None)
    assert torch.equal(got, ref)
    block = oracle.engine.block
    assert seen == [(a, k) for a in range(0, N_CLIENTS, block) for k in range(3)]
