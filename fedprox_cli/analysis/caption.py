"""A figure's caption as a sentence in the papers' notation: the methods with their own
parameters, then the setting every curve shares, then what a line and a band are::

    FedAvg (α = 1, β = 0.02) and FedProx (β = 0.02, μ = 0.01) on digits, model mlp (hidden =
    200), n = 10 clients, partition dirichlet (α = 0.5, min_size = 10), K = 10 local steps, B =
    64, T = 30 rounds, no regularizer (h = 0). Lines: mean of 3 seeds; bands: ± 1 std.

Only settings all curves share are in it (what differs is in the legend); each part is left out
when the runs do not share it. Parameters read as the papers' symbols (:func:`plotting.symbol`).
"""

from __future__ import annotations

from ..common.flatten import flatten
from .groups import fmt
from .legend import ALGORITHM, NAME, meaning
from .plotting import symbol
from .stats import seeds

COUNTS = (("n", "clients"), ("K", "local steps"), ("B", ""), ("T", "rounds"))


def listing(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _option(flat: dict, group: str, skip=("name", "seed")) -> str | None:
    """``NAME (p = v, ...)`` of a shared config group (``init = default`` left out), or None."""
    if f"{group}.name" not in flat:
        return None
    params = [
        f"{symbol(k.split('.', 1)[1])} = {fmt(v)}"
        for k, v in flat.items()
        if k.startswith(f"{group}.")
        and k.split(".", 1)[1] not in skip
        and not (k == f"{group}.init" and v == "default")
    ]
    return f"{flat[f'{group}.name']}" + (f" ({', '.join(params)})" if params else "")


def common_keys(shared: dict, configs: list[dict]) -> set:
    """The keys all runs share that mean one thing in all of them: a method parameter of the
    same name but declared by different classes (:func:`legend.meaning`) is each method's own."""
    out = set()
    for k in shared:
        if k.startswith(ALGORITHM) and k != NAME:
            if len({meaning(c.get(NAME), k) for c in configs}) > 1:
                continue
        out.add(k)
    return out


def setting(shared: dict) -> list[str]:
    """The shared setting in words: dataset, model, clients and partition, K, B, T, the
    regularizer and (unless identity) the compressor."""
    flat = flatten(shared) if any(isinstance(v, dict) for v in shared.values()) else shared
    parts = []
    if "dataset.name" in flat:
        parts.append(f"on {flat['dataset.name']}")
    model = _option(flat, "model")
    if model:
        parts.append(f"model {model}")
    for key, unit in COUNTS:
        if key in flat:
            parts.append(f"{key} = {fmt(flat[key])}" + (f" {unit}" if unit else ""))
        if key == "n" and _option(flat, "partition"):
            parts.append(f"partition {_option(flat, 'partition')}")
    if "participation" in flat and flat["participation"] != 1:
        parts.append(f"{fmt(flat['participation'])} of the clients a round")
    reg = _option(flat, "regularizer")
    if reg:
        parts.append("no regularizer (h = 0)" if reg == "none" else f"regularizer {reg}")
    comp = _option(flat, "compressor")
    if comp and comp != "identity":
        parts.append(f"compressor {comp}")
    return parts


def what_lines_are(counts, banded: bool, clipped: bool, points: bool = False) -> str:
    """``Lines: mean of 3 seeds; bands: ± 1 std`` (``points``: a slope figure's words)."""
    counts = set(counts)
    noun = "Points" if points else "Lines"
    text = (
        f"{noun}: mean of {seeds(min(counts))}"
        if len(counts) == 1
        else f"{noun}: mean over each curve's seeds"
    )
    if banded:
        text += "; bands: ± 1 std over the seeds" + (
            " (clipped at the axis's bottom)" if clipped else ""
        )
    return text + "."


def sentence(methods: list[str], shared: dict, common: set, leave=()) -> str:
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
    return text[0].upper() + text[1:] + "."
