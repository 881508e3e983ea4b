"""Where a sweep's job writes: its folder is named by its config (a readable ``key=value``
list of the overrides that decide numbers, then a short hash of the resolved config), so a
sweep re-run into its folder with a longer, shorter or reordered list maps every config onto
its own folder. ``${fedrun.job_dir:}`` (:mod:`resolvers`) is ``hydra.sweep.subdir``."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from omegaconf import Container, DictConfig, OmegaConf

from ..common.containers import as_dict, as_list
from ..common.flatten import flatten
from .keys import canonical, is_run_control

LAYOUT = {"seeds"}  # run control that changes what a job's folder holds (seed_<s>/ runs)
NAME_CHARS = 120  # the readable part of a job folder's name, at most


def _kept(key: str) -> bool:
    key = key.lstrip("+~")
    return not key.startswith("hydra.") and (key in LAYOUT or not is_run_control(key))


def identity(root: DictConfig) -> str:
    """A fingerprint of a job's config (:func:`identity_of` its values and choices)."""
    resolved: dict[str, Any] = {}
    for k in root:
        if k != "hydra":
            v = root[k]
            resolved[str(k)] = (
                OmegaConf.to_container(v, resolve=True) if isinstance(v, Container) else v
            )
    return identity_of(resolved, as_dict(root.hydra.runtime.choices))


def identity_of(resolved: dict[str, Any], choices: dict[str, Any]) -> str:
    """A fingerprint of a job's config: every ``resolved`` key but run control's (the layout key
    ``seeds`` kept; values :func:`keys.canonical`), and the config-group ``choices``."""
    kept = {k: v for k, v in sorted(canonical(flatten(resolved)).items()) if _kept(k)}
    chosen = {
        g: c
        for g, c in sorted(choices.items())
        if c is not None and not g.startswith("hydra/") and _kept(g)
    }
    return hashlib.sha256(json.dumps([kept, chosen], default=str).encode()).hexdigest()


def folder_name(overrides: list[str], digest: str) -> str:
    """``key=value,...`` of the ``overrides`` that decide numbers, sorted, safe as a folder name,
    then ``_`` and 8 hex digits of ``digest``."""
    items = sorted(
        (o for o in overrides if _kept(o.split("=", 1)[0])), key=lambda o: o.split("=", 1)[0]
    )
    text = re.sub(r"[^A-Za-z0-9._=,+-]", "_", ",".join(items).replace("/", "-"))[:NAME_CHARS]
    return f"{text}_{digest[:8]}" if text else digest[:8]


def job_dir(*, _root_: DictConfig) -> str:
    """The ``${fedrun.job_dir:}`` resolver: a job's folder name within the sweep folder
    (:func:`name`)."""
    overrides = as_list(_root_.hydra.overrides.task)  # as typed, not resolved
    try:
        digest = identity(_root_)
    except Exception:  # noqa: BLE001 -- the job itself reports what is wrong
        digest = None
    return name(overrides, digest)


def name(overrides: list[str], digest: str | None) -> str:
    """A job's folder name from its overrides as typed and its config's :func:`identity` (None:
    its config cannot be resolved; the job will fail with the reason, and is named by its
    overrides)."""
    if digest is None:
        digest = hashlib.sha256(json.dumps(sorted(overrides)).encode()).hexdigest()
    return folder_name(overrides, digest)
