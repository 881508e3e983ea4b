"""The one validation of a claim's evidence, used by every ``fedrun-reproduce`` command through
:func:`.evidence.gather`: which runs of a run set are evidence, and a finding (one line naming the
run folder and the key) for each that is not.

A run is evidence only when
- it has every setting the claim fixes (``fixed``, step sizes included), and its ``config.yaml``
  agrees with Hydra's records of the same run (``.hydra/config.yaml`` on every key both hold,
  every override of ``.hydra/overrides.yaml``) and with its sweep's job record (its overrides),
  where each exists; a run without a Hydra record is *unverified* (:func:`unverified`: its
  config is covered by its recorded digest alone, :mod:`.digests`);
- its ``summary.json``'s final metrics are the last row of its ``metrics.csv``;
- it agrees with the other seeds of its declared point on every setting (a value edited in one
  run's config names that run and key);
- its rows fit its T and status: a finished run holds every evaluation of its schedule (round 0,
  every ``eval_every`` rounds, round T) and only finite values; a diverged run holds a prefix of
  it and a non-finite value in its last row;
- it has every metric the claim's tests read;
- no other folder holds a run of the same identity (settings and seed): duplicates are named,
  and neither is used.
A folder that cannot be read at all (a cut or oversized ``metrics.csv``, an unreadable config) is a
finding too. A run left out is missing from the claim (``partly run``), never counted as worst.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ..analysis import groups, jobrecords
from ..analysis.jobrecords import JobRecord
from ..analysis.run import CHOICE, Run, is_replicate
from ..common import guarded, run_files
from ..common import metric_table as mt
from ..common.errors import squeeze
from ..common.flatten import flatten
from ..config.schedule import schedule
from .declare import Claim, Point, RunSet

PRESENT = ("finished", "diverged")
AUTO = "auto"  # a value the run resolves when it starts (config.yaml records the choice made)


def _shown(v: object) -> str:
    return squeeze(groups.fmt(v), 60)


def rows(run: Run) -> str | None:
    """Why the run's rows do not fit its T and status (None: they do)."""
    if run.status not in PRESENT:
        return None
    try:
        T, every = int(run.config["T"]), int(run.config.get("eval_every", 1))
    except (KeyError, TypeError, ValueError):
        return "config.yaml: T or eval_every is not a number"
    got = run.metrics[mt.ROUND.name].tolist()
    want = schedule(T, every)
    values = run.metrics.drop(
        columns=[c for c in (mt.ROUND.name, mt.TIME.name) if c in run.metrics]
    ).to_numpy(float)
    bad = ~np.isfinite(values).all(axis=1)
    if run.status == "finished":
        if got != want:
            miss = sorted(set(want) - set(got))
            what = (
                f"no evaluation at round{'s' * (len(miss) > 1)} {_few(miss)}"
                if miss
                else f"rounds {_few(sorted(set(got) - set(want)))} outside its schedule"
            )
            return f"metrics.csv: status finished at T = {T}, but {what}"
        if bad.any():
            return (
                f"metrics.csv: status finished, but a non-finite value at round "
                f"{got[int(np.argmax(bad))]} (only a diverged run has one)"
            )
        return None
    if got[:-1] != want[: len(got) - 1] or not bad[-1] or bad[:-1].any():
        return (
            "metrics.csv: status diverged, but its rows are not a finite prefix of its "
            "schedule ending non-finite"
        )
    return None


def _few(xs: Sequence[float]) -> str:
    return ", ".join(map(str, xs[:5])) + (f" and {len(xs) - 5} more" if len(xs) > 5 else "")


def recorded(run: Run) -> str | None:
    """A key on which config.yaml and Hydra's record of the run (.hydra/config.yaml) disagree."""
    try:
        hydra = flatten(run_files.read_hydra_config(run.path))
    except run_files.RunFileError as e:  # an unreadable record is one finding
        return f".hydra/config.yaml is unreadable ({squeeze(e.why, 120)})"
    for k, v in hydra.items():
        if (
            k in run.config
            and not (isinstance(v, str) and "${" in v)
            and not groups.is_run_control(k)
            and not is_replicate(k)
            and groups.fmt(v) not in (groups.fmt(run.config[k]), AUTO)
        ):
            return (
                f"config.yaml has {k}={_shown(run.config[k])}, its .hydra/config.yaml "
                f"{k}={_shown(v)}"
            )
    return None


def _agrees(run: Run, override: str, seeds: bool) -> str | None:
    """Why ``override`` (``key=value``, as Hydra records it) disagrees with the run's config
    (None: it agrees, or names a key the config does not hold; ``seeds``: compare the seed)."""
    key, sep, value = override.lstrip("+~").partition("=")
    if not sep or key.startswith("hydra") or "," in value:
        return None
    k = key if key in run.config else f"{CHOICE}{key}"
    if k not in run.config or groups.is_run_control(key) or (is_replicate(key) and not seeds):
        return None
    try:
        want = guarded.parse_yaml(value, run.path / run_files.HYDRA / run_files.OVERRIDES)
    except guarded.Unreadable:
        want = value
    if groups.fmt(want) in (groups.fmt(run.config[k]), AUTO):
        return None
    return f"config.yaml has {key}={_shown(run.config[k])}"


def overridden(run: Run) -> str | None:
    """An override of the run's Hydra record (``.hydra/overrides.yaml``) or of its sweep's job
    record that its config.yaml contradicts (a seed batch's records: all but the seed, which is
    the batch's first)."""
    sources = []
    try:
        listed = run_files.read_overrides(run.path)
    except FileNotFoundError:
        listed = None
    except run_files.RunFileError as e:
        return f".hydra/overrides.yaml is unreadable ({e.why})"
    if listed is not None:
        alone = str(run.config.get("seeds", 1)) in ("1", "None")  # a seed batch's record: its first
        sources.append((".hydra/overrides.yaml", listed, alone))
    here = Path(os.path.abspath(run.path))
    for folder, seeds in ((here, True), (here.parent, False)):  # a seed batch's runs: its job's
        job = _jobs(str(folder.parent)).get(folder)
        if job is not None:
            sources.append(("its sweep's job record", job.overrides, seeds))
            break
    for name, overrides, seeds in sources:
        for o in map(str, overrides):
            if why := _agrees(run, o, seeds):
                return f"{why}, {name} {o}"
    return None


@functools.lru_cache(maxsize=256)
def _jobs(sweep: str) -> dict[Path, JobRecord]:
    """Job folder (where it is now) -> its job record, of the sweep ``sweep``."""
    here = Path(os.path.abspath(sweep))
    return {where: r for r, where in jobrecords.held(here, lambda _: None)}


def forget() -> None:
    _jobs.cache_clear()


def summarized(run: Run) -> str | None:
    """A final metric of ``summary.json`` that is not the last row of ``metrics.csv``."""
    final = run.summary.get("final")
    if not isinstance(final, dict):
        return None
    last = run.metrics.iloc[-1]
    for k, v in final.items():
        if k in run.metrics and isinstance(v, (int, float)):
            x = float(last[k])
            if not (
                math.isclose(x, v, rel_tol=1e-9, abs_tol=1e-12) or (math.isnan(x) and math.isnan(v))
            ):
                return f"summary.json's final {k} is {v:.6g}, metrics.csv's last row {x:.6g}"
    return None


def unverified(runs: list[Run]) -> list[Run]:
    """The runs with no Hydra record to check their config.yaml against."""
    return [
        r for r in runs if not (Path(r.path) / run_files.HYDRA / run_files.HYDRA_CONFIG).is_file()
    ]


def _odd(point_runs: list[Run]) -> dict[int, tuple[str, str, str]]:
    """Run -> (key, its value, the others' value) for runs differing from the other seeds of
    their point on a setting (the odd one of a majority; every one where none is)."""
    out: dict[int, tuple[str, str, str]] = {}  # id(run) -> (key, its value, the others')
    keys: set[str] = set().union(*(groups.settings(r) for r in point_runs))
    for k in sorted(keys):
        vals = [groups.fmt(r.config.get(k)) for r in point_runs]
        if len(set(vals)) < 2:
            continue
        common = max(set(vals), key=vals.count)
        majority = vals.count(common) > len(vals) / 2
        for r, v in zip(point_runs, vals):
            if (v != common or not majority) and id(r) not in out:
                out[id(r)] = (k, v, common if majority else "another value")
    return out


def fixed(
    claim: Claim, rs: RunSet, runs: list[Run], held: Callable[[object, object], bool]
) -> tuple[list[Run], list[str]]:
    """The runs holding every setting the run set fixes (``held(value, want)``), and a finding
    for each other run in its folders."""
    kept: list[Run] = []
    found: list[str] = []
    for r in runs:
        bad = [
            (k, want)
            for k, want in rs.fixed.items()
            if not held(r.config.get(groups.config_key(runs, k)), want)
        ]
        if bad:
            k, want = bad[0]
            found.append(
                f"claim {claim.id}: {r.path}: "
                f"{k}={_shown(r.config.get(groups.config_key(runs, k)))}, "
                f"the claim fixes {k}={want}"
            )
        else:
            kept.append(r)
    return kept, found


def check(
    claim: Claim, runs: list[Run], point: Callable[[Run], Point | None]
) -> tuple[list[Run], list[str]]:
    """The runs of ``runs`` (those of one run set, holding its fixed settings) that are
    evidence, and one finding per run that is not. ``point(run)``: its declared grid point."""
    findings: dict[int, str] = {}

    def find(r: Run, why: str) -> None:
        findings.setdefault(id(r), f"claim {claim.id}: {r.path}: {why}")

    for r in runs:
        metrics = {t.metric for t in claim.tests if t.source == "runs"}
        absent = sorted(m for m in metrics if not r.has(m))
        if absent:
            find(r, f"metrics.csv has no column {', '.join(map(repr, absent))}")
        for why in (
            recorded(r),
            overridden(r),
            rows(r) if not absent else None,
            summarized(r) if not absent else None,
        ):
            if why:
                find(r, why)
    by_point: dict[Point | None, list[Run]] = {}
    for r in runs:
        by_point.setdefault(point(r), []).append(r)
    for same in by_point.values():
        for odd, (k, v, other) in _odd(same).items() if len(same) > 1 else ():
            run = next(x for x in same if id(x) == odd)
            find(run, f"{k}={v}, the other seeds of its setting have {k}={other}")
    by_id: dict[tuple[object, ...], list[Run]] = {}
    for r in runs:
        by_id.setdefault(groups.identity(r), []).append(r)
    for same in by_id.values():
        if len(same) > 1:
            for r in same:
                others = ", ".join(str(x.path) for x in same if x is not r)
                findings[id(r)] = (
                    f"claim {claim.id}: {r.path}: the same run (settings and seed) as "
                    f"{others}: neither is used"
                )
    return [r for r in runs if id(r) not in findings], list(dict.fromkeys(findings.values()))
