"""The vmap engine's batched gradient, ``vmap(grad_and_value(loss))``, without importing
``torch._dynamo`` on a CPU start-up.

``torch.func``'s gradient transform runs its backward inside
``torch._dynamo.compiled_autograd._disable()`` (torch/_functorch/eager_transforms.py,
``_autograd_grad``), so the first call of an eager vmap engine imports the whole of
``torch._dynamo``, seconds of start-up in a process that does nothing else with it
(docs/performance.md, "Start-up"). That context only matters where compiled autograd
can be on, which needs ``torch._dynamo`` imported. :func:`batched_grad` therefore runs the
transform with :func:`autograd_grad`, which computes the same ``torch.autograd.grad`` call
directly while ``torch._dynamo`` is not loaded and defers to torch's own function once it is
(``compile=true``, or anything else in the process that imported it). The numbers are the same
either way: the one ``torch.autograd.grad`` call is identical.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Concatenate, TypeVar

import torch
from torch._functorch import eager_transforms
from torch.func import grad_and_value, vmap

DYNAMO = "torch._dynamo"
_TORCH_AUTOGRAD_GRAD = eager_transforms._autograd_grad


def autograd_grad(
    outputs: Sequence[torch.Tensor],
    inputs: Sequence[torch.Tensor],
    grad_outputs: Sequence[torch.Tensor] | None = None,
    retain_graph: bool = False,
    create_graph: bool = True,
) -> tuple[torch.Tensor, ...]:
    """``torch.func``'s ``_autograd_grad``: the gradients of the ``outputs`` that require grad
    with respect to ``inputs`` (zeros for an input they do not depend on)."""
    if DYNAMO in sys.modules:
        return _TORCH_AUTOGRAD_GRAD(outputs, inputs, grad_outputs, retain_graph, create_graph)
    pairs = [
        (o, g)
        for o, g in zip(
            outputs, grad_outputs if grad_outputs is not None else [None] * len(outputs)
        )
        if o.requires_grad
    ]
    if not pairs:
        return tuple(torch.zeros_like(x) for x in inputs)
    grads = torch.autograd.grad(
        [o for o, _ in pairs],
        inputs,
        None if grad_outputs is None else [g for _, g in pairs],
        retain_graph=retain_graph,
        create_graph=create_graph,
        allow_unused=True,
    )
    return tuple(torch.zeros_like(x) if g is None else g for g, x in zip(grads, inputs))


P = TypeVar("P", torch.Tensor, dict[str, torch.Tensor])  # a flat row, or parameter views


def batched_grad(
    loss: Callable[Concatenate[P, ...], torch.Tensor],
) -> Callable[Concatenate[P, ...], tuple[P, torch.Tensor]]:
    """``vmap(grad_and_value(loss))``: the gradients (m, d) and values (m,) of ``loss`` at m
    rows at once, with :func:`autograd_grad` in the transform."""
    eager_transforms._autograd_grad = autograd_grad
    return vmap(grad_and_value(loss))
