"""Validation of a composed run config, before any training (one clear error per problem)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from omegaconf import DictConfig, OmegaConf

from . import CONF_DIR
from .errors import require
from .oracle import ENGINES

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
    participation: float
    checkpoint_every: int  # 0 = off
    keep_checkpoint: bool  # keep checkpoint.pt after the last round (to extend T later)
    resume: bool
    train_samples: int | None  # None = train metrics over all training data


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
    p = cfg.participation
    require(isinstance(p, (int, float)) and 0 < p <= 1,
            f"participation must be in (0, 1], got {p!r}")
    require(_is_int(cfg.seed) and cfg.seed >= 0, f"seed must be an integer >= 0, got {cfg.seed!r}")
    ce = cfg.checkpoint_every
    require(_is_int(ce) and ce >= 0, f"checkpoint_every must be an integer >= 0 (0 = off), got {ce!r}")
    for key in ("resume", "keep_checkpoint"):
        require(isinstance(cfg[key], bool), f"{key} must be true or false, got {cfg[key]!r}")
    check_oracle(cfg.oracle)
    ts = cfg.metrics.train_samples
    require(ts is None or (_is_int(ts) and ts > 0),
            f"metrics.train_samples must be a positive integer or null (all), got {ts!r}")
    return RunSettings(T=_positive_int(cfg, "T"), K=_positive_int(cfg, "K"), n=_positive_int(cfg, "n"),
                       B=None if B == "full" else B, seed=cfg.seed, device=resolve_device(cfg.device),
                       dtype=DTYPES[cfg.dtype], eval_every=_positive_int(cfg, "eval_every"),
                       engine=cfg.engine, participation=float(p), checkpoint_every=ce,
                       keep_checkpoint=cfg.keep_checkpoint, resume=cfg.resume,
                       train_samples=ts)


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
    e.g. ``runner.build(compose(["dataset=digits", "K=5"]))``."""
    from hydra import compose as hydra_compose, initialize_config_dir

    from . import resolvers
    resolvers.register()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return hydra_compose("config", overrides=list(overrides))
