"""Result folders -> grouped curves and tables (the logic behind scripts/plot.py and tables.py).

A *run* is a folder holding ``config.yaml`` (the resolved config) and ``metrics.csv``. Runs whose
configs differ only in seeds (``seed`` and every ``*.seed``) form a *group*, aggregated as mean
+- std over its runs, round by round. A group's label names only the config keys that tell the
groups apart (e.g. ``algorithm=fedcanon, partition.alpha=0.1``). When a run folder has Hydra's
record (``.hydra/hydra.yaml``), its config-group choices (e.g. ``algorithm=fedcanon_fig2/fedavg``)
join the keys, so runs that resolve to the same numbers but were chosen differently stay apart.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from omegaconf import OmegaConf

from .errors import require
from .flatten import flatten

CHOICE = "choice:"           # prefix of config-group choice keys (choice:algorithm)
X_AXES = {"round": "round", "time": "wall time (s, training only)",
          "bytes": "communication (bytes, up + down)"}
LOG_Y = {"stationarity"}     # metrics the papers draw on a log scale
LOWER_IS_BETTER = {"train_loss", "objective", "test_loss", "stationarity", "time_s"}


@dataclass
class Run:
    path: Path
    config: dict            # flat: dotted keys -> scalars, plus choice:<group> keys
    metrics: pd.DataFrame
    status: str

    def column(self, name: str) -> np.ndarray:
        if name == "bytes":
            return (self.metrics["bytes_up"] + self.metrics["bytes_down"]).to_numpy(float)
        if name == "time":
            return self.metrics["time_s"].to_numpy(float)
        require(name in self.metrics, f"{self.path}/metrics.csv has no column {name!r} "
                                      f"(columns: {', '.join(self.metrics.columns)})")
        return self.metrics[name].to_numpy(float)

    def final(self, name: str) -> float:
        return float(self.column(name)[-1])


@dataclass
class Group:
    key: tuple              # the config without replicate keys, as sorted (key, value) pairs
    runs: list[Run]
    label: str = ""
    label_values: dict = field(default_factory=dict)

    @property
    def config(self) -> dict:
        return dict(self.key)


def _choices(run_dir: Path) -> dict:
    hydra_yaml = run_dir / ".hydra" / "hydra.yaml"
    if not hydra_yaml.exists():
        return {}
    choices = OmegaConf.to_container(OmegaConf.load(hydra_yaml).hydra.runtime.choices)
    return {f"{CHOICE}{g}": c for g, c in choices.items() if not g.startswith("hydra/")}


def find_runs(paths) -> list[Path]:
    """Run folders among ``paths``: each is a run folder or a folder searched recursively."""
    found = []
    for p in map(Path, paths):
        require(p.exists(), f"no such results folder: {p}")
        if (p / "metrics.csv").exists() and (p / "config.yaml").exists():
            found.append(p)
        else:
            found += sorted(c.parent for c in p.rglob("metrics.csv") if (c.parent / "config.yaml").exists())
    require(found, f"no run folders (config.yaml + metrics.csv) under {', '.join(map(str, paths))}")
    return list(dict.fromkeys(found))


def load_run(run_dir: Path) -> Run:
    cfg = flatten(OmegaConf.to_container(OmegaConf.load(run_dir / "config.yaml"), resolve=False))
    try:   # summary.json as outputs.write_summary writes it (read here without importing torch)
        status = json.loads((run_dir / "summary.json").read_text())["status"]
    except (OSError, ValueError, KeyError):
        status = "missing"
    return Run(run_dir, {**cfg, **_choices(run_dir)}, pd.read_csv(run_dir / "metrics.csv"), status)


def load(paths, where: list[str] = ()) -> list[Run]:
    """All runs under ``paths`` whose config matches every ``KEY=VALUE`` in ``where``."""
    runs = [load_run(p) for p in find_runs(paths)]
    for cond in where:
        require("=" in cond, f"--where takes KEY=VALUE, got {cond!r}")
        k, v = cond.split("=", 1)
        k = config_key(runs, k)
        runs = [r for r in runs if _matches(r.config.get(k), v)]
        require(runs, f"no run has {cond}")
    return runs


def config_key(runs: list[Run], key: str) -> str:
    """``key`` as the runs know it: a dotted config key, else a config-group choice."""
    return key if any(key in r.config for r in runs) else f"{CHOICE}{key}"


def split(runs: list[Run], keys: list[str]) -> dict[str, list[Run]]:
    """Runs split by their values of ``keys`` (the panels of a figure), titled ``k=v, ...``."""
    keys = [config_key(runs, k) for k in keys]
    for k in keys:
        require(any(k in r.config for r in runs), f"no run has a config key {short(k)!r}")
    out: dict[tuple, list[Run]] = {}
    for r in runs:
        out.setdefault(tuple(r.config.get(k, "-") for k in keys), []).append(r)
    return {", ".join(f"{short(k)}={fmt(v)}" for k, v in zip(keys, values)): out[values]
            for values in sorted(out, key=order)}


def order(values) -> tuple:
    """A sort key for tuples of config values: numbers by size, before strings."""
    return tuple((0, v, "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0, str(v))
                 for v in values)


def _matches(value, text: str) -> bool:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return math.isclose(float(value), float(text), rel_tol=1e-9)
        except ValueError:
            return False
    return str(value) == text


def is_replicate(key: str) -> bool:
    return key == "seed" or key.endswith(".seed")


def group(runs: list[Run], ignore=()) -> list[Group]:
    """Runs grouped by their config without replicate keys (and without ``ignore``), labelled."""
    groups: dict[tuple, Group] = {}
    for r in runs:
        key = tuple(sorted((k, v) for k, v in r.config.items() if not is_replicate(k) and k not in ignore))
        groups.setdefault(key, Group(key, [])).runs.append(r)
    out = list(groups.values())
    keys = label_keys([g.config for g in out])
    for g in out:
        g.label_values = {k: g.config[k] for k in keys if k in g.config}
        g.label = ", ".join(f"{short(k)}={fmt(v)}" for k, v in g.label_values.items()) or "all runs"
    return sorted(out, key=lambda g: order(g.config.get(k, "") for k in keys))


def _priority(key: str) -> tuple:
    if key.startswith(CHOICE):
        return (3, key)
    if "." not in key:
        return (1, key)
    return (0 if key.endswith(".name") else 2, key)


def label_keys(configs: list[dict]) -> list[str]:
    """The keys that tell ``configs`` apart: names first, then top-level keys, then the rest,
    then group choices; a key is kept only if it splits configs the kept keys do not."""
    keys = {k for c in configs for k in c}
    differing = [k for k in keys if len({repr(c.get(k)) for c in configs}) > 1]
    kept: list[str] = []

    def classes(ks):
        return len({tuple(repr(c.get(k)) for k in ks) for c in configs})
    for k in sorted(differing, key=_priority):
        if classes(kept + [k]) > classes(kept):
            kept.append(k)
    return kept


def short(key: str) -> str:
    key = key.removeprefix(CHOICE)
    return key.removesuffix(".name")


def fmt(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def band(g: Group, x: str, y: str) -> pd.DataFrame:
    """Per evaluated round: mean of x, and mean / std / count of y over the group's runs.

    Runs are aligned on the round column; rounds not reached by every run use the runs that
    reached them (count says how many)."""
    frames = [pd.DataFrame({"round": r.column("round"), "x": r.column(x), "y": r.column(y)})
              for r in g.runs]
    stacked = pd.concat(frames, keys=range(len(frames)))
    agg = stacked.groupby("round").agg(x=("x", "mean"), mean=("y", "mean"), std=("y", "std"),
                                       count=("y", "size"))
    return agg.fillna({"std": 0.0}).reset_index()


def final_stats(g: Group, metric: str) -> tuple[float, float, int]:
    """Mean, std (ddof 1; 0 for one run) and count of the runs' last ``metric`` value."""
    vals = np.array([r.final(metric) for r in g.runs])
    return float(vals.mean()), float(vals.std(ddof=1)) if len(vals) > 1 else 0.0, len(vals)


def slope(runs: list[Run], key: str, metric: str = "stationarity") -> list[dict]:
    """Least-squares slope of log(final metric) against log(key) (FedNMap Figs. 3b, 4b), one fit
    per group of the other keys. The final metric is the mean over seeds of the last value."""
    require(all(key in r.config for r in runs), f"--slope {key}: some runs have no config key {key!r}")
    fits = []
    for curve in group(runs, ignore=(key, *determined_by(runs, key))):
        pts = sorted((v, final_stats(g, metric)[0]) for v, g in _by(curve.runs, key).items())
        require(len(pts) >= 2, f"--slope {key}: need at least two values of {key}, got {len(pts)}")
        xs, ys = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
        require(np.isfinite(ys).all(), f"--slope {key}: final {metric} must be positive and finite")
        b, a = np.polyfit(xs, ys, 1)
        fits.append({"label": curve.label, "slope": float(b), "intercept": float(a), "points": pts})
    return fits


def determined_by(runs: list[Run], key: str) -> list[str]:
    """Config keys that vary across ``runs`` but take one value per value of ``key`` (e.g.
    FedNMap's eta_a = 1/K when K is swept): they move with ``key``, not beside it."""
    keys = {k for r in runs for k in r.config} - {key}
    by_key = _by(runs, key).values()
    return sorted(k for k in keys
                  if len({repr(r.config.get(k)) for r in runs}) > 1
                  and all(len({repr(r.config.get(k)) for r in g.runs}) == 1 for g in by_key))


def _by(runs: list[Run], key: str) -> dict:
    out: dict = {}
    for r in runs:
        out.setdefault(r.config[key], []).append(r)
    return {v: Group((), rs) for v, rs in out.items()}


def unfinished(runs: list[Run]) -> list[Run]:
    return [r for r in runs if r.status != "finished"]


# ----------------------------------------------------------------------------------- tables


def pivot(runs: list[Run], metric: str, column: str = "algorithm.name"):
    """Final ``metric`` (mean, std, count) per row x column, the columns being the values of
    ``column`` and the rows the groups of everything else. Returns (row keys, rows, columns,
    cells) with cells[(row index, column value)] = (mean, std, count)."""
    require(all(column in r.config for r in runs), f"some runs have no config key {column!r}")
    cols = list(dict.fromkeys(r.config[column] for r in runs))
    algo = column.split(".")[0]
    related = {k for r in runs for k in r.config if k.split(".")[0] in (algo, f"{CHOICE}{algo}")}
    rows = group(runs, ignore=related)
    cells = {}
    for i, row in enumerate(rows):
        for c, g in _by(row.runs, column).items():
            cells[(i, c)] = final_stats(g, metric)
    row_keys = list(dict.fromkeys(k for row in rows for k in row.label_values))
    return row_keys, rows, cols, cells


def markdown(header: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


def _row_cells(row_keys, row: Group) -> list[str]:
    return [fmt(row.label_values[k]) if k in row.label_values else "" for k in row_keys]


def accuracy_table(runs: list[Run], metric: str = "test_acc", column: str = "algorithm.name") -> str:
    """FedCanon Table VI: final ``metric`` mean +- std per (dataset, model, partition, ...) row and
    algorithm column; the best mean of each row in bold."""
    row_keys, rows, cols, cells = pivot(runs, metric, column)
    pick = min if metric in LOWER_IS_BETTER else max
    body = []
    for i, row in enumerate(rows):
        best = pick(cells[(i, c)][0] for c in cols if (i, c) in cells)
        texts = []
        for c in cols:
            m, s, _ = cells.get((i, c), (math.nan, math.nan, 0))
            text = "" if (i, c) not in cells else f"{m:.4f} ± {s:.4f}"
            texts.append(f"**{text}**" if text and m == best else text)
        body.append(_row_cells(row_keys, row) + texts)
    return markdown([short(k) for k in row_keys] + [str(c) for c in cols], body)


def time_table(runs: list[Run], reference: str = "fedcanon", column: str = "algorithm.name") -> str:
    """FedCanon Table V: total training time (s) at the last round, mean +- std over seeds, per K
    (rows) and algorithm (columns), with the ratio to ``reference`` at the same K and the ratio
    to the same algorithm at the previous K."""
    require(all("K" in r.config for r in runs), "some runs have no config key 'K'")
    row_keys, rows, cols, cells = pivot(runs, "time_s", column)
    require(row_keys == ["K"] or len(rows) == 1,
            f"Table V varies K only; these runs also differ in {', '.join(k for k in row_keys if k != 'K')}"
            " (filter them with --where)")
    ref = reference if reference in cols else cols[0]
    order = sorted(range(len(rows)), key=lambda i: rows[i].config.get("K", 0))
    body, prev = [], None
    for i in order:
        cells_i = []
        for c in cols:
            if (i, c) not in cells:
                cells_i.append("")
                continue
            m, s, _ = cells[(i, c)]
            notes = []
            if c != ref and (i, ref) in cells:
                notes.append(f"{m / cells[(i, ref)][0]:.2f}× {ref}")
            if prev is not None and (prev, c) in cells:
                notes.append(f"{m / cells[(prev, c)][0]:.2f}× prev. K")
            cells_i.append(f"{m:.1f} ± {s:.1f}" + (f" ({'; '.join(notes)})" if notes else ""))
        body.append([fmt(rows[i].config.get("K"))] + cells_i)
        prev = i
    return markdown(["K"] + [str(c) for c in cols], body)

