"""A figure's caption as a sentence in the papers' notation: the methods with their own
parameters, then the setting every curve shares, then what a line and a band are::

    FedAvg (α = 1, β = 0.02) and FedProx (β = 0.02, μ = 0.01) on digits, MLP (200 hidden
    units), n = 10 clients, Dirichlet label skew (concentration 0.5, at least 10 samples a
    client), K = 10 local steps, B = 64, T = 30 rounds, no regularizer (h = 0). Lines: mean of 3
    seeds; bands: ± 1 std.

Only settings all curves share are in it (what differs is in the legend); each part is left out
when the runs do not share it. A method's parameters read as the papers' symbols
(:func:`plotting.symbol`), next to their method; the setting's options and parameters in words
(:data:`NAMES`, :data:`WORDS`), so that a symbol means one thing in a caption.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from ..common.flatten import flatten
from .groups import fmt
from .legend import ALGORITHM, NAME, meaning
from .plotting import symbol
from .stats import seeds

COUNTS = (("n", "clients"), ("K", "local steps"), ("B", ""), ("T", "rounds"))


def listing(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


# Options and parameters of the setting's groups in a paper's words, not their config names: the
# partition's Dirichlet concentration is not the methods' alpha, min_size is no word of prose.
NAMES = {
    "partition.dirichlet": "Dirichlet label skew",
    "partition.dirichlet_writers": "writer-level Dirichlet skew",
    "partition.iid": "IID split",
    "partition.sorted_shards": "label-sorted shards",
    "model.mlp": "MLP",
    "model.sigmoid_mlp": "sigmoid MLP",
    "model.linear": "linear model",
    "model.cnn": "CNN",
    "model.cnn4": "4-layer CNN",
    "model.mnist_cnn": "MNIST CNN",
    "model.resnet18": "ResNet-18",
    "model.mobilenetv3_small": "MobileNetV3-Small",
}
WORDS = {
    "partition.alpha": "concentration {}",
    "partition.min_size": "at least {} samples a client",
    "model.hidden": "{} hidden units",
    "model.gn_groups": "{} GroupNorm groups",
}


def _option(
    flat: dict[str, Any], group: str, skip: Collection[str] = ("name", "seed")
) -> str | None:
    """``NAME (p = v, ...)`` of a shared config group (``init = default`` left out), or None:
    the option and its parameters in words (:data:`NAMES`, :data:`WORDS`) where they have
    them, else as symbols (:func:`plotting.symbol`)."""
    if f"{group}.name" not in flat:
        return None
    params = [
        WORDS[k].format(fmt(v)) if k in WORDS else f"{symbol(k.split('.', 1)[1])} = {fmt(v)}"
        for k, v in flat.items()
        if k.startswith(f"{group}.")
        and k.split(".", 1)[1] not in skip
        and not (k == f"{group}.init" and v == "default")
    ]
    name = flat[f"{group}.name"]
    return NAMES.get(f"{group}.{name}", f"{name}") + (f" ({', '.join(params)})" if params else "")


def common_keys(shared: dict[str, Any], configs: list[dict[str, Any]]) -> set[str]:
    """The keys all runs share that mean one thing in all of them: a method parameter of the
    same name but declared by different classes (:func:`legend.meaning`) is each method's own."""
    out: set[str] = set()
    for k in shared:
        if k.startswith(ALGORITHM) and k != NAME:
            if len({meaning(c.get(NAME), k) for c in configs}) > 1:
                continue
        out.add(k)
    return out


def setting(shared: dict[str, Any]) -> list[str]:
    """The shared setting in words: dataset, model, clients and partition, K, B, T, the
    regularizer and (unless identity) the compressor."""
    flat = flatten(shared) if any(isinstance(v, dict) for v in shared.values()) else shared
    parts = []
    if "dataset.name" in flat:
        parts.append(f"on {flat['dataset.name']}")
    model = _option(flat, "model")
    if model:
        parts.append(model if f"model.{flat['model.name']}" in NAMES else f"model {model}")
    for key, unit in COUNTS:
        if key in flat:
            parts.append(f"{key} = {fmt(flat[key])}" + (f" {unit}" if unit else ""))
        partition = _option(flat, "partition") if key == "n" else None
        if partition:
            known = f"partition.{flat['partition.name']}" in NAMES
            parts.append(partition if known else f"partition {partition}")
    if "participation" in flat and flat["participation"] != 1:
        parts.append(f"{fmt(flat['participation'])} of the clients a round")
    reg = _option(flat, "regularizer")
    if reg:
        parts.append("no regularizer (h = 0)" if reg == "none" else f"regularizer {reg}")
    comp = _option(flat, "compressor")
    if comp and comp != "identity":
        parts.append(f"compressor {comp}")
    return parts


def what_lines_are(given: Iterable[int], banded: bool, clipped: bool, points: bool = False) -> str:
    """``Lines: mean of 3 seeds; bands: ± 1 std``, ``Lines: one seed each`` (``points``: a
    slope figure's words)."""
    counts = set(given)
    noun = "Points" if points else "Lines"
    text = (
        f"{noun}: one seed each"
        if counts == {1}
        else f"{noun}: mean of {seeds(min(counts))}"
        if len(counts) == 1
        else f"{noun}: mean over each curve's seeds"
    )
    if banded:
        text += "; bands: ± 1 std over the seeds" + (
            " (clipped at the axis's bottom)" if clipped else ""
        )
    return text + "."


def sentence(
    methods: list[str], shared: dict[str, Any], common: set[str], leave: Collection[str] = ()
) -> str:
    """The methods clause and the shared setting as one sentence (module docstring); the
    method parameters all runs share with one meaning are said once, for all methods."""
    kept = {k: v for k, v in shared.items() if k in common and k not in leave}
    params = [
        f"{symbol(k.removeprefix(ALGORITHM))} = {fmt(v)}"
        for k, v in sorted(kept.items())
        if k.startswith(ALGORITHM) and k != NAME
    ]
    head = listing(methods) if methods else ""
    if params:
        shared_params = ", ".join(params)
        if len(methods) == 1 and "(" not in head:  # one method: its parameters
            head = f"{head} ({shared_params})"
        else:
            head = f"{head}, all with {shared_params}" if head else shared_params
    parts = [
        p
        for p in [head, *setting({k: v for k, v in kept.items() if not k.startswith(ALGORITHM)})]
        if p
    ]
    if not parts:
        return ""
    text = ", ".join(parts).replace(", on ", " on ", 1)
    return (text[0].upper() if text[0].isascii() else text[0]) + text[1:] + "."  # not α -> Α
