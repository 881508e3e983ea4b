"""Models and their flat-parameter view.

``build(name, input_shape, num_classes, init="default")`` returns an ``nn.Module``. Algorithms
never see modules: :class:`FlatModel` maps a flat parameter vector x (d,) to the module's
parameters (views, no copies), so the oracle can evaluate the model at any row of client
states with ``torch.func.functional_call`` -- also under ``vmap``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import torch
from torch import nn

from ..common.errors import UserError, require
from ..common.plugin_calls import calling, returned
from ..common.registry import Registry, callable_contract

# name -> builder
register, names, lookup = (
    _REGISTRY := Registry[Callable[..., nn.Module]](  # (a plugin's result checked: build)
        "model",
        "models",
        callable_contract(
            "a model builder (input_shape, num_classes, **params) -> torch.nn.Module"
        ),
    )
).calls()[:3]


def build(
    name: str,
    input_shape: tuple[int, ...],
    num_classes: int,
    init: str = "default",
    _target_: str | None = None,
    **params: Any,
) -> nn.Module:
    """Model ``name`` for inputs of ``input_shape`` (without batch dim) and ``num_classes``.
    ``init="zeros"`` sets every parameter to 0 (deterministic convex checks); ``_target_``: a
    plugin's builder by dotted path (:mod:`fedprox_cli.common.registry`)."""
    builder = lookup(name, _target_)
    require(init in ("default", "zeros"), f"model.init must be 'default' or 'zeros', got '{init}'")
    with calling(builder, "model", "its builder", name):
        model = builder(tuple(input_shape), int(num_classes), **params)
    returned(
        builder,
        "model",
        "the builder",
        model,
        isinstance(model, nn.Module),
        "a torch.nn.Module",
        name,
    )
    if init == "zeros":
        with torch.no_grad():
            for p in model.parameters():
                p.zero_()
    return model


@register("linear")
def linear(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """Multinomial logistic regression: flatten, one affine layer."""
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), num_classes))


@register("mlp")
def mlp(input_shape: tuple[int, ...], num_classes: int, hidden: int = 200) -> nn.Module:
    """FedCanon's MLP (Sec. IV-A4): three linear layers with ReLU between them. The paper gives
    no width; we use 200 hidden units (McMahan et al.'s 2NN) and no ReLU on the logits."""
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(math.prod(input_shape), hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, num_classes),
    )


@register("sigmoid_mlp")
def sigmoid_mlp(input_shape: tuple[int, ...], num_classes: int, hidden: int = 200) -> nn.Module:
    """FedNMap's shallow network (Sec. 5.1): one hidden layer with sigmoid activations. The paper
    gives no width; we use 200 hidden units like :func:`mlp`."""
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(math.prod(input_shape), hidden),
        nn.Sigmoid(),
        nn.Linear(hidden, num_classes),
    )


def _image_shape(input_shape: tuple[int, ...], model: str, min_side: int) -> tuple[int, int, int]:
    """(C, H, W) of image inputs, or a :class:`UserError` for tabular data / too small images."""
    if len(input_shape) != 3 or min(input_shape[1:]) < min_side:
        raise UserError(
            f"model {model} needs images (C, H, W) of side >= {min_side}; the dataset "
            f"gives inputs of shape {tuple(input_shape)} (use model=linear or mlp)"
        )
    return input_shape


def conv_net(
    input_shape: tuple[int, ...],
    num_classes: int,
    model: str,
    convs: list[tuple[int, int, bool]],
    hidden: list[int],
) -> nn.Sequential:
    """Conv layers ``(channels, kernel, max-pool after)`` with "same" padding and ReLU, each
    max-pool halving the side, then fully connected layers of widths ``hidden`` (ReLU) and a
    linear head."""
    pools = sum(p for _, _, p in convs)
    c, h, w = _image_shape(input_shape, model, 2**pools)
    layers: list[nn.Module] = []
    for out, k, pool in convs:
        layers += [nn.Conv2d(c, out, k, padding=k // 2), nn.ReLU()] + (
            [nn.MaxPool2d(2)] if pool else []
        )
        c = out
    width = c * (h >> pools) * (w >> pools)
    layers.append(nn.Flatten())
    for hid in hidden:
        layers += [nn.Linear(width, hid), nn.ReLU()]
        width = hid
    return nn.Sequential(*layers, nn.Linear(width, num_classes))


@register("cnn")
def cnn(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """FedCanon's CNN (Sec. IV-A4): two conv layers, each followed by ReLU and 2x2 max-pooling,
    then a linear head. The paper gives no widths; we use 32 and 64 channels of 5x5 kernels
    (McMahan et al.'s CNN without its hidden fc layer)."""
    return conv_net(input_shape, num_classes, "cnn", [(32, 5, True), (64, 5, True)], [])


@register("cnn4")
def cnn4(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """FedCEF's CIFAR-10 CNN (Sec. V-A: four conv + two fc layers, about 4.4M parameters):
    3x3 convs of 32, 64 (max-pool), 128, 128 (max-pool) channels, fc 512, head;
    4,440,778 parameters on 32x32x3 with 10 classes."""
    return conv_net(
        input_shape,
        num_classes,
        "cnn4",
        [(32, 3, False), (64, 3, True), (128, 3, False), (128, 3, True)],
        [512],
    )


@register("mnist_cnn")
def mnist_cnn(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """FedCEF's MNIST CNN (Sec. V-A: two conv layers, about 0.4M parameters): 3x3 convs of 32
    and 64 channels, each with ReLU and max-pool, fc 128, head; 421,642 parameters on 28x28."""
    return conv_net(input_shape, num_classes, "mnist_cnn", [(32, 3, True), (64, 3, True)], [128])


def _group_norm(groups: int) -> Callable[[int], nn.Module]:
    """GroupNorm replacing BatchNorm: no running statistics, so models have no buffers."""
    return lambda channels: nn.GroupNorm(groups, channels)


@register("resnet18")
def resnet18(input_shape: tuple[int, ...], num_classes: int, gn_groups: int = 2) -> nn.Module:
    """ResNet-18 (He et al. 2016; torchvision's) adapted to small images: a 3x3 stride-1 stem
    conv for C input channels, no stem max-pool for sides <= 32 (CIFAR-style; kept for larger,
    e.g. 64x64 Tiny ImageNet), GroupNorm(gn_groups) instead of BatchNorm."""
    from torchvision.models import resnet18 as tv_resnet18

    c, h, w = _image_shape(input_shape, "resnet18", 8)
    m = tv_resnet18(num_classes=num_classes, norm_layer=_group_norm(gn_groups))
    m.conv1 = nn.Conv2d(c, 64, 3, stride=1, padding=1, bias=False)
    if max(h, w) <= 32:
        m.maxpool = nn.Identity()
    return cast(nn.Module, m)  # torchvision's builders are untyped


@register("mobilenetv3_small")
def mobilenetv3_small(
    input_shape: tuple[int, ...], num_classes: int, gn_groups: int = 2
) -> nn.Module:
    """torchvision's MobileNetV3-Small (Howard et al. 2019) with GroupNorm(gn_groups) instead of
    BatchNorm, a stem conv for C input channels and no dropout (the oracle's gradients are
    deterministic given the mini-batch); 1,528,106 parameters for 10 classes."""
    from torchvision.models import mobilenet_v3_small

    c, _, _ = _image_shape(input_shape, "mobilenetv3_small", 8)
    m = mobilenet_v3_small(num_classes=num_classes, norm_layer=_group_norm(gn_groups))
    m.features[0][0] = nn.Conv2d(
        c, m.features[0][0].out_channels, 3, stride=2, padding=1, bias=False
    )
    m.classifier = nn.Sequential(
        *(nn.Identity() if isinstance(l, nn.Dropout) else l for l in m.classifier)
    )
    return cast(nn.Module, m)  # torchvision's builders are untyped


class FlatModel:
    """A module seen as a function of one flat parameter vector (parameters only; buffers
    stay in the module and are shared by all clients)."""

    def __init__(self, module: nn.Module) -> None:
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
        return {
            k: v.view(*lead, *s)
            for k, v, s in zip(self.names, torch.split(x, self.sizes, -1), self.shapes)
        }

    def __call__(self, x: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        """Logits of the model with parameters ``x`` on ``inputs``."""
        return self.apply(self.params(x), inputs)

    def apply(self, params: dict[str, torch.Tensor], inputs: torch.Tensor) -> torch.Tensor:
        """Logits of the model with the parameters ``params`` (name -> tensor) on ``inputs``."""
        logits: torch.Tensor = torch.func.functional_call(self.module, params, (inputs,))
        return logits  # (functional_call is typed Any)
