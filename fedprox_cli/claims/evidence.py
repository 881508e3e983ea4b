"""A claim's evidence on one run set: its runs present against those declared (:mod:`.loading`)
and every test's units (:mod:`.units`; a benchmark file's, :mod:`.bench`), read per combination
of the open choices where the run set declares some (:mod:`.sensitivity`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..analysis.run import Run
from ..common.errors import UserError
from . import bench, sensitivity, tuning
from .declare import Claim, Point, RunSet, Test
from .loading import (
    PRESENT,
    declared_key,
    device,
    fixed_runs,
    is_,
    key_of,
    load_runs,
    minutes,
    placed,
    where,
)
from .text import canon, num, value_name
from .tuning import Pick
from .units import Outcome, Unit, noise, read_noise, units


class NoUsableRun(UserError):
    """A claim's folders are there, but none holds a run it can use (damage: `check` names it
    for that claim and goes on with the others)."""


@dataclass
class Evidence:
    runset: RunSet
    present: int
    declared: int
    # (point, seed) of the declared runs not made
    missing: list[tuple[Point, int]] = field(default_factory=list)
    # seeds of the claim's runs that it does not declare
    extra: list[int] = field(default_factory=list)
    seeds: tuple[Any, ...] = ()  # the runs' values of seed
    T: int | None = None
    devices: tuple[str, ...] = ()
    minutes: float = 0.0  # job-minutes of the runs present
    outcomes: list[Outcome] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)  # one line per run that is not evidence
    # grid point (shown) -> (diverged, made)
    diverged: dict[str, tuple[int, int]] = field(default_factory=dict)
    # grid point (shown) -> final trained_metric
    trained: dict[str, list[float]] = field(default_factory=dict)
    # (values, outcomes, present, declared, diverged)
    choices: list[tuple[Point, list[Outcome], int, int, int]] = field(default_factory=list)
    # with choices: the runs compared at every combination, and diverged
    reused: tuple[int, int] = (0, 0)
    picks: list[Pick] = field(default_factory=list)  # with a tuning protocol: each method's Pick
    reads: RunSet | None = None  # a tuned run set's runs at the chosen steps (figures, tables)

    @property
    def read_as(self) -> RunSet:
        """The run set whose runs figures and tables draw: a tuned one's at its chosen steps."""
        return self.reads or self.runset


def moot(rs: RunSet, t: Test, found: list[Unit]) -> tuple[str, str]:
    """Why a level test decides nothing on ``rs``, and why its finite runs decide nothing there
    while its diverged ones decide: on a stand-in (``stands_for``) no run reaches the paper's
    level (its best run stays below ``min``: the stand-in cannot show it), with that best value
    and, where declared (``unreachable``), why. A run that diverged (its unit's note) reaches no
    level on any data: where some did, they decide (they do not hold) and the test is not moot,
    the rest no evidence; the reason is then the second of the pair. ("", ""): it decides (the
    paper's own data, or some run there reaches the level)."""
    if t.kind != "level" or "min" not in t.holds or not rs.stands_for or not found:
        return "", ""
    best = max((u for u in found if math.isfinite(u.value)), key=lambda u: u.value, default=None)
    if best is not None and best.value >= t.holds["min"]:
        return "", ""
    gone = [u for u in found if u.note]
    for u in found:
        u.raw, u.holds = u.holds, (False if u.note else None)
    why = rs.unreachable.get(t.metric)
    reached = (
        f"the best run here reaches {num(best.value)} ({best.label})"
        if best
        else "no run is finite"
    )
    said = f"{t.metric} {t.holds['min']:g} is out of reach on {rs.data}: {reached}" + (
        f"; {why}" if why else ""
    )
    if not gone:
        return said, ""
    return "", (
        f"{said}, so its runs that reached T decide nothing; its {len(gone)} diverged runs "
        "reach the level on no data and decide (they do not hold)"
    )


def outcomes(
    claim: Claim, rs: RunSet, runs: list[Run], peers: list[Run] | None = None
) -> list[Outcome]:
    """Each test's units over ``runs``; a ratio's noise over ``peers`` (the runs its repeats
    vary, :func:`repeated`; default ``runs``)."""
    out = []
    for t in claim.tests:
        spread = noise(t, runs if peers is None else peers)
        found = read_noise(t, units(t, runs, claim, spread), spread)
        why, reach = moot(rs, t, found)
        out.append(Outcome(t, found, why, noise=spread, reach=reach))
    return out


def repeated(claim: Claim, rs: RunSet, root: Path, runs: list[Run]) -> list[Run]:
    """The runs a ratio's noise is read over: ``runs``, and where the run set selects on a key
    a test declares a repeat of its measurement (``repeats``), the run set's runs at the other
    values of that key too."""
    keys = {k for t in claim.tests for k in t.repeats if k in rs.where}
    if not keys:
        return runs
    wider = where(fixed_runs(claim, rs, root), {k: v for k, v in rs.where.items() if k not in keys})
    return [r for r in wider if r.status in PRESENT]


def _bench(claim: Claim, rs: RunSet, root: Path, strict: bool) -> Evidence:
    """The evidence of a benchmark run set: its file (``bench``, else each test's ``file``);
    a test the file does not measure is unmeasured there (:func:`.bench.measures`)."""
    files = [root / (rs.bench or t.file) for t in claim.tests]
    if not strict and not all(f.is_file() for f in files):
        return Evidence(rs, 0, 1, devices=(rs.device,))
    found = [
        Outcome(t, read_noise(t, bench.units(t, f, claim), None))
        if bench.measures(t, f)
        else Outcome(t, [], unmeasured=f"{t.metric} is not measured in {f.name}")
        for t, f in zip(claim.tests, files)
    ]
    return Evidence(rs, 1, 1, outcomes=found, devices=(rs.device,))


def _name(p: Point) -> str:
    return ", ".join(value_name(k, v) for k, v in p) or "all"


def _tally(ev: Evidence, claim: Claim, made: list[Run], runs: list[Run]) -> None:
    """Per grid point: how many of its runs diverged, and their final trained metric."""
    for r in made:
        name = _name(placed(r, runs, ev.runset))
        d, n = ev.diverged.get(name, (0, 0))
        ev.diverged[name] = (d + (r.status == "diverged"), n + 1)
        if claim.trained_metric and r.has(claim.trained_metric):
            ev.trained.setdefault(name, []).append(r.final(claim.trained_metric))


def reused(
    claim: Claim, rs: RunSet, root: Path, warn: Callable[[str], None], strict: bool
) -> list[Run]:
    """For a sensitivity run set: the runs its open choices do not vary (outside its
    ``where``), from the claim's run set of the same data and preset at the declared setting;
    read at every combination of the choices."""
    base = next(
        (
            b
            for b in claim.ran
            if b.folders and not b.choices and (b.data, b.preset) == (rs.data, rs.preset)
        ),
        None,
    )
    if base is None:
        return []
    runs = load_runs(claim, base, root, warn, strict=False)[0]
    varied = {id(r) for r in where(runs, rs.where)} if rs.where else set()
    return [
        r
        for r in runs
        if id(r) not in varied and r.status in PRESENT and r.config.get("seed") in rs.seeds
    ]


def _choices(
    claim: Claim, ev: Evidence, made: list[Run], runs: list[Run], fixed: list[Run]
) -> None:
    """Each combination of the open choices: (values, outcomes, present, declared, diverged)."""
    rs = ev.runset
    declared = {(declared_key(p), s) for p, s in rs.declared()}
    ev.reused = (len(fixed), sum(r.status == "diverged" for r in fixed))
    for values in sensitivity.combos(rs):
        at = [r for r in made if all(is_(r.config.get(key_of(runs, k)), v) for k, v in values)]
        want = [d for d in declared if all((k, canon(v)) in d[0] for k, v in values)]
        found = outcomes(claim, rs, at + fixed) if len(at) >= len(want) else []
        diverged = sum(r.status == "diverged" for r in at)
        ev.choices.append((values, [o for o in found if o.units], len(at), len(want), diverged))


def _tuned(
    claim: Claim, rs: RunSet, root: Path, warn: Callable[[str], None], strict: bool
) -> Evidence:
    """The evidence of a run set with a tuning protocol (:mod:`.tuning`): its tuning runs
    first; once all are here, each method's step by the rule, and the tests read on the run
    set's seeds at the chosen steps (without the methods that have none). The counts are of
    both; the seeds are the verdict's."""
    trials, t = tuning.trials(rs), tuning.of(rs)
    first = gather(claim, trials, root, warn, strict=False)
    known = {t.seed, *(s for other in claim.ran for s in other.seeds)}  # the folders are shared
    runs = load_runs(claim, trials, root, warn, strict=False)[0]
    tried = [r for r in runs if r.config.get("seed") == t.seed and r.status in PRESENT]
    picks = [tuning.pick(t, m, tried) for m in t.steps]
    if first.missing:  # the verdict's runs are declared, at steps not chosen yet
        first.runset, first.declared = rs, first.declared + len(rs.points) * len(rs.seeds)
        first.extra = [s for s in first.extra if s not in known]
        first.picks, first.reads = picks, tuning.chosen(rs, picks)
        return first
    dropped = {p.method for p in picks if p.step is None}
    tests = tuple(tuning.without(x, dropped) for x in claim.tests)
    reads = tuning.chosen(rs, picks)
    ev = gather(replace(claim, tests=tests), reads, root, warn, strict)
    ev.runset, ev.picks, ev.reads = rs, picks, reads
    ev.present, ev.declared = ev.present + first.present, ev.declared + first.declared
    ev.minutes += first.minutes
    ev.findings = first.findings + ev.findings
    ev.extra = [s for s in ev.extra if s not in known]
    return ev


def gather(
    claim: Claim, rs: RunSet, root: Path, warn: Callable[[str], None], strict: bool = True
) -> Evidence:
    """The evidence of one run set: runs present against declared, and every test's units
    (none while runs are missing). ``strict``: a folder without the claim's runs is a user error."""
    if not rs.folders:  # a benchmark file
        return _bench(claim, rs, root, strict)
    if rs.tuning:
        return _tuned(claim, rs, root, warn, strict)
    runs, findings = load_runs(claim, rs, root, warn, strict)
    seeds: set[Any] = {r.config.get("seed") for r in runs}  # a run's config has its seed
    extra = sorted(seeds - set(rs.seeds))
    runs = [r for r in runs if r.config.get("seed") in rs.seeds]
    declared = {(declared_key(p), s) for p, s in rs.declared()}
    made = [r for r in runs if r.status in PRESENT]
    have = {(declared_key(placed(r, runs, rs)), r.config.get("seed")) for r in made}
    missing = sorted(declared - have, key=lambda ps: (ps[1], ps[0]))
    if not (made or not strict or rs.choices):
        raise NoUsableRun(
            f"claim {claim.id}: no finished or diverged run of the claim under "
            f"{', '.join(str(root / f) for f in rs.folders)}"
        )
    ev = Evidence(
        rs,
        len(declared & have),
        len(declared),
        missing,
        extra,
        tuple(sorted({r.config.get("seed") for r in made})),
        made[0].config.get("T") if made else rs.T,
        tuple(sorted({device(r) for r in made})),
        sum(minutes(r) for r in made),
        findings=findings,
    )
    _tally(ev, claim, made, runs)
    if rs.choices:  # read per combination of the open choices, never as a whole
        _choices(claim, ev, made, runs, reused(claim, rs, root, warn, strict))
    elif not missing:
        ev.outcomes = outcomes(claim, rs, made, repeated(claim, rs, root, made))
    return ev
