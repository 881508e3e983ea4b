"""Calls into an algorithm that check what it returns (registers nothing): the run calls
``init``, ``round``, ``output``, ``prox_steps`` and ``stationarity_step`` through these, so
that a plugin's exception or a result of the wrong kind is one line naming the plugin and the
contract (:class:`fedprox_cli.common.plugins.PluginError`, exit code 2), never an internal
error. The checks cost a few dict and isinstance tests per round."""

from __future__ import annotations

import math

import torch

from ..common.plugins import calling, returned
from .base import Algorithm, Env, State


def _is_state(value: object) -> bool:
    """A dict of str -> tensor or plain number (FedDA keeps its elapsed step as a float)."""
    return isinstance(value, dict) and all(
        isinstance(k, str) and (torch.is_tensor(v) or isinstance(v, (int, float)) and not isinstance(v, bool))
        for k, v in value.items())


def init(alg: Algorithm, z0: torch.Tensor, n: int) -> State:
    with calling(alg, "algorithm", "init(z0, n)"):
        state = alg.init(z0, n)
    return returned(alg, "algorithm", "init(z0, n)", state, _is_state(state) and bool(state),
                    "the state: a non-empty dict of str -> tensor (or number)")


def round(alg: Algorithm, state: State, env: Env, t: int) -> State:
    """The next state, with the keys of ``state`` (a checkpoint saves and restores them all)."""
    with calling(alg, "algorithm", f"round(state, env, t={t})"):
        new = alg.round(state, env, t)
    return returned(alg, "algorithm", "round(state, env, t)", new, _is_state(new) and new.keys() == state.keys(),
                    f"the next state: a dict of str -> tensor (or number) with the keys of init's ({', '.join(state)})")


def output(alg: Algorithm, state: State, d: int) -> torch.Tensor:
    with calling(alg, "algorithm", "output(state)"):
        x = alg.output(state)
    return returned(alg, "algorithm", "output(state)", x, torch.is_tensor(x) and tuple(x.shape) == (d,),
                    f"the model x evaluated: a tensor of shape ({d},)")


def _step(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def prox_steps(alg: Algorithm, K: int, T: int) -> dict[str, float]:
    with calling(alg, "algorithm", "prox_steps(K, T)"):
        steps = alg.prox_steps(K, T)
    return returned(alg, "algorithm", "prox_steps(K, T)", steps,
                    isinstance(steps, dict) and all(isinstance(k, str) and _step(v) for k, v in steps.items()),
                    "a dict of str -> number > 0 (each prox parameter by name)")


def stationarity_step(alg: Algorithm, K: int) -> float:
    with calling(alg, "algorithm", "stationarity_step(K)"):
        step = alg.stationarity_step(K)
    return returned(alg, "algorithm", "stationarity_step(K)", step, _step(step), "a number > 0 (the step s of G_s)")
