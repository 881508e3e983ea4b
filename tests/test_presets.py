"""Every experiment preset composes, with the agreed option names and parameters.

Options another part of the project provides (e.g. dataset=cifar10) are replaced by a stub
``name: <option>`` file in a copy of conf/ when they are not there yet, so the presets' own
structure (defaults lists, sweeps, per-preset algorithm steps, interpolations) is checked in
any case; where the real option exists, the real one is composed."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import MissingConfigException
from omegaconf import OmegaConf

from fedprox_cli.config import resolvers

CONF = Path(__file__).resolve().parent.parent / "conf"
# The agreed names (helper_common.md) and, for algorithms / regularizers / partitions, the keys
# their configs may have besides ``name``.
AGREED = {
    "dataset": {
        k: set()
        for k in (
            "a9a",
            "mnist",
            "fmnist",
            "femnist",
            "cifar10",
            "cinic10",
            "tinyimagenet",
            "digits",
            "breast_cancer",
            "mnist5k",
        )
    },
    "partition": {
        "iid": set(),
        "dirichlet": {"alpha"},
        "dirichlet_writers": {"alpha"},
        "sorted_shards": set(),
    },
    "model": {
        k: None
        for k in (
            "linear",
            "mlp",
            "cnn",
            "cnn4",
            "mnist_cnn",
            "sigmoid_mlp",
            "resnet18",
            "mobilenetv3_small",
        )
    },
    "regularizer": {
        "none": set(),
        "l1": {"lam"},
        "elastic_net": {"l1", "l2"},
        "mcp": {"lam", "theta"},
        "scad": {"lam", "a"},
        "l2_ball": {"radius"},
        "box": {"lo", "hi"},
    },
    "compressor": {"identity": set(), "topk": {"ratio"}, "randk": {"ratio"}, "qsgd": {"levels"}},
    "algorithm": {
        "fedavg": {"alpha", "beta"},
        "fedcanon": {"alpha", "beta"},
        "fedcanon2": {"alpha", "beta"},
        "fedcef": {"alpha", "eta_g", "eta"},
        "fednmap": {"eta_a", "eta_s", "gamma"},
        "scaffold": {"alpha", "beta"},
        "scaffold1": {"alpha", "beta"},
        "scaffnew": {"beta", "p"},
        "fedmid": {"alpha", "beta"},
        "fedda": {"alpha", "beta"},
        "za1": {"eta_a", "eta_s"},
        "za2": {"alpha", "eta_g"},
        "feddr": {"eta", "alpha_dr", "beta"},
        "fedadmm": {"eta", "beta"},
    },
}
PARTITION_COMMON = {"seed", "min_size"}
PRESETS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))


@pytest.fixture(scope="module")
def conf_dir(tmp_path_factory) -> Path:
    """conf/ plus a stub for every agreed option that is not on this branch yet."""
    d = tmp_path_factory.mktemp("conf") / "conf"
    shutil.copytree(CONF, d)
    for g, options in AGREED.items():
        for o in options:
            f = d / g / f"{o}.yaml"
            if not f.exists():
                f.write_text(f"name: {o}\n")
    return d


@pytest.fixture(scope="module")
def composer(conf_dir):
    resolvers.register()
    GlobalHydra.instance().clear()
    cache: dict = {}

    def composed(overrides):
        key = tuple(overrides)
        if key not in cache:  # composing costs ~0.2 s: each config once per session
            cache[key] = compose("config", overrides=list(overrides), return_hydra_config=True)
        return cache[key]

    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        yield composed
    GlobalHydra.instance().clear()


def sweep(cfg) -> dict[str, list[str]]:
    """The preset's hydra.sweeper.params as lists of override strings."""
    params = OmegaConf.to_container(cfg.hydra.sweeper.params) or {}
    parser = OverridesParser.create()
    out = {}
    for k, v in params.items():
        o = parser.parse_overrides([f"{k}={v}"])[0]
        out[k] = (
            list(o.sweep_string_iterator())
            if o.is_sweep_override()
            else [o.get_value_element_as_str()]
        )
    return out


def job(cfg) -> dict:
    c = OmegaConf.to_container(cfg, resolve=False)
    c.pop("hydra")
    return OmegaConf.to_container(OmegaConf.create(c), resolve=True)


def check_job(c: dict) -> None:
    for g in ("dataset", "partition", "model", "regularizer", "compressor", "algorithm"):
        name = c[g]["name"]
        assert name in AGREED[g], f"{g}={name} is not an agreed name"
        allowed = AGREED[g][name]
        if allowed is not None:
            extra = (
                set(c[g]) - {"name"} - allowed - (PARTITION_COMMON if g == "partition" else set())
            )
            assert not extra, f"{g}={name} has keys {extra} beyond {sorted(allowed)}"
    for k, v in c["algorithm"].items():
        if k != "name" and v is not None:
            assert isinstance(v, (int, float)) and v > 0 and math.isfinite(v), f"algorithm.{k}={v}"
    for k in ("T", "K", "n", "B"):
        assert c[k] == "full" or (isinstance(c[k], int) and c[k] > 0)


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_composes(composer, preset):
    cfg = composer([f"experiment={preset}"])
    raw = OmegaConf.to_container(cfg.hydra.sweep, resolve=False)
    # the one sweep-folder pattern of conf/config.yaml: results/sweeps/<preset>/<time>_<pid>
    assert raw["dir"] == (
        "results/sweeps/${fedrun.under:${hydra.runtime.choices.experiment}}"
        "${now:%Y-%m-%d_%H-%M-%S_%f}_${fedrun.pid:}"
    )
    assert {k: v for k, v in sweep(cfg).items() if k != "seed"}, "a preset without a sweep"
    check_job(job(cfg))


def test_every_swept_option_composes(composer):
    """Each config-group option a preset sweeps (algorithm steps files, partitions, datasets,
    models), composed once inside the first preset that sweeps it."""
    seen = set()
    for preset in PRESETS:
        for k, values in sweep(composer([f"experiment={preset}"])).items():
            for v in values:
                if k in AGREED and (k, v) not in seen:
                    seen.add((k, v))
                    check_job(job(composer([f"experiment={preset}", f"{k}={v}"])))
    assert {("algorithm", "fedcanon_fig2/scaffnew"), ("partition", "dir_writers/0.2")} <= seen


@pytest.mark.parametrize("preset", [p for p in PRESETS if p.endswith("_quick")])
def test_quick_variant_keeps_the_sweep_structure(composer, preset):
    full, quick = (
        sweep(composer([f"experiment={p}"])) for p in (preset.removesuffix("_quick"), preset)
    )
    assert set(full) == set(quick)
    assert quick.get("algorithm") == full.get("algorithm")
    # FMNIST has no writer ids: the FEMNIST stand-in splits by label instead
    assert [p.replace("dir_writers/", "dir/") for p in full.get("partition", [])] == quick.get(
        "partition", []
    )


def test_step_rules_follow_the_papers(composer):
    """FedNMap: eta_a = 1/K (its Figs. 2, 4) and FedCanon's alpha = eta_a eta_s K = 1; FedCanon's
    heuristic alpha = beta K (its Figs. 2-3); FedNMap Fig. 5's 1/sqrt(K) rule."""
    for K in (10, 20):
        c = job(composer(["experiment=fednmap_fig2", f"K={K}", "algorithm=fednmap_fig2/za1"]))
        assert c["algorithm"]["eta_a"] * K == pytest.approx(1)
        c = job(composer(["experiment=fednmap_fig2", f"K={K}", "algorithm=fednmap_fig2/fedcanon"]))
        assert (c["algorithm"]["alpha"], c["algorithm"]["beta"] * K) == pytest.approx((1, 1))
        c = job(composer(["experiment=fedcanon_fig3", f"K={K}"]))
        assert c["algorithm"]["alpha"] == pytest.approx(c["algorithm"]["beta"] * K)
        c = job(
            composer(["experiment=fednmap_fig5", f"K={K}", "algorithm=fednmap_fig5/eta_inv_sqrt_K"])
        )
        assert c["algorithm"]["eta_a"] ** 2 * K == pytest.approx(1)
    c = job(composer(["experiment=fedcef_fig1_2", "algorithm=fedcef_fig1_2/fedcef_top1"]))
    assert (c["compressor"]["name"], c["compressor"]["ratio"]) == ("topk", 0.01)
    assert job(composer(["experiment=fednmap_fig3"]))["algorithm"]["eta_a"] == 0.1


def test_fedda_prox_parameter_stays_below_scad_bound(composer):
    """SCAD(lam, a) is 1/(a-1)-weakly convex; FedDA's prox parameter reaches alpha K beta T + K beta."""
    for K in (10, 20, 40, 80):
        c = job(composer(["experiment=fedcanon_table5", f"K={K}", "algorithm=fedcanon_fig3/fedda"]))
        a = c["algorithm"]
        assert a["alpha"] * K * a["beta"] * c["T"] + K * a["beta"] < c["regularizer"]["a"] - 1


def test_presets_override_top_level_keys_and_unknown_presets_fail(composer):
    # experiment comes after _self_ in config.yaml's defaults: the preset's T = 200 wins over 100
    assert (composer([])["T"], composer(["experiment=fedcanon_fig2"])["T"]) == (100, 200)
    assert composer(["experiment=fedcanon_fig2", "T=7"])["T"] == 7  # the command line wins
    with pytest.raises(MissingConfigException, match="experiment/nope"):
        composer(["experiment=nope"])


def test_calc_is_arithmetic_only():
    assert resolvers.calc("0.05*20") == pytest.approx(1.0)
    assert resolvers.calc("16**-0.5") == 0.25
    assert resolvers.calc("-(1+2)/3") == -1
    for bad in ("__import__('os')", "K/2", "1 if 1 else 2", "1/"):
        with pytest.raises(ValueError, match="calc"):
            resolvers.calc(bad)


def test_the_papers_setting_runs_what_its_claims_decide_at(composer):
    """`fedrun-reproduce run CLAIM --paper` runs the claim's preset with each value of its
    sweep and nothing else: at every point of the claim's deciding run sets made
    with that preset, the preset must compose the values the point declares (FedCEF Figs.
    3-4 decide at eta = 0.1, so conf/algorithm/fedcef_fig3_4/fedcef_top*.yaml set it)."""
    from fedprox_cli.claims import sources

    checked = 0
    for claim in sources.load(sources.resolve(None)):
        pr = claim.paper_runs
        if pr is None or not pr.preset:
            continue
        # the command is the preset's own sweep (:func:`fedprox_cli.claims.plan._paper`)
        swept = set(sweep(composer([f"experiment={pr.preset}"])))
        for rs in claim.ran:
            if rs.role != "primary" or rs.preset != pr.preset:
                continue
            for point in rs.points:
                at = [f"{k}={v}" for k, v in point.items() if k in swept]
                c = job(composer([f"experiment={pr.preset}", *at]))
                for k, want in point.items():
                    if k in swept:
                        continue
                    got = OmegaConf.select(OmegaConf.create(c), k)
                    assert got == pytest.approx(want), (
                        f"{claim.id}: --paper runs {pr.preset} {' '.join(at)} at {k}={got}, "
                        f"the claim decides at {k}={want}"
                    )
                    checked += 1
    assert checked >= 8  # FedCEF Figs. 3-4: alpha and eta of both top-k ratios, each figure
