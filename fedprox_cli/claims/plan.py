"""What is missing for each claim, as ``fedrun -m`` sweeps with an estimated cost: the declared
runs not made yet and the seeds up to the paper's count, into the claim's folder, and the runs
at the paper's own setting (its data, T and seeds). Costs come from the recorded summaries of the
runs present (job-minutes on the device they ran on), scaled by T for the paper's setting."""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .declare import Claim, Point, RunSet
from .evidence import Evidence
from .text import canon

if TYPE_CHECKING:
    from .verdict import Verdict

LAUNCHER = ("hydra/launcher=joblib", "hydra.launcher.n_jobs=2")


@dataclass
class Sweep:
    what: str  # "missing", "to the paper's seeds", "the paper's setting"
    args: list[str]  # fedrun -m arguments
    runs: int
    minutes: float | None
    basis: str  # where the cost comes from

    def command(self) -> str:
        return "fedrun -m " + " ".join(self.args)


def _own(overrides: Iterable[str], keys: Container[str]) -> list[str]:
    """``overrides`` without those setting ``keys`` (the sweep sets them)."""
    return [o for o in overrides if o.split("=", 1)[0] not in keys]


def _preset(rs: RunSet) -> list[str]:
    """``experiment=PRESET`` of a run set with a preset (none: its overrides say everything)."""
    return [f"experiment={rs.preset}"] if rs.preset else []


def _sweeps_of(
    rs: RunSet, missing: list[tuple[Point, int]], root: str, device: str
) -> list[tuple[list[str], int]]:
    """fedrun arguments covering exactly ``missing`` ((point, seed) pairs): seeds with the same
    missing points share a sweep; a whole grid is swept, single points one by one."""
    by_seed: dict[int, list[Point]] = {}
    for point, seed in missing:
        by_seed.setdefault(seed, []).append(point)
    groups: dict[tuple[Point, ...], list[int]] = {}
    for seed, at in by_seed.items():
        groups.setdefault(tuple(sorted(at)), []).append(seed)
    keys = {k for p in rs.points for k in p} | set(rs.grid) | {"seed", "seeds"}
    base = [
        *LAUNCHER,
        *_preset(rs),
        *_own(rs.overrides, keys),
        *([f"device={device}"] if device == "cuda" else []),
    ]
    whole = len(rs.declared()) // max(1, len(rs.seeds))
    out = []
    for points, seeds in groups.items():
        seed_arg = "seed=" + ",".join(map(str, sorted(seeds)))
        into = [f"hydra.sweep.dir={root}/{rs.into}"] if rs.into else []
        if len(points) == whole and not rs.points:
            sweep = [f"{k}=" + ",".join(canon(v) for v in vs) for k, vs in rs.grid.items()]
            out.append(([*base, *sweep, seed_arg, *into], len(points) * len(seeds)))
        else:
            for p in points:
                out.append(([*base, *(f"{k}={v}" for k, v in p), seed_arg, *into], len(seeds)))
    return out


def per_run(ev: Evidence | None) -> float | None:
    return ev.minutes / ev.present if ev is not None and ev.present and ev.minutes else None


def _here(claim: Claim, ev: Evidence, root: str, device: str) -> list[Sweep]:
    """The sweeps making a run set's missing runs and its seeds up to the paper's count."""
    rs = ev.runset
    minutes = per_run(ev)
    basis = (
        f"estimated from the {ev.present} runs here, timed on {', '.join(ev.devices) or 'cpu'}"
        if minutes
        else "no run here to estimate the time from"
    )
    out = [
        Sweep(f"missing runs on {rs.data}", args, n, minutes and minutes * n, basis)
        for args, n in _sweeps_of(rs, ev.missing, root, device)
    ]
    if claim.paper_seeds and len(rs.seeds) < claim.paper_seeds:
        extra = RunSet(**{**rs.__dict__, "seeds": tuple(range(len(rs.seeds), claim.paper_seeds))})
        what = f"to the paper's {claim.paper_seeds} seeds on {rs.data}"
        out += [
            Sweep(what, args, n, minutes and minutes * n, basis)
            for args, n in _sweeps_of(extra, extra.declared(), root, device)
        ]
    return out


def _paper(claim: Claim, pr: RunSet, evidence: list[Evidence], device: str) -> Sweep:
    """The sweep of the paper's own setting (``pr``: the claim's ``paper_runs``), its time
    scaled from the runs here by T."""
    first = next((ev for ev in evidence if ev.runset.folders and per_run(ev)), None)
    grid = pr.grid or (first.runset.grid if first else {})
    n = len(RunSet(**{**pr.__dict__, "grid": grid}).declared())
    minutes, basis = None, "no run here to estimate the time from"
    if first is not None:
        T = pr.T or claim.paper_T or first.T
        assert T is not None and first.T  # (first: a run set whose runs ran, and say their T)
        scale = T / first.T
        each = per_run(first)
        assert each is not None  # (first: the first run set with a time per run)
        minutes = each * n * scale
        basis = (
            f"estimated from the {first.runset.data} runs here, timed on "
            f"{', '.join(first.devices) or 'cpu'}, times {scale:g} for {T} rounds instead of "
            f"{first.T}"
            + ("; the paper's data may be larger" if first.runset.stands_for else "")
            + (
                "; no run here was timed on a GPU"
                if device == "cuda" and "cuda" not in first.devices
                else ""
            )
        )
    seeds = [f"seed={','.join(map(str, pr.seeds))}"] if len(pr.seeds) > 1 else []
    args = [*_preset(pr), *pr.overrides, *seeds, f"device={device}"]
    return Sweep(f"the paper's setting ({pr.data})", args, n, minutes, basis)


def sweeps(claim: Claim, evidence: list[Evidence], root: str, device: str) -> list[Sweep]:
    """The sweeps ``fedrun-reproduce run`` launches for ``claim`` (the runs here) and, last, the
    paper's setting."""
    out = [s for ev in evidence if ev.runset.folders for s in _here(claim, ev, root, device)]
    if claim.paper_runs is not None and not covered(claim, evidence):
        out.append(_paper(claim, claim.paper_runs, evidence, device))
    return out


def covered(claim: Claim, evidence: list[Evidence]) -> bool:
    """Whether the runs here are the paper's setting (its data, T and seeds) and complete."""
    return any(
        not ev.runset.stands_for
        and ev.runset.folders
        and ev.present == ev.declared
        and (not claim.paper_T or (ev.T or 0) >= claim.paper_T)
        and (not claim.paper_seeds or len(ev.seeds) >= claim.paper_seeds)
        for ev in evidence
    )


def duration(minutes: float) -> str:
    """``40 minutes``, ``3.5 hours``, ``2.1 days`` of computing."""
    if minutes < 90:
        return f"{max(minutes, 1):.0f} minute{'s' if round(minutes) != 1 else ''}"
    hours = minutes / 60
    return f"{hours:.1f} hours" if hours < 48 else f"{hours / 24:.1f} days"


def _same(value: str, want: object) -> bool:
    if isinstance(want, (list, tuple)):
        return any(_same(value, w) for w in want)
    try:
        return float(value) == float(want)  # type: ignore[arg-type]  # a YAML scalar
    except (TypeError, ValueError):
        return value == str(want)


def contradicts(claim: Claim, override: str, paper: bool = False) -> str | None:
    """What the ``KEY=VALUE`` override given to ``run`` contradicts among the settings the claim
    declares for its runs (the preset, its overrides, ``fixed``, T, the grid and seeds), in
    words; None when it sets none of them, or sets one to its declared value. A placeholder
    (``data.root=DIR``) is open."""
    key, _, value = override.partition("=")
    key = key.lstrip("+~")
    for rs in [claim.paper_runs] if paper else list(claim.ran):
        if rs is None:
            continue
        if key in rs.grid or key in ("seed", "seeds"):
            return f"its declared {key} (the sweep sets {key} for each of its runs)"
        declared = {
            "experiment": rs.preset or None,
            "T": rs.T,
            **rs.fixed,
            **dict(o.split("=", 1) for o in rs.overrides if "=" in o),
        }
        want = declared.get(key)
        if (
            want is not None
            and not (isinstance(want, str) and want.isupper())
            and not _same(value, want)
        ):
            return f"its declared setting {key}={want} (its runs on {rs.data})"
    return None


def text(claim: Claim, found: list[Sweep], verdict: Verdict | None = None) -> str:
    """The plan of ``claim``: each sweep with its runs, its time in plain words and its
    command; with nothing to run, why its word (``verdict``) is what it is."""
    lines = [f"{claim.id} ({claim.title}):"]
    if not found:
        word, why = getattr(verdict, "word", ""), getattr(verdict, "why", "")
        because = why or (
            "its tests decide it on the declared runs, all here (`fedrun-reproduce report` "
            "writes each test's numbers to REPRODUCTION.md)"
        )
        lines.append(
            "  nothing to run: every declared run is here"
            + (
                f"; its word stays {word!r} because {because}"
                if word and not word.startswith("reproduced") and word != "checked"
                else ""
            )
        )
    for s in found:
        cost = (
            f"about {duration(s.minutes)} of computing in all ({s.basis})" if s.minutes else s.basis
        )
        lines += [f"  {s.what}: {s.runs} runs, {cost}", f"    {s.command()}"]
    return "\n".join(lines)
