"""Sweeps on Ray (``hydra/launcher=ray``): hydra-ray-launcher's ``ray`` launcher, which sends
each job to Ray as a task (``ray.remote`` with the job's share: ``num_gpus``, ``num_cpus``), on
a Ray it starts on this machine (``hydra.launcher.ray.init.address=null``) or on a running
cluster (``address=auto`` on one of its nodes, ``ray://head:10001`` from elsewhere). Ray places
the jobs: fractional GPUs (``num_gpus=0.5``: two jobs per GPU), a slot freed when a job ends, and
``CUDA_VISIBLE_DEVICES`` set for each task to the GPU(s) it was given, so ``device=auto`` is
``cuda:0`` of what the job sees (:func:`fedprox_cli.engine.device.resolve_device`); Ray runs
each GPU task in a fresh worker process (``max_calls=1``), so no CUDA context outlives its job.

What this module adds to the plugin's launch (its ``_launcher_util`` does the submitting):

- The launching process never raises for a job: every task is waited for; a job whose worker
  died (killed, out of memory, its node lost) is handed to the sweeper as NaN and recorded with
  Ray's word for it (:func:`launchers.lost_job`), so the sweep's report lists it and a re-run of
  the sweep resumes its run from its checkpoint. Ray does not retry a job
  (``max_retries: 0`` in conf/hydra/launcher/ray.yaml; a retried job would resume too).
- A stop reaches every job: Ctrl-C in the launching process, or a job that was interrupted,
  writes a stop file in the sweep folder (``.fedrun/stopped-<launch>``) that every running job
  watches (:class:`Placed`: it then stops after its round with a checkpoint) and a job read as
  it starts (it does not start), and cancels the jobs Ray has not started; then the sweep ends
  interrupted, as with the other launchers. The sweep folder is on a file system the jobs
  share, as on SLURM.
- ``num_gpus: auto`` asks for one GPU per job where Ray has GPUs, none where it has none; a job
  with ``device=cpu`` asks for no GPU. The jobs get the sweep's launch id (their job records)
  and ``FEDRUN_PLACED_BY=ray`` (their summaries' ``hardware.placed_by``) whatever the worker's
  environment, and an absolute sweep folder (workers of a cluster start elsewhere).
- A Ray started here is kept for the next launch of the same fedrun process (an Optuna
  sweeper's next batch) and restarted when the next launch asks for another one.
- Output: fedrun prints each job's lines itself (:mod:`fedprox_cli.cli.watch`), so
  conf/hydra/launcher/ray.yaml has Ray forward no worker output and only its warnings; a Ray
  started here says nothing of its token authentication (:func:`no_auth_notice`), and lines Ray
  does forward come plain where fedrun's output is not a terminal (:func:`output_settings`).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, configure_log, filter_overrides, setup_globals
from omegaconf import DictConfig, OmegaConf, open_dict

from ..analysis.jobrecords import LAUNCH
from ..common import streams
from ..common.containers import as_dict
from ..common.errors import UserError
from .launchers import job_folder, lost_job

if TYPE_CHECKING:
    from ray import ObjectRef

    Launched = tuple[ObjectRef[JobReturn], list[str], int, Path | None, Path]
    """A job on Ray: its result's reference, overrides, number, folder, and started mark."""
    from hydra.types import HydraContext, TaskFunction

log = logging.getLogger(__name__)

WATCH_S = 1.0  # how often a running job looks for the sweep's stop file
OBJECT_STORE_BYTES = (
    78_643_200  # a Ray started here: the plugin's 75 MB (jobs pass configs, not tensors)
)
LOCAL_ONLY = ("num_cpus", "num_gpus", "resources", "object_store_memory", "include_dashboard")
_started: dict[str, Any] | None = (
    None  # the ray.init arguments of the Ray this process started, while it runs
)


class Placed:
    """The job function as a Ray task runs it: the launch's environment first; no job once the
    sweep was stopped (the file ``stop`` exists); ``started`` written as the job begins; and,
    while it runs, a watch on ``stop`` that sends the job SIGTERM when it appears, which fedrun
    takes as a stop after the current round (``ray.cancel`` does not reliably reach a running
    task, and its ``KeyboardInterrupt`` would not reach one on another node any better)."""

    def __init__(self, task_function: TaskFunction, env: dict[str, str], stop: str, started: str):
        self.task_function, self.env, self.stop, self.started = task_function, env, stop, started

    def __call__(self, cfg: DictConfig) -> Any:  # the task function's result
        if os.path.exists(self.stop):
            raise KeyboardInterrupt
        Path(self.started).touch()
        os.environ.update(self.env)
        done = threading.Event()
        threading.Thread(target=_watch, args=(self.stop, done), daemon=True).start()
        try:
            return self.task_function(cfg)
        finally:
            done.set()


def _watch(stop: str, done: threading.Event) -> None:
    while not done.wait(WATCH_S):
        if os.path.exists(stop):
            os.kill(os.getpid(), signal.SIGTERM)
            return


def marks(sweep_dir: Path, launch: str, num: int) -> tuple[Path, Path]:
    """The files that say a launch of a sweep was stopped, and that its job ``num`` started
    (:class:`Placed`), in the sweep's ``.fedrun/``."""
    folder = sweep_dir / ".fedrun"
    return folder / f"stopped-{launch}", folder / f"started-{launch}-{num}"


def _plain(node: Any) -> dict[str, Any]:
    return as_dict(node, resolve=True) if isinstance(node, DictConfig) else dict(node or {})


def init_args(init: Any) -> dict[str, Any]:
    """``ray.init``'s arguments from ``hydra.launcher.ray.init`` (null values left out): a Ray
    started here gets a small object store and no dashboard unless set; resources are declared
    only for a Ray started here (a running cluster's are its own)."""
    args = {k: v for k, v in _plain(init).items() if v is not None}
    if args.get("address"):
        given = [
            k for k in ("num_cpus", "num_gpus", "resources", "object_store_memory") if k in args
        ]
        if given:
            raise UserError(
                f"hydra.launcher.ray.init.{given[0]} declares a resource of a Ray started "
                f"here; a running cluster (address={args['address']}) has its own: leave it null"
            )
        return {k: v for k, v in args.items() if k not in LOCAL_ONLY}
    # "local": a Ray of its own even where `ray start` left one running here (ray.init() would join
    # it)
    return {
        "object_store_memory": OBJECT_STORE_BYTES,
        "include_dashboard": False,
        **args,
        "address": "local",
    }


def output_settings(terminal: bool) -> dict[str, str]:
    """The environment Ray reads its output settings from (at its import), where fedrun's
    stdout and stderr are a ``terminal`` or not (a file, a pipe, a cluster log): there, the
    lines Ray forwards from its workers (``hydra.launcher.ray.init.log_to_driver=true``; fedrun
    prints each job's own lines itself, :mod:`fedprox_cli.cli.watch`) come without colour codes
    (``RAY_COLOR_PREFIX=0``) and each one as written, never folded into ``[repeated 3x]``
    (``RAY_DEDUP_LOGS=0``)."""
    return {} if terminal else {"RAY_COLOR_PREFIX": "0", "RAY_DEDUP_LOGS": "0"}


def plain_output() -> None:
    """Set :func:`output_settings` for this process and the Ray it starts; a value the user set
    is kept."""
    for key, value in output_settings(sys.stdout.isatty() and sys.stderr.isatty()).items():
        os.environ.setdefault(key, value)


# Ray's logger of its notice that a Ray started here uses token authentication (its default,
# RAY_AUTH_MODE unset): fedrun's own Ray, reached by fedrun alone, says nothing of it
AUTH_NOTICE = "ray._private.authentication.authentication_token_setup"


@contextmanager
def no_auth_notice(local: bool) -> Iterator[None]:
    """Inside the block, Ray's token-authentication notices (:data:`AUTH_NOTICE`) are not
    printed for a Ray started here (``local``); its errors are."""
    notices = logging.getLogger(AUTH_NOTICE)
    before = notices.level
    if local:
        notices.setLevel(logging.ERROR)
    try:
        yield
    finally:
        notices.setLevel(before)


def start(args: dict[str, Any]) -> float:
    """Start Ray with ``args`` (or connect to the cluster they name), unless this process
    already started the same; the seconds it took."""
    plain_output()  # before Ray reads its settings (at its import)
    import ray

    global _started
    if ray.is_initialized() and _started == args:
        return 0.0
    if ray.is_initialized():
        ray.shutdown()
    began = time.perf_counter()
    try:
        with no_auth_notice(args.get("address") == "local"):
            ray.init(**args)
    except (ConnectionError, ValueError, RuntimeError, TypeError) as e:
        _started = None
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(
            f"Ray did not start with {args} (hydra.launcher.ray.init): {first}"
        ) from None
    _started = dict(args)
    return time.perf_counter() - began


def remote_options(remote: Any, job_cfg: DictConfig, gpus_here: float) -> dict[str, Any]:
    """The ``ray.remote`` options of one job: ``hydra.launcher.ray.remote`` with ``num_gpus:
    auto`` made 1 where Ray has GPUs (``gpus_here``) and 0 where not, and 0 for ``device=cpu``."""
    opts = {k: v for k, v in _plain(remote).items() if v is not None}
    if opts.get("num_gpus") == "auto":
        opts["num_gpus"] = 1 if gpus_here > 0 else 0
    if str(job_cfg.get("device")) == "cpu":
        opts["num_gpus"] = 0
    return opts


def _why(error: BaseException) -> str:
    """Ray's word for a job's end: what the task raised (a ``RayTaskError``'s cause), else the
    error's first line."""
    error = getattr(error, "cause", None) or error
    first = next((ln.strip() for ln in str(error).splitlines() if ln.strip()), "")
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


class RaySide:
    """Mixed into hydra-ray-launcher's ``RayLauncher`` (hydra_plugins/fedprox_cli_launchers)."""

    # the RayLauncher's, set up by Hydra before it launches
    config: DictConfig
    hydra_context: HydraContext
    task_function: TaskFunction
    ray_cfg: Any  # the plugin's RayConfig, a DictConfig at run time

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        import ray
        from hydra_plugins.hydra_ray_launcher._launcher_util import launch_job_on_ray

        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        sweep_dir = Path(os.path.abspath(str(self.config.hydra.sweep.dir)))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        args = init_args(self.ray_cfg.init)
        took = start(args)
        if took:
            local = args["address"] == "local"
            log.info(
                f"Ray {'started' if local else 'connected to ' + str(args['address'])} "
                f"in {took:.1f} s"
            )
        from ..engine.device import PLACED_BY  # torch: not when Hydra scans the launcher plugins

        gpus_here = float(ray.cluster_resources().get("GPU", 0))  # type: ignore[no-untyped-call]
        env = {PLACED_BY: "ray", LAUNCH: os.environ.get(LAUNCH, "")}
        launch = env[LAUNCH] or str(time.time_ns())
        (sweep_dir / ".fedrun").mkdir(exist_ok=True)
        jobs: list[Launched] = []
        submitted = time.time()
        for num, overrides in enumerate(job_overrides, start=initial_job_idx):
            cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
            with open_dict(cfg):
                cfg.hydra.job.id, cfg.hydra.job.num = f"job_id_for_{num}", num
                cfg.hydra.sweep.dir = str(sweep_dir)
            opts = remote_options(self.ray_cfg.remote, cfg, gpus_here)
            log.info(f"\t#{num} : {' '.join(filter_overrides(overrides))} ({opts})")
            stop, started = marks(sweep_dir, launch, num)
            ref = launch_job_on_ray(
                self.hydra_context,
                OmegaConf.create(opts),
                cfg,
                Placed(self.task_function, env, str(stop), str(started)),
                Singleton.get_state(),
            )
            jobs.append((ref, list(overrides), num, job_folder(cfg), started))
        try:
            return self._collect(jobs, sweep_dir, submitted, marks(sweep_dir, launch, 0)[0])
        finally:
            for *_, started in jobs:
                started.unlink(missing_ok=True)

    def _collect(
        self, jobs: list[Launched], sweep_dir: Path, submitted: float, stop: Path
    ) -> list[JobReturn]:
        """Wait for every job (``(ref, overrides, num, folder, started)``); a stop (Ctrl-C
        here, an interrupted job) stops the others (:meth:`_stop`)."""
        import ray

        results: dict[Any, JobReturn] = {}
        pending = {job[0]: job[1:] for job in jobs}
        stopped = False
        while pending:
            try:
                done, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            except KeyboardInterrupt:
                if stopped:
                    raise
                stopped = self._stop(pending, "Ctrl-C", stop)
                continue
            for ref in done:
                overrides, num, folder, _ = pending.pop(ref)
                try:
                    results[ref] = ray.get(ref)
                except (
                    ray.exceptions.TaskCancelledError
                ):  # the job was stopped, or stopped the sweep
                    results[ref] = lost_job(
                        None, overrides, num, sweep_dir, "stopped", submitted, f"job {num}"
                    )
                    stopped = stopped or self._stop(pending, f"job {num} was interrupted", stop)
                except ray.exceptions.RayError as e:  # its worker or node died: Ray's word for it
                    results[ref] = lost_job(
                        folder,
                        overrides,
                        num,
                        sweep_dir,
                        f"ended without a result (Ray: {_why(e)})",
                        submitted,
                        f"job {num}",
                    )
        if stopped:
            raise KeyboardInterrupt
        return [results[ref] for ref, *_ in jobs]

    @staticmethod
    def _stop(
        pending: dict[ObjectRef[JobReturn], tuple[list[str], int, Path | None, Path]],
        why: str,
        stop: Path,
    ) -> bool:
        """Stop the ``pending`` jobs (``why``: what stopped the sweep): the stop file, which the
        running jobs watch and the others read as they start, then a cancel for each job not
        started yet (so that Ray drops it from its queue)."""
        import ray

        if pending:
            streams.err(
                f"fedrun: {why}: stopping the sweep's {len(pending)} unfinished job"
                f"{'s' if len(pending) != 1 else ''} (running ones save a checkpoint; "
                f"re-running the sweep resumes them)"
            )
        try:
            stop.touch()
        except OSError:  # the cancels still drop the queued jobs
            pass
        for ref, (*_, started) in pending.items():
            if not started.exists():
                ray.cancel(ref)
        return True
