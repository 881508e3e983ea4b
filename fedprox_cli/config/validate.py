"""Validation of a composed run config, before any training (one clear error per problem).

Three checks, each in one place:

- :func:`check_keys`: no key beyond those of ``conf/config.yaml`` and the chosen group options
  (a ``+key=value`` typo is refused like an unknown key without ``+``), and none deleted;
- :func:`check_values`: every number in every group finite, of its default's type, and in the
  range :data:`RANGES` gives (the algorithm, regularizer and compressor objects check their own
  parameters when built);
- :func:`settings`: the top-level keys, typed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from .. import CONF_DIR
from ..engine.device import MATMUL_PRECISIONS
from ..common.errors import UserError, require
from ..common.flatten import flatten
from ..engine.metrics import COLUMNS
from ..engine.oracle import ENGINES

DTYPES = {"float32": torch.float32, "float64": torch.float64}


@dataclass(frozen=True)
class RunSettings:
    T: int
    K: int
    n: int
    B: int | None          # None = full local gradients
    seed: int
    device: torch.device
    dtype: torch.dtype
    eval_every: int
    engine: str
    compile: bool | str    # True | False | "auto" (compile_choice.py)
    participation: float
    checkpoint_every: int  # 0 = off
    keep_checkpoint: bool  # keep checkpoint.pt after the last round (to extend T later)
    resume: bool
    train_samples: int | None  # None = train metrics over all training data
    per_client: bool       # clients.csv: each client's metrics at every evaluation (clients.py)
    matmul_precision: str  # float32 products: highest (exact) | high (TF32) | medium (bf16); see device.py
    progress_every_s: float = 30.0  # least seconds between progress lines (no terminal)
    dry_run: bool = False   # validate and list, write nothing (cli.main intercepts it)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _positive_int(cfg: DictConfig, key: str) -> int:
    v = cfg[key]
    require(_is_int(v) and v > 0, f"{key} must be a positive integer, got {v!r}")
    return v


def resolve_device(name: str) -> torch.device:
    require(name in ("auto", "cpu", "cuda") or str(name).startswith("cuda:"),
            f"device must be auto, cpu or cuda, got {name!r}")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    require(name == "cpu" or torch.cuda.is_available(),
            f"device={name} requested but CUDA is not available here (use device=cpu or auto)")
    return torch.device(name)


def settings(cfg: DictConfig) -> RunSettings:
    """Check the top-level keys and return them typed."""
    B = cfg.B
    require(B == "full" or (_is_int(B) and B > 0),
            f"B must be a positive integer or 'full', got {B!r}")
    require(cfg.dtype in DTYPES, f"dtype must be one of {', '.join(DTYPES)}, got {cfg.dtype!r}")
    require(cfg.engine in ENGINES, f"engine must be one of {', '.join(ENGINES)}, got {cfg.engine!r}")
    require(cfg.compile is True or cfg.compile is False or cfg.compile == "auto",
            f"compile must be true, false or auto, got {cfg.compile!r}")
    require(not (cfg.compile is True and cfg.engine == "loop"),
            "compile=true compiles the vmap engine; use engine=vmap or auto, or compile=false")
    p = cfg.participation
    require(isinstance(p, (int, float)) and 0 < p <= 1,
            f"participation must be in (0, 1], got {p!r}")
    require(_is_int(cfg.seed) and cfg.seed >= 0, f"seed must be an integer >= 0, got {cfg.seed!r}")
    ce = cfg.checkpoint_every
    require(_is_int(ce) and ce >= 0, f"checkpoint_every must be an integer >= 0 (0 = off), got {ce!r}")
    for key in ("resume", "keep_checkpoint", "dry_run", "metrics.per_client"):
        v = OmegaConf.select(cfg, key)
        require(isinstance(v, bool), f"{key} must be true or false, got {v!r}")
    mp = cfg.matmul_precision
    require(mp in MATMUL_PRECISIONS,
            f"matmul_precision must be one of {', '.join(MATMUL_PRECISIONS)}, got {mp!r}")
    check_oracle(cfg.oracle)
    ts = cfg.metrics.train_samples
    require(ts is None or (_is_int(ts) and ts > 0),
            f"metrics.train_samples must be a positive integer or null (all), got {ts!r}")
    return RunSettings(T=_positive_int(cfg, "T"), K=_positive_int(cfg, "K"), n=_positive_int(cfg, "n"),
                       B=None if B == "full" else B, seed=cfg.seed, device=resolve_device(cfg.device),
                       dtype=DTYPES[cfg.dtype], eval_every=_positive_int(cfg, "eval_every"),
                       engine=cfg.engine, compile=cfg.compile, participation=float(p), checkpoint_every=ce,
                       keep_checkpoint=cfg.keep_checkpoint, resume=cfg.resume,
                       train_samples=ts, per_client=cfg.metrics.per_client, matmul_precision=mp,
                       progress_every_s=float(cfg.progress_every_s), dry_run=cfg.dry_run)


def check_oracle(o: DictConfig) -> None:
    """``oracle.chunk``: null, auto or a positive integer; ``oracle.eval_batch``: auto or a
    positive integer; ``oracle.memory_gb``: a positive number (see :mod:`memory`)."""
    require(o.chunk is None or o.chunk == "auto" or (_is_int(o.chunk) and o.chunk > 0),
            f"oracle.chunk must be a positive integer, auto or null, got {o.chunk!r}")
    require(o.eval_batch == "auto" or (_is_int(o.eval_batch) and o.eval_batch > 0),
            f"oracle.eval_batch must be a positive integer or auto, got {o.eval_batch!r}")
    m = o.memory_gb
    require(isinstance(m, (int, float)) and not isinstance(m, bool) and m > 0,
            f"oracle.memory_gb must be a positive number, got {m!r}")


def params(group: DictConfig, drop: tuple[str, ...] = ("name",)) -> dict:
    """A config group's entries as keyword arguments (without its ``name``)."""
    d = OmegaConf.to_container(group, resolve=True)
    return {k: v for k, v in d.items() if k not in drop}


def compose(overrides: list[str] | tuple[str, ...] = ()) -> DictConfig:
    """The run config ``fedrun`` would compose from these overrides (for notebooks and tests),
    e.g. ``lifecycle.build(compose(["dataset=digits", "K=5"]))``."""
    from hydra import compose as hydra_compose, initialize_config_dir

    from . import resolvers
    resolvers.register()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return hydra_compose("config", overrides=list(overrides))


GROUPS = ("dataset", "partition", "model", "regularizer", "compressor", "algorithm")


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _positive(v) -> bool:
    return _is_number(v) and v > 0


def _positive_int_value(v) -> bool:
    return _is_int(v) and v > 0


def _nonnegative_int(v) -> bool:
    return _is_int(v) and v >= 0


# Ranges of the keys that no built object checks (the algorithm, regularizer and compressor
# classes check their own parameters): key -> (test, what the value must be).
RANGES = {
    "model.hidden": (_positive_int_value, "a positive integer"),
    "model.gn_groups": (_positive_int_value, "a positive integer"),
    "model.init": (lambda v: v in ("default", "zeros"), "default or zeros"),
    "partition.alpha": (_positive, "a number > 0"),
    "partition.min_size": (_positive_int_value, "a positive integer"),
    "partition.seed": (_nonnegative_int, "an integer >= 0"),
    "metrics.stationarity_step": (lambda v: v is None or _positive(v), "a number > 0 or null "
                                  "(the algorithm's natural step)"),
    "metrics.train_samples": (lambda v: v is None or _positive_int_value(v),
                              "a positive integer or null (all)"),
    "progress_every_s": (lambda v: _is_number(v) and v >= 0, "a number of seconds >= 0"),
    "seeds": (_positive_int_value, "a positive integer (runs seed, seed+1, ... in one process)"),
    "data.root": (lambda v: v is None or (isinstance(v, str) and v.strip() != ""),
                  "a folder or null ($FEDPROX_DATA or ~/.cache/fedprox_cli/data)"),
    "sweep_metric": (lambda v: v in COLUMNS, f"a metrics.csv column ({', '.join(COLUMNS)})"),
}


INT_BOUND = 2 ** 63  # every integer of a config is an int64 (seeds, sizes, counts)


def resolved(cfg: DictConfig) -> dict:
    """The whole config with every interpolation resolved; one that fails (``${calc:1/0}``,
    an unset ``${oc.env:...}``, a missing key) is a :class:`UserError` naming its key."""
    try:
        return OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException as e:
        why = str(e).splitlines()[0].split("raised while resolving interpolation: ")[-1]
        raise UserError(f"cannot resolve {e.full_key or 'the config'}: {why}") from None


def check_values(cfg: DictConfig, reference: DictConfig | None = None) -> None:
    """Refuse NaN or infinite numbers anywhere, integers beyond int64, a value whose type
    differs from the default's in ``reference`` (the same group choices composed without
    overrides: a number where a number stands, a boolean where a boolean stands), and values
    outside :data:`RANGES`."""
    values = flatten(resolved(cfg))
    defaults = flatten(OmegaConf.to_container(reference, resolve=True)) if reference is not None else {}
    for key, v in sorted(values.items(), key=lambda kv: "." in kv[0]):  # top-level keys first
        require(not (isinstance(v, float) and not math.isfinite(v)),
                f"{key} must be a finite number, got {v!r}")
        if _is_int(v) and abs(v) >= INT_BOUND:
            raise UserError(f"{key} must lie within +-2**63 (an int64), got a number of "
                            f"{len(str(abs(v)))} digits")
        d = defaults.get(key)
        if isinstance(d, bool) and key not in _UNION_KEYS:
            require(isinstance(v, bool), f"{key} must be true or false, got {v!r}")
        elif _is_number(d) and key not in _UNION_KEYS:
            kind = "an integer" if _is_int(d) else "a number"
            require(_is_number(v) and (not _is_int(d) or _is_int(v)), f"{key} must be {kind}, got {v!r}")
    for key, (ok, what) in RANGES.items():
        if key in values:
            require(ok(values[key]), f"{key} must be {what}, got {values[key]!r}")
    require(not (cfg.keep_checkpoint is True and cfg.checkpoint_every == 0),
            "keep_checkpoint=true keeps nothing with checkpoint_every=0 (checkpoints off); "
            "set checkpoint_every > 0")


_UNION_KEYS = {"B", "oracle.chunk", "oracle.eval_batch", "compile"}  # a number or boolean, or a word (full, auto, null)


def check_keys(cfg: DictConfig, reference: DictConfig) -> None:
    """Refuse keys ``cfg`` has beyond ``reference`` (the same group choices composed without
    overrides: what ``+key=value`` or ``++key=value`` added) and keys it lacks (``~key``)."""
    have = flatten(OmegaConf.to_container(cfg, resolve=False))
    want = flatten(OmegaConf.to_container(reference, resolve=False))
    for key in sorted(set(have) - set(want)):
        group = key.split(".")[0]
        if group in GROUPS and "." in key:
            takes = sorted(k.split(".", 1)[1] for k in want if k.startswith(group + ".") and k != f"{group}.name")
            raise UserError(f"{group} {cfg[group].get('name')} has no parameter "
                            f"{key.split('.', 1)[1]} (it takes: {', '.join(takes) or 'nothing'})")
        raise UserError(f"unknown key {key!r}: fedrun has no such setting (see fedrun --help)")
    gone = sorted({k.split(".")[0] if k.split(".")[0] in GROUPS else k for k in set(want) - set(have)})
    if gone:
        raise UserError(f"{', '.join(gone)} cannot be deleted (~): fedrun needs "
                        f"{'it' if len(gone) == 1 else 'them'}; override the value instead")
