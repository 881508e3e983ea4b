"""Calls into an algorithm that check what it returns (registers nothing): the run and
``fedrun-check-algorithm`` call ``init``, ``round``, ``output``, ``prox_steps`` and
``stationarity_step`` through these, so that a plugin's exception (BaseException included) or a
result of the wrong kind is one line naming the plugin, its own line and the contract
(:class:`fedprox_cli.common.plugin_calls.PluginError`, exit code 2), never an internal error.

The state's layout is part of the contract: every tensor ``init`` makes is of z0's dtype and on
z0's device, and every round returns each entry with the shape, dtype and device ``init`` gave it
(a checkpoint, seeds=R and the engines rely on it). The checks cost a few dict and attribute
tests per round."""

from __future__ import annotations

import math
from typing import Any

import torch

from ..common.plugin_calls import PluginError, calling, handed_back, origin, returned
from .base import Algorithm, Env, State


def _is_state(value: object) -> bool:
    """A dict of str -> tensor or plain number (FedDA keeps its elapsed step as a float)."""
    return isinstance(value, dict) and all(
        isinstance(k, str)
        and (torch.is_tensor(v) or isinstance(v, (int, float)) and not isinstance(v, bool))
        for k, v in value.items()
    )


def _layout(v: object) -> str:
    """How an entry is described in a contract line: ``tensor (4, 650) float32 on cpu``."""
    if isinstance(v, torch.Tensor):
        return f"tensor {tuple(v.shape)} {str(v.dtype).removeprefix('torch.')} on {v.device}"
    return f"number ({type(v).__name__})"


def _broken(alg: Algorithm[Any], method: str, what: str, fix: str) -> PluginError:
    return PluginError(
        f"algorithm plugin {alg.name!r} ({origin(alg)}) breaks the state contract: {what}; {fix} "
        f"({handed_back(alg, method)})"
    )


def init(alg: Algorithm[Any], z0: torch.Tensor, n: int) -> State:
    with calling(alg, "algorithm", "init(z0, n)"):
        state: State = alg.init(z0, n)
    returned(
        alg,
        "algorithm",
        "init(z0, n)",
        state,
        _is_state(state) and bool(state),
        "the state: a non-empty dict of str -> tensor (or number)",
    )
    for k, v in state.items():
        if isinstance(v, torch.Tensor) and (v.dtype != z0.dtype or v.device != z0.device):
            raise _broken(
                alg,
                "init",
                f"state[{k!r}] is a {_layout(v)}, z0 a {_layout(z0)}",
                "make every state tensor of z0's dtype and on its device (z0.new_zeros(...), "
                "torch.zeros_like(z0), z0.clone()); keep a count as a plain number",
            )
    return state


def round_call(t: int) -> str:
    """Round ``t + 1`` named as a message names it: rounds count from 1 everywhere (metrics.csv's
    ``round`` is the rounds done), and the algorithm's call for it is ``round(state, env, t)``
    with ``t`` from 0 (docs/algorithms.md), so a line about that call gives both."""
    return f"round {t + 1} (round(state, env, t={t}))"


def round(alg: Algorithm[Any], state: State, env: Env, t: int) -> State:
    """The next state, with the keys of ``state`` (a checkpoint saves and restores them all),
    each entry of the shape, dtype and device it had (init's, by induction)."""
    with calling(alg, "algorithm", round_call(t)):
        new: State = alg.round(state, env, t)
    returned(
        alg,
        "algorithm",
        "round(state, env, t)",
        new,
        _is_state(new) and new.keys() == state.keys(),
        "the next state: a dict of str -> tensor (or number) with the keys of init's "
        f"({', '.join(state)})",
    )
    for k, v in new.items():
        old = state[k]
        same = (isinstance(v, torch.Tensor) == isinstance(old, torch.Tensor)) and (
            not isinstance(v, torch.Tensor)
            or not isinstance(old, torch.Tensor)
            or (v.shape == old.shape and v.dtype == old.dtype and v.device == old.device)
        )
        if not same:
            per_client = (
                isinstance(v, torch.Tensor)
                and isinstance(old, torch.Tensor)
                and v.dim() == old.dim() >= 1
                and old.shape[0] == env.n
                and v.shape[0] == len(env.clients) != env.n
            )
            fix = (
                "it keeps a row per client: update the participating clients' rows in place "
                "(state[k][env.clients] = ...) and return the whole tensor"
                if per_client
                else "return every entry as init made it (same shape, dtype and device; update in "
                "place or "
                "build it with z0's dtype and device)"
            )
            raise _broken(
                alg,
                "round",
                f"{round_call(t)} returned state[{k!r}] as a {_layout(v)}, "
                f"init made a {_layout(old)}",
                fix,
            )
    return new


def output(alg: Algorithm[Any], state: State, d: int) -> torch.Tensor:
    with calling(alg, "algorithm", "output(state)"):
        x = alg.output(state)
    return returned(
        alg,
        "algorithm",
        "output(state)",
        x,
        torch.is_tensor(x) and tuple(x.shape) == (d,),
        f"the model x evaluated: a tensor of shape ({d},)",
    )


def _step(value: object) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def prox_steps(alg: Algorithm[Any], K: int, T: int) -> dict[str, float]:
    with calling(alg, "algorithm", "prox_steps(K, T)"):
        steps = alg.prox_steps(K, T)
    return returned(
        alg,
        "algorithm",
        "prox_steps(K, T)",
        steps,
        isinstance(steps, dict) and all(isinstance(k, str) and _step(v) for k, v in steps.items()),
        "a dict of str -> number > 0 (each prox parameter by name)",
    )


def stationarity_step(alg: Algorithm[Any], K: int) -> float:
    with calling(alg, "algorithm", "stationarity_step(K)"):
        step = alg.stationarity_step(K)
    return returned(
        alg,
        "algorithm",
        "stationarity_step(K)",
        step,
        _step(step),
        "a number > 0 (the step s of G_s)",
    )
