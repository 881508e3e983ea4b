"""The Python API for notebooks: :func:`run` one config, :func:`load_runs` a folder of results.

``run`` composes the config as ``fedrun`` does (the dry run's compose path,
:func:`config.jobs.jobs`), validates it once against the same reference config
(:func:`runner.validated`, raising on bad input), and hands the validated runs to
:func:`runner.run` -- the same folder, files, resume and exit codes as the command line.
``load_runs`` reads every run folder under a folder with :func:`.analysis.results.load`.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from .common import run_files
from .common.errors import EXIT
from .common.package import CONF_DIR
from .common.streams import escaped
from .config.forms import Composed
from .runs import view

_STATUS = {code: status for status, code in EXIT.items()}
_PLAIN = re.compile(r"^[\w.:/+-]+$")  # a string Hydra's override grammar takes unquoted


@dataclass
class Run:
    """A run made by :func:`run`. With ``seeds=R``, ``metrics`` stacks the ``seed_<s>/`` runs
    (a ``seed`` column first) and ``summary`` maps each seed to its summary."""

    folder: Path
    status: str  # finished | diverged | error | internal | interrupted (the exit code's name)
    exit_code: int
    summary: run_files.SummaryRecord | dict[int, run_files.SummaryRecord]  # summary.json(s)
    metrics: pd.DataFrame  # metrics.csv as numbers (empty if the run wrote none)


def _value(v: object) -> str:
    """A Python value as Hydra's override grammar reads it."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, str):
        return v if _PLAIN.match(v) else "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(map(_value, v)) + "]"
    return repr(v)


def overrides_of(config: dict[str, Any] | list[str] | tuple[str, ...]) -> list[str]:
    """Command-line overrides from a list (as typed after ``fedrun``) or a dict of dotted keys
    (``{"dataset": "digits", "algorithm.beta": 0.01}``)."""
    if isinstance(config, dict):
        return [f"{k}={_value(v)}" for k, v in config.items()]
    return list(config)


def _result(folder: Path, code: int) -> Run:
    """The :class:`Run` of a finished call of :func:`runner.run` into ``folder``, made from the
    views of the runs it wrote (:mod:`.runs.view`)."""
    runs = [view.read(f) for f in view.runs_in(folder)]
    status = _STATUS.get(code, "error")
    if [r.path for r in runs] in ([], [folder]):  # one run (or none written)
        summary = runs[0].summary if runs else {}
        return Run(folder, status, code, summary, view.read(folder).metrics(strict=False))
    seeds = [int(r.path.name.removeprefix(run_files.SEED_PREFIX)) for r in runs]
    metrics = pd.concat(
        [r.metrics(strict=False).assign(seed=s) for s, r in zip(seeds, runs)], ignore_index=True
    )
    metrics = metrics[["seed", *[c for c in metrics.columns if c != "seed"]]]
    return Run(folder, status, code, {s: r.summary for s, r in zip(seeds, runs)}, metrics)


def _default_folder(composed: Composed) -> Path:
    """fedrun's run-folder pattern (``hydra.run.dir`` of conf/config.yaml) resolved for
    ``composed``."""
    pattern = OmegaConf.load(CONF_DIR / "config.yaml").hydra.run
    node = OmegaConf.merge(
        {"hydra": {"run": OmegaConf.to_container(pattern, resolve=False)}}, composed
    )
    return Path(str(node.hydra.run.dir))


def run(
    config: list[str] | tuple[str, ...] | dict[str, Any] | Composed = (),
    folder: str | os.PathLike[str] | None = None,
    progress: bool = False,
) -> Run:
    """Run one config into ``folder`` and return its :class:`Run`, e.g.
    ``run(["dataset=digits", "T=5"])`` or ``run({"dataset": "digits", "T": 5})``.

    ``config``: ``fedrun``'s overrides (a list as typed, or a dict of dotted keys), composed
    and checked as ``fedrun`` composes and checks them; or a whole composed config (a
    ``DictConfig``, e.g. :func:`fedprox_cli.config.compose.compose` or a run's ``config.yaml``), run
    as it is. ``folder``: the run folder (default: fedrun's, ``results/runs/<time>_...`` under
    the current folder); a finished run there with the same config is not run again, a
    stopped one is resumed (as ``fedrun`` does). Bad input raises :class:`UserError` (or
    Hydra's error) before anything is written; a run that fails later returns its status."""
    from .config import resolvers

    resolvers.register()
    if isinstance(config, DictConfig):
        return _run_composed(config, folder, progress)
    return _run_overrides(overrides_of(config), folder, progress)


def _run_composed(config: Composed, folder: str | os.PathLike[str] | None, progress: bool) -> Run:
    """:func:`run` of a whole composed config, as it is."""
    from .analysis import run_figures
    from .runs import runner

    composed = OmegaConf.masked_copy(config, [str(k) for k in config if k != "hydra"])
    out = Path(folder) if folder is not None else _default_folder(composed)
    runs = runner.validated(composed)  # bad input raises here, before anything is written
    code = runner.run(
        runs, out, progress=progress, command="fedprox_cli.run(config)", plot=run_figures.draw
    )
    return _result(out, code)


def _run_overrides(given: list[str], folder: str | os.PathLike[str] | None, progress: bool) -> Run:
    """:func:`run` of ``fedrun``'s overrides, composed and checked as ``fedrun`` does."""
    from hydra import initialize_config_dir
    from hydra.core.hydra_config import HydraConfig

    from .analysis import run_figures
    from .config import plugin_defaults
    from .config.compose import hydra_files, reference_for
    from .config.jobs import jobs
    from .runs import runner

    overrides = list(given)
    plugin_defaults.store(overrides)
    if folder is not None:
        overrides.append(f"hydra.run.dir={_value(str(folder))}")
    with initialize_config_dir(str(CONF_DIR), version_base="1.3", job_name="fedrun"):
        job = next(jobs(overrides, multirun=False))
        hc = HydraConfig.get()
        reference = reference_for(job.cfg, job.choices, overrides)
        runs = runner.validated(job.cfg, reference)  # bad input raises here
        code = runner.run(
            runs,
            job.folder,
            progress=progress,
            command=f"fedprox_cli.run({given!r})",
            hydra_record=hydra_files(job.cfg, hc),
            plot=run_figures.draw,
        )
    return _result(job.folder, code)


def load_runs(folder: str | os.PathLike[str]) -> pd.DataFrame:
    """Every run under ``folder`` (runs, sweeps, the ``seed_<s>/`` runs of ``seeds=R``), one
    row each: ``folder``, ``status``, the run's flattened config keys (``algorithm.name``,
    ``K``, ...; ``choice:<group>`` for the config-group options chosen) and the final row of
    its ``metrics.csv``. A folder that cannot be read is skipped with a warning naming it."""
    from .analysis.results import load

    runs = load([folder], warn=warnings.warn, count_once=False)  # every folder, as listed
    rows = [
        {"folder": str(r.path), "status": r.status, **r.config, **r.metrics.iloc[-1].to_dict()}
        for r in runs
    ]
    return _frame(rows)


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """``rows`` as a DataFrame; a column holding text that is no Unicode (a folder name's
    undecodable bytes, which pandas' string dtype cannot hold) is kept as Python strings."""
    odd = {k for r in rows for k, v in r.items() if isinstance(v, str) and escaped(v) != v}
    frame = pd.DataFrame([{k: v for k, v in r.items() if k not in odd} for r in rows])
    for k in odd:
        frame[k] = pd.Series([r.get(k) for r in rows], dtype=object, index=frame.index)
    return frame[list(dict.fromkeys(k for r in rows for k in r))] if rows else frame


__all__ = ["Run", "run", "load_runs", "overrides_of"]
