"""Sweeps on SLURM (and locally) through submitit: Hydra launchers that survive preemption and
time limits, and the number a job hands back to a sweeper.

The launchers (``hydra/launcher=slurm`` and ``local``, conf/hydra/launcher/; their classes are
in hydra_plugins/fedprox_cli_launchers/ because Hydra loads plugins from there only) are
Hydra's submitit launchers with two changes:

- Inside a job, SIGUSR2 (what submitit asks SLURM to send ``signal_delay_s`` before the time
  limit, and what clusters send on preemption) and SIGTERM (``scancel``, ``scontrol requeue``,
  preemption with requeue, the time limit itself) stop training after the current round with a
  checkpoint and status ``interrupted`` (:mod:`signals`). Then, after SIGUSR2, submitit's own
  protocol takes over: the launcher's ``checkpoint()`` hands back the same job, which is
  requeued (at most ``max_num_timeout`` times for time limits) and, re-run into the same
  folder, continues from ``checkpoint.pt``. After SIGTERM the job exits without a result, so
  whatever SLURM does next decides: a requeued job runs again and resumes, a cancelled or
  timed-out one is reported. No ``KeyboardInterrupt`` leaves a job.
- The launching process never raises for a job that died (cancelled, killed, out of time,
  node failure, a signal before Python could catch it): it waits on SLURM's own record
  (``squeue``; ``sacct`` is not needed), hands the sweeper a NaN and, where the job left no
  record of its end, records the scheduler's word for it (:func:`jobrecords.lost`), so the sweep
  report lists it with why and where its log is.

A SLURM time limit must leave room before its warning, or the warning may kill a job that is
still starting (:func:`fedprox_cli.config.slurm.check_time_limit`).
"""

from __future__ import annotations

import logging
import math
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from omegaconf import DictConfig, OmegaConf, open_dict

from ..analysis import jobrecords
from ..common import metric_table as mt
from ..common import signals, streams
from ..common.errors import UserError

if TYPE_CHECKING:
    from hydra.types import HydraContext
    from submitit import Job

log = logging.getLogger(__name__)

# SLURM job states after which a job will not run again (squeue --states=all).
ENDED = {
    "BOOT_FAIL",
    "CANCELLED",
    "COMPLETED",
    "DEADLINE",
    "FAILED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "TIMEOUT",
    "SPECIAL_EXIT",
    "REVOKED",
}
POLL_S = 2.0


def _stop_signals() -> tuple[int, ...]:
    return tuple(s for s in (getattr(signal, "SIGUSR2", None), signal.SIGTERM) if s is not None)


class _JobSide:
    """What runs inside the job (submitit calls the pickled launcher)."""

    def __call__(
        self,
        sweep_overrides: list[str],
        job_dir_key: str,
        job_num: int,
        job_id: str,
        singleton_state: dict[type, Singleton],
    ) -> JobReturn | None:
        submitit_handlers = {s: signal.getsignal(s) for s in _stop_signals()}
        signals.received.clear()
        for s in submitit_handlers:  # before and after training; during it, StopAfterRound's
            signal.signal(s, signals.note_and_interrupt)
        ret: JobReturn | None
        try:
            ret = super().__call__(  # type: ignore[misc]  # a mixin: the submitit launcher's
                sweep_overrides, job_dir_key, job_num, job_id, singleton_state
            )
        except KeyboardInterrupt:  # the run itself has recorded "interrupted"
            ret = None
        finally:
            for s, h in submitit_handlers.items():
                signal.signal(s, h)
        if signals.received:
            first = signals.received[0]
            usr2 = getattr(signal, "SIGUSR2", None)
            handler = submitit_handlers.get(first)
            if first == usr2 and callable(handler):
                # submitit: checkpoint() (below) -> requeue -> exit, or an error result when the
                # job ran out of requeues (max_num_timeout)
                handler(first, None)
            streams.err(
                f"fedrun: job {job_num}: stopped by {signal.Signals(first).name}; SLURM decides "
                "what follows (a requeued job resumes from its checkpoint)"
            )
            raise SystemExit(128 + first)  # no result file: the launcher goes by SLURM's state
        return ret


class _LaunchSide:
    """What runs in the launching process: submit, wait, collect without raising."""

    # Hydra's submitit launcher, which this class is mixed into, has these (set up by Hydra)
    _EXECUTOR: ClassVar[str]
    params: dict[str, Any]
    config: DictConfig
    hydra_context: HydraContext

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        import submitit
        from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf

        params = dict(self.params)
        init = {"folder": params.pop("submitit_folder")}
        if "max_num_timeout" in params:
            init[f"{self._EXECUTOR}_max_num_timeout"] = params.pop("max_num_timeout")
        executor = submitit.AutoExecutor(cluster=self._EXECUTOR, **init)
        base = set(OmegaConf.structured(BaseQueueConf).keys())
        executor.update_parameters(
            **{k if k in base else f"{self._EXECUTOR}_{k}": v for k, v in params.items()}
        )
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        log.info(f"Submitit '{self._EXECUTOR}' sweep output dir : {sweep_dir}")
        args = []
        for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
            log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
            args.append(
                (
                    list(overrides),
                    "hydra.sweep.dir",
                    idx,
                    f"job_id_for_{idx}",
                    Singleton.get_state(),
                )
            )
        submitted = time.time()
        try:
            jobs: list[submitit.Job[Any]] = executor.map_array(
                self,  # type: ignore[arg-type]  # the job's callable: _JobSide.__call__
                *zip(*args),
            )
        except (submitit.core.utils.FailedJobError, OSError, subprocess.SubprocessError) as e:
            lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
            raise UserError(
                f"{self._EXECUTOR} did not take the sweep's jobs: "
                f"{lines[-1] if lines else type(e).__name__} (hydra.launcher.* sets what "
                f"they ask for; conf/hydra/launcher/{self._EXECUTOR}.yaml)"
            ) from None
        log.info("submitted %s", ", ".join(j.job_id for j in jobs))
        try:
            self._wait(jobs)
        except KeyboardInterrupt:
            if self._EXECUTOR == "slurm":
                streams.err(
                    f"fedrun: stopped waiting; jobs still queued or running keep going "
                    f"(scancel {' '.join(sorted({j.job_id.split('_')[0] for j in jobs}))}); "
                    f"`fedrun-report {sweep_dir}` shows where they are"
                )
            raise
        return [self._outcome(j, a[0], a[2], sweep_dir, submitted) for j, a in zip(jobs, args)]

    def _wait(self, jobs: list[Job[Any]]) -> None:
        pending = list(jobs)
        while pending:
            states = self._states(pending)
            pending = [
                j
                for j in pending
                if not (
                    j.paths.result_pickle.exists()
                    or (states is not None and self._ended(j, states))
                )
            ]
            if pending:
                time.sleep(POLL_S)

    def _states(self, jobs: list[Job[Any]]) -> dict[str, str] | None:
        """Job states from the scheduler, None when it did not answer."""
        return {}

    def _ended(self, job: Job[Any], states: dict[str, str]) -> bool:
        return bool(job.done())

    def _outcome(
        self, job: Job[Any], overrides: list[str], num: int, sweep_dir: Path, submitted: float
    ) -> JobReturn:
        why = ""
        if job.paths.result_pickle.exists():
            try:
                ret: JobReturn = job.results()[0]
                if ret.status != JobStatus.FAILED:
                    return ret
                e = ret._return_value  # what the task raised; a sweeper would re-raise it
                why = f"{type(e).__name__}: {e}"
            except Exception as e:  # the job's own error (a bug: fedrun handles its errors)
                why = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        else:
            log_file = Path(job.paths.stderr)
            shown = (
                log_file.relative_to(sweep_dir) if log_file.is_relative_to(sweep_dir) else log_file
            )
            why = f"ended without a result ({self._state_now(job)}its log: {shown})"
        return lost_job(
            self._folder(overrides, num),
            overrides,
            num,
            sweep_dir,
            why,
            submitted,
            f"job {job.job_id}",
        )

    def _folder(self, overrides: list[str], num: int) -> Path | None:
        """The job's folder, composed as the job composes it (Hydra's submitit launcher:
        the sweep's config, then the job's overrides)."""
        try:
            cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        except Exception:  # noqa: BLE001 -- a job that cannot be composed reported that itself
            return None
        with open_dict(cfg):
            cfg.hydra.job.num = num
        return job_folder(cfg)

    def _state_now(self, job: Job[Any]) -> str:
        """What the scheduler says of a job that ended, as ``"... ; "`` or ``""`` (submitit's
        local state says FINISHED for a killed job: nothing)."""
        return ""


def job_folder(cfg: Any) -> Path | None:
    """The folder of the sweep job whose composed config is ``cfg`` (``hydra.sweep.dir`` /
    ``hydra.sweep.subdir``, resolved as the job resolves them), absolute; None where that fails
    (the job's own error then says why)."""
    from hydra.core.hydra_config import HydraConfig

    saved = HydraConfig.instance().cfg
    try:
        HydraConfig.instance().set_config(cfg)
        return Path(os.path.abspath(Path(str(cfg.hydra.sweep.dir)) / str(cfg.hydra.sweep.subdir)))
    except Exception:  # noqa: BLE001 -- a job that cannot be composed reported that itself
        return None
    finally:
        HydraConfig.instance().cfg = saved


def lost_job(
    folder: Path | None,
    overrides: list[str],
    num: int,
    sweep_dir: Path,
    why: str,
    submitted: float,
    name: str,
) -> JobReturn:
    """What a launcher hands the sweeper for job ``num`` (``name`` in the log line), which
    ended without a result for reason ``why``: a NaN (a sweeper's "no value"; Optuna: a failed
    trial), and, where the job left no record of its end, :func:`jobrecords.lost` with ``why``,
    so the sweep's report lists it."""
    log.warning(f"{name} ({' '.join(filter_overrides(overrides))}): {why}")
    if folder is not None:
        jobrecords.lost(
            sweep_dir,
            jobrecords.JobRecord(num, list(overrides), str(folder), reason=why),
            submitted,
        )
    ret = JobReturn(overrides=list(overrides), status=JobStatus.COMPLETED)
    ret.return_value = math.nan
    return ret


def _squeue(jobs: list[Job[Any]]) -> dict[str, str] | None:
    """``job id -> state`` for ``jobs`` as SLURM's controller knows them (array tasks one by
    one); jobs it has forgotten (MinJobAge after they ended) are absent; None when squeue
    did not answer (the controller restarting, say)."""
    ids = sorted({j.job_id.split("_")[0] for j in jobs})
    try:
        p = subprocess.run(
            ["squeue", "-h", "-r", "-t", "all", "-o", "%i|%T", "-j", ",".join(ids)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if p.returncode != 0 and "Invalid job id" not in p.stderr:  # all of them forgotten: an answer
        return None
    return dict(line.split("|", 1) for line in p.stdout.split() if "|" in line)


class SlurmSide(_JobSide, _LaunchSide):
    """``hydra/launcher=slurm`` (the class itself is in hydra_plugins/, where Hydra wants it)."""

    def _states(self, jobs: list[Job[Any]]) -> dict[str, str] | None:
        return _squeue(jobs)

    def _ended(self, job: Job[Any], states: dict[str, str]) -> bool:
        state = states.get(job.job_id)
        return state is None or state.split()[0] in ENDED  # None: the controller forgot it

    def _state_now(self, job: Job[Any]) -> str:
        state = (self._states([job]) or {}).get(job.job_id, "unknown: the controller forgot it")
        return f"SLURM state {state}; "


class LocalSide(_JobSide, _LaunchSide):
    """``hydra/launcher=local``: the same jobs as processes on this machine."""


def sweep_value(cfg: Any, out: Path, code: int, direction: Any = None) -> float:
    """The number a job hands to a Hydra sweeper: ``sweep_metric`` (default ``objective``) of
    the run's last metrics row, averaged over the runs of ``seeds=R``; for a diverged run the
    worst value (+inf when minimising, -inf when maximising); NaN when a run has no final row
    (interrupted, error)."""
    from ..runs import view

    metric = str(cfg.get("sweep_metric") or mt.OBJECTIVE.name)
    if isinstance(direction, Sequence) and not isinstance(
        direction, str
    ):  # multi-objective: the first
        direction = direction[0] if len(direction) else None
    direction = getattr(direction, "name", direction)  # Optuna's enum Direction.minimize
    if direction is None:
        direction = "minimize" if mt.metric(metric).lower_is_better else "maximize"
    direction = str(direction)
    if code == 1:
        return math.inf if direction.startswith("min") else -math.inf
    try:
        values = [float((view.read(run).final or {})[metric]) for run in view.runs_in(out)]
    except (ValueError, KeyError, TypeError):
        return math.nan
    return sum(values) / len(values) if values else math.nan
