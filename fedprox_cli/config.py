"""Validation of a composed run config, before any training (one clear error per problem)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from .errors import require
from .oracle import ENGINES

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"

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


def _positive_int(cfg: DictConfig, key: str) -> int:
    v = cfg[key]
    require(isinstance(v, int) and not isinstance(v, bool) and v > 0,
            f"{key} must be a positive integer, got {v!r}")
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
    require(B == "full" or (isinstance(B, int) and not isinstance(B, bool) and B > 0),
            f"B must be a positive integer or 'full', got {B!r}")
    require(cfg.dtype in DTYPES, f"dtype must be one of {', '.join(DTYPES)}, got {cfg.dtype!r}")
    require(cfg.engine in ENGINES, f"engine must be one of {', '.join(ENGINES)}, got {cfg.engine!r}")
    p = cfg.participation
    require(isinstance(p, (int, float)) and 0 < p <= 1,
            f"participation must be in (0, 1], got {p!r}")
    require(isinstance(cfg.seed, int) and cfg.seed >= 0, f"seed must be an integer >= 0, got {cfg.seed!r}")
    return RunSettings(T=_positive_int(cfg, "T"), K=_positive_int(cfg, "K"), n=_positive_int(cfg, "n"),
                       B=None if B == "full" else B, seed=cfg.seed, device=resolve_device(cfg.device),
                       dtype=DTYPES[cfg.dtype], eval_every=_positive_int(cfg, "eval_every"),
                       engine=cfg.engine, participation=float(p))


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
