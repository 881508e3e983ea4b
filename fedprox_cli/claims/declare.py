"""Claims as typed records: the declarations of a claims file (one entry per figure or table;
the three papers' in ``fedprox_cli/claims/<paper>.yaml``, any other source's where
:mod:`.sources` finds it), checked by :mod:`.schema` before they are typed here.

A :class:`Claim` holds the paper's words and setting, the :class:`RunSet` at the paper's setting
(``paper``) and the run sets that ran here (``ran``, the paper's data or a stand-in, each with its
folders under the results root), the :class:`Test` list that decides its word, and what was chosen
where the paper is silent. Nothing here reads a run folder (:mod:`.evidence` does).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any

import yaml

from ..common import metric_table as mt
from ..common.errors import UserError, require

KINDS = ("order", "slope", "drop", "ratio", "level")
ROLES = ("primary", "supporting")
AT = ("last", "tail", "every", "bytes", "area")
CURVES = ("seed", "mean")  # a test reads each seed's curve, or the seeds' mean curve


Point = tuple[tuple[str, Any], ...]  # a declared run's (key, value) pairs
# what a primary test measures: folders, kind, metric, key, at, values, base, filters
Measurement = tuple[
    tuple[str, ...], str, str, str | None, str, tuple[str, ...], str, tuple[tuple[str, str], ...]
]


@dataclass(frozen=True)
class Test:
    """One test, evaluated unit by unit (a unit: a seed in a panel; a benchmark row for
    ``source: bench``). ``order``: ``values`` of ``key`` best first; ``mode`` best (the first
    beats every other) or chain (each beats the next). ``slope``: of log(final ``metric``) on
    log(``key``) per seed. ``drop``: points (x100) by which ``values[0]`` falls short of the best
    other value of ``key``. ``ratio``: final ``metric`` of each of ``values`` over ``base``'s.
    ``level``: final ``metric`` of each of ``values``. ``holds`` bounds the number of
    slope/drop/ratio/level (``min``, ``max``). ``at: bytes`` reads an ordering at equal transmitted
    bytes (a plot against communication cost): each run's last evaluation within ``budget``, by
    default the smallest total (up + down) a compared run that reached T sent. ``at: area`` reads an
    ordering over the whole curve from ``from_round`` on: each run's geometric mean of the metric
    over its evaluations (the area under the curve on a log axis; a diverged run the worst).
    ``curve: mean`` reads the seeds' mean curve a paper plots (each setting's metric averaged
    over its seeds at every evaluation, :mod:`.mean_curve`), one unit per panel, instead of each
    seed's curve (``curve: seed``, the default). ``same_as``: the
    id of an earlier claim whose test of the same measurement this one is (one measurement, one
    word: its units and exemptions are that claim's). ``no_seeds`` / ``per_round``: the tested
    number is the same at every seed / per round (one seed, or fewer rounds than the paper's T,
    then decide); a claim's flags of the same names set them for all its tests."""

    kind: str
    metric: str
    says: str
    key: str | None = None
    values: tuple[Any, ...] = ()  # the key's values compared (YAML scalars)
    base: object = None
    mode: str = "best"
    panels: tuple[str, ...] = ()
    at: str = "last"
    from_round: int = 0
    to_round: int | None = None  # with at: every, the last round read (None: to the end)
    curve: str = "seed"  # seed (a unit per seed) or mean (the seeds' mean curve, a unit per panel)
    where: dict[str, Any] = field(default_factory=dict)
    holds: dict[str, Any] = field(default_factory=dict)
    paper: str = ""
    source: str = "runs"  # runs, or bench (a benchmark table under the results root)
    file: str = ""  # with source bench
    role: str = "primary"  # primary (the quoted words or a number the paper states: decides
    # the word) or supporting (shown, never deciding)
    budget: float | None = None  # with at: bytes, the bytes read at (None: see above)
    same_as: str = ""
    no_seeds: bool = False
    per_round: bool = False
    repeats: tuple[
        str, ...
    ] = ()  # with ratio: config keys whose values repeat the base's measurement
    # (time per round does not depend on the partition): the spread of the base's own value
    # across them is the test's noise, and a ratio whose margin to its bound lies inside it
    # decides nothing (units.noise)

    @property
    def compared(self) -> str:
        """``key``: the config key whose values a test of runs compares."""
        if self.key is None:
            raise UserError(f"a test of {self.metric} on runs needs a key (the values' key)")
        return self.key


@dataclass(frozen=True)
class RunSet:
    """Runs of one claim on one dataset: the preset and overrides that make them, the folders
    (relative to the results root) that hold them, the settings every run there must have
    (``fixed``), those that select this claim's runs (``where``), and the declared runs: the
    product of ``grid`` (or the listed ``points`` times the rest of the grid) and ``seeds``."""

    data: str
    preset: str = ""  # a preset of conf/experiment ("": the overrides say everything)
    overrides: tuple[str, ...] = ()
    stands_for: str = ""  # the paper's dataset this one stands in for ("": the paper's own)
    folders: tuple[str, ...] = ()
    into: str = ""  # the folder new runs go to
    fixed: dict[str, Any] = field(default_factory=dict)
    where: dict[str, Any] = field(default_factory=dict)
    grid: dict[str, list[Any]] = field(default_factory=dict)
    points: tuple[dict[str, Any], ...] = ()
    seeds: tuple[int, ...] = ()
    T: int | None = None
    device: str = "cpu"
    choices: tuple[
        str, ...
    ] = ()  # grid keys the paper leaves open: a sensitivity run set, read per
    # combination of their values, never deciding (.sensitivity)
    bench: str = ""  # a benchmark run set's file under the results root (else each test's file)
    provenance: str = ""  # where a file measured elsewhere came from (commit, device, command)
    # metric -> why a level's bound is out of reach on this stand-in, said where no run here
    # reaches it (then it decides nothing here)
    unreachable: dict[str, str] = field(default_factory=dict)
    # a setting as the report names it (za2) -> why its runs here diverge (the named reason and
    # the test that shows it), said under the claim by `list` where they do
    diverges: dict[str, str] = field(default_factory=dict)
    # a declared tuning protocol for the steps the paper does not give: seed, grid, steps
    # (method -> its step's key), metric (.tuning)
    tuning: dict[str, Any] = field(default_factory=dict)
    role: str = "primary"  # primary (may decide the word) or supporting (shown, never deciding)

    def declared(self) -> list[tuple[Point, int]]:
        """Every declared run as ((key, value) pairs, seed)."""
        rest = [[(k, v) for v in vs] for k, vs in self.grid.items()]
        points = [tuple(p.items()) for p in self.points] or [()]
        return [
            (tuple(point) + tuple(combo), s)
            for point in points
            for combo in itertools.product(*rest)
            for s in self.seeds
        ]


@dataclass(frozen=True)
class Figure:
    """A claim's figure as the paper draws it (``figure:`` in its YAML; drawn by
    :func:`.figures.draw`): ``panels`` (each ``label`` "(a)", its ``where`` filter, ``y``, ``x``,
    ``logy``; ``kind: slope`` with ``key`` for final y against log key), ``curves`` (the key whose
    values are the curves) named by ``names`` / the method's printed name / ``label`` (a template
    ``Q = {}``), ``notation`` (config key -> the paper's symbol), ``caption`` (what the paper's
    figure shows), ``marks`` (the paper's numbers: ``hline`` y, ``below`` points, ``slope`` value;
    each with its ``text``), ``grid`` (rows, columns)."""

    panels: tuple[dict[str, Any], ...]
    curves: str
    caption: str
    x: str = mt.ROUND.name
    y: str = mt.TEST_ACC.name
    logy: bool = False
    names: dict[str, str] = field(default_factory=dict)
    label: str = ""
    order: tuple[Any, ...] = ()
    notation: dict[str, str] = field(default_factory=dict)
    marks: tuple[dict[str, Any], ...] = ()
    grid: tuple[int, ...] = ()
    width: float = 0.0
    stationarity: str = "||G||²"


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str
    where: str
    short: str
    quote: str
    numbers: str = ""  # the paper's numbers, as it states them
    setting: str = ""  # the paper's setting, in words
    chosen: str = ""  # what the declaration chose where the paper is silent
    paper_T: int | None = None
    paper_seeds: int | None = None
    paper_runs: RunSet | None = None
    ran: tuple[RunSet, ...] = ()  # the first with runs decides the word
    tests: tuple[Test, ...] = ()
    figure: str = ""
    figure_spec: Figure | None = None  # the figure drawn from the runs (figure: as a mapping)
    table_spec: dict[str, Any] | None = None  # the paper's table (table: ; claims.tables)
    trained_metric: str = ""  # a unit whose finished runs end below trained_min on it is
    trained_min: float = 0.0  # no evidence (nothing trained): inconclusive
    per_round: bool = False  # the tested numbers do not depend on T
    no_seeds: bool = False  # counts or a benchmark: one unit is the evidence
    implementation: bool = False  # an implementation check (the code's counters against the
    # formulas it implements): checked / check failed, never reproduced (verdict.as_check)
    note: str = ""
    revised: str = ""  # where a deciding test was replaced after its runs were read: the
    # earlier reading and the word it gave, by commit (rendered as "Revised:" in the report)
    origin: str = field(default="", repr=False, compare=False)  # file:line of its declaration
    file: str = field(default="", repr=False, compare=False)  # its claims file on disk

    @property
    def title(self) -> str:
        return f"{self.paper} {self.where.split(', ')[-1]}"


def _test(d: dict[str, Any]) -> Test:
    return Test(
        **{
            **d,
            "values": tuple(d.get("values", ())),
            "panels": tuple(d.get("panels", ())),
            "repeats": tuple(d.get("repeats", ())),
        }
    )


def _runset(d: dict[str, Any]) -> RunSet:
    require(
        all(k in d.get("grid", {}) for k in d.get("choices", ())),
        "a run set's choices must be keys of its grid",
    )
    return RunSet(
        **{
            **d,
            "overrides": tuple(d.get("overrides", ())),
            "folders": tuple(d.get("folders", ())),
            "choices": tuple(d.get("choices", ())),
            "points": tuple(d.get("points", ())),
            "seeds": tuple(d.get("seeds", ())),
            "grid": {k: list(v) for k, v in d.get("grid", {}).items()},
        }
    )


def _figure(claim_id: str | None, d: dict[str, Any]) -> Figure:
    require(
        isinstance(d.get("panels"), list) and d["panels"], f"claim {claim_id}: figure needs panels"
    )
    try:
        return Figure(
            **{
                **d,
                "panels": tuple(d["panels"]),
                "marks": tuple(d.get("marks", ())),
                "order": tuple(d.get("order", ())),
                "grid": tuple(d.get("grid", ())),
                "names": {str(k): v for k, v in d.get("names", {}).items()},
            }
        )
    except TypeError as e:
        raise UserError(f"claim {claim_id}: figure: {e}") from None


def _drawn(d: dict[str, Any]) -> dict[str, Any]:
    """A claim whose ``figure:`` is a mapping: the mapping as its :class:`Figure`, the link to
    the PNG drawn from it as ``figure``; ``table:`` kept as its spec."""
    out = dict(d)
    if isinstance(d.get("figure"), dict):
        out["figure_spec"] = _figure(d.get("id"), d["figure"])
        out["figure"] = f"reproduction/figures/{d.get('id')}.png"
    if "table" in d:
        out["table_spec"] = out.pop("table")
        out.setdefault("figure", f"reproduction/tables/{d.get('id')}.md")
    return out


def claim(d: dict[str, Any], origin: str = "", file: str = "") -> Claim:
    """The typed claim of one checked declaration (``origin``: its file and line, said in its
    errors; ``file``: the claims file's path)."""
    d = _drawn(d)
    at = f"{origin}: " if origin else ""
    require(
        bool(d.get("tests")) or not d.get("ran"),
        f"{at}claim {d.get('id')!r} declares runs but no test",
    )
    require(
        not d.get("tests") or any(t.get("role", "primary") == "primary" for t in d["tests"]),
        f"{at}claim {d.get('id')!r} has no primary test (one decides its word)",
    )
    flags = {k: True for k in ("no_seeds", "per_round") if d.get(k)}
    try:
        return Claim(
            **{
                **d,
                "paper_runs": _runset(d["paper_runs"]) if d.get("paper_runs") else None,
                "ran": tuple(map(_runset, d.get("ran", ()))),
                "tests": tuple(_test({**flags, **t}) for t in d.get("tests", ())),
                "origin": origin,
                "file": file,
            },
        )
    except TypeError as e:
        raise UserError(f"{at}claim {d.get('id')!r}: {e}") from None


def stand_ins() -> dict[str, str]:
    """Each stand-in dataset's facts (size, split, what it stands for), from ``stand_ins.yaml``;
    every run set's data with a ``stands_for`` must have an entry (loading refuses otherwise;
    a claims folder's own ``stand_ins.yaml`` adds entries, :mod:`.sources`)."""
    facts: dict[str, str] = yaml.safe_load(
        resources.files(__package__).joinpath("stand_ins.yaml").read_text()
    )
    return facts


def _measurement(rs: RunSet, t: Test) -> Measurement:
    """What a primary test measures: its runs' folders and settings, and the number it reads."""
    return (
        tuple(sorted(rs.folders or (rs.bench or t.file,))),
        t.kind,
        t.metric,
        t.key,
        t.at,
        tuple(sorted(map(str, t.values))),
        str(t.base),
        tuple(sorted((k, str(v)) for k, v in {**rs.where, **t.where}.items())),
    )


def shared(claims: list[Claim]) -> list[Claim]:
    """The claims, each test declared ``same_as`` an earlier claim given that claim's test of
    the same measurement's exemptions; a measurement two claims test without ``same_as`` (two
    words for one measurement) is an error in the declarations."""
    seen: dict[Measurement, tuple[Claim, Test]] = {}
    out: list[Claim] = []
    for c in claims:
        tests = []
        for t in c.tests:
            keys = [_measurement(rs, t) for rs in c.ran if t.role == "primary"]
            owner = next((seen[k] for k in keys if k in seen and seen[k][0] is not c), None)
            require(
                owner is None or t.same_as == owner[0].id,
                f"{c.origin}: claim {c.id}: a test of {t.metric} reads the same measurement "
                f"as claim {owner[0].id if owner else ''}'s; declare it same_as: that claim "
                "(one word)",
            )
            if t.same_as:
                if owner is None:
                    raise UserError(
                        f"{c.origin}: claim {c.id}: same_as {t.same_as}, which has no "
                        f"primary test of the same measurement before it"
                    )
                t = replace(t, no_seeds=owner[1].no_seeds, per_round=owner[1].per_round)
            for k in keys:
                seen.setdefault(k, (c, t))
            tests.append(t)
        out.append(replace(c, tests=tuple(tests), ran=c.ran + _devices(c, tests, out)))
    return out


def _devices(c: Claim, tests: list[Test], earlier: list[Claim]) -> tuple[RunSet, ...]:
    """The measurements on other devices (benchmark run sets) of the claims ``c``'s tests are
    ``same_as``, which ``c`` does not declare itself: a same_as claim reads every device its
    source reads."""
    have = {rs.device for rs in c.ran}
    sources = {t.same_as for t in tests if t.same_as}
    found = [
        rs for o in earlier if o.id in sources for rs in o.ran if rs.bench and rs.device not in have
    ]
    return tuple({repr(rs): rs for rs in found}.values())


def select(claims: list[Claim], ids: Sequence[str]) -> list[Claim]:
    """The claims named by ``ids`` (all for none); an unknown id is a user error."""
    known = {c.id: c for c in claims}
    for i in ids:
        require(i in known, f"unknown claim {i!r} (fedrun-reproduce list shows them)")
    return [known[i] for i in ids] if ids else claims
