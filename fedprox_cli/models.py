"""Models and their flat-parameter view.

``build(name, input_shape, num_classes, init="default")`` returns an ``nn.Module``. Algorithms
never see modules: :class:`FlatModel` maps a flat parameter vector x (d,) to the module's
parameters (views, no copies), so the oracle can evaluate the model at any row of client
states with ``torch.func.functional_call`` -- also under ``vmap``.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from .errors import require

_BUILDERS: dict[str, Callable[..., nn.Module]] = {}


def register(name: str):
    def deco(fn):
        _BUILDERS[name] = fn
        return fn
    return deco


def names() -> list[str]:
    return sorted(_BUILDERS)


def build(name: str, input_shape: tuple[int, ...], num_classes: int, init: str = "default",
          **params) -> nn.Module:
    """Model ``name`` for inputs of ``input_shape`` (without batch dim) and ``num_classes``.
    ``init="zeros"`` sets every parameter to 0 (deterministic convex checks)."""
    require(name in _BUILDERS, f"unknown model '{name}' (choose from: {', '.join(names())})")
    require(init in ("default", "zeros"), f"model.init must be 'default' or 'zeros', got '{init}'")
    model = _BUILDERS[name](tuple(input_shape), int(num_classes), **params)
    if init == "zeros":
        with torch.no_grad():
            for p in model.parameters():
                p.zero_()
    return model


@register("linear")
def linear(input_shape, num_classes):
    """Multinomial logistic regression: flatten, one affine layer."""
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), num_classes))


@register("mlp")
def mlp(input_shape, num_classes, hidden: int = 200):
    """FedCanon's MLP (Sec. IV-A4): three linear layers with ReLU between them. The paper gives
    no width; we use 200 hidden units (McMahan et al.'s 2NN) and no ReLU on the logits."""
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), hidden), nn.ReLU(),
                         nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))


class FlatModel:
    """A module seen as a function of one flat parameter vector (parameters only; buffers
    stay in the module and are shared by all clients)."""

    def __init__(self, module: nn.Module):
        self.module = module
        self.names = [k for k, _ in module.named_parameters()]
        self.shapes = [p.shape for _, p in module.named_parameters()]
        self.sizes = [p.numel() for _, p in module.named_parameters()]
        self.d = sum(self.sizes)

    def flat(self) -> torch.Tensor:
        """The module's current parameters as one vector (a copy)."""
        return torch.cat([p.detach().reshape(-1) for p in self.module.parameters()])

    def params(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Views of ``x`` (..., d) shaped like the module's parameters (with x's leading dims)."""
        lead = x.shape[:-1]
        return {k: v.view(*lead, *s) for k, v, s in zip(self.names, torch.split(x, self.sizes, -1),
                                                        self.shapes)}

    def __call__(self, x: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        """Logits of the model with parameters ``x`` on ``inputs``."""
        return torch.func.functional_call(self.module, self.params(x), (inputs,))
