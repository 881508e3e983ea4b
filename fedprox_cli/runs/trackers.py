"""Experiment trackers (config group ``logger``): every metrics row, as it is evaluated, also
goes to TensorBoard, MLflow or Weights & Biases.

A tracker is any class named by ``_target_`` in a YAML file of conf/logger/ (Hydra
``instantiate``): it is built with the YAML's keys plus ``run_dir`` (the run folder, where
its files belong), ``run_id`` (the id it returned last time in this folder, or None for a new
series) and ``run_config`` (the resolved run config as a dict), and has ``log(metrics, step)``,
``close()`` and a ``run_id`` attribute (a string or None). Adding a tracker is one YAML file
and, for a new service, one such class.

Series and resume: :func:`open` keeps ``tracker.json`` in the run folder (tracker, run id,
last round logged). A run continued from its checkpoint continues the same series (same run
id, rounds already logged are skipped, so a round evaluated again after a kill is not logged
twice); a run started over from round 0 starts a new series (TensorBoard's old event files
are removed). The tracker is not part of the run's identity: changing ``logger`` between
attempts is not a config change (``checkpoint.RUN_CONTROL``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from omegaconf import OmegaConf

from ..common import metric_table as mt
from ..common import run_files
from ..common.errors import UserError
from ..common.files import StrPath, atomic_write_text, folder, remove
from ..config.forms import Plain


class Tracker(Protocol):
    """What a ``logger`` option's class is: a series (``run_id``, kept to continue it on
    resume) that logs metrics rows and is closed at the run's end."""

    run_id: str | None

    def log(self, metrics: dict[str, float], step: int) -> None: ...

    def close(self) -> None: ...


class Null:
    """``logger=none``: logs nothing."""

    run_id = None

    def __init__(self, **_: object):
        pass

    def log(self, metrics: dict[str, float], step: int) -> None:
        pass

    def close(self) -> None:
        pass


def _need(option: str, module: str) -> ModuleType:
    """``module``, or the refusal naming the extra that ``option`` needs (:mod:`extras`)."""
    import importlib

    from ..config.extras import message

    why = message(option)
    if why:
        raise UserError(why)
    return importlib.import_module(module)


class TensorBoard:
    """``logger=tensorboard``: event files in RUN/<subdir> (``tensorboard --logdir RUN``)."""

    run_id = None

    def __init__(
        self,
        run_dir: StrPath,
        run_id: str | None = None,
        run_config: Plain | None = None,
        subdir: str = "tensorboard",
    ):
        tb = _need("logger/tensorboard", "torch.utils.tensorboard")
        path = folder(run_dir, subdir)  # inside the run folder, no link
        if run_id is None:  # a new series: a previous run's events would mix with this one's
            for old in path.glob("events.out.tfevents.*"):
                remove(old)
        self.writer = tb.SummaryWriter(log_dir=str(path))
        self.run_id = "events"

    def log(self, metrics: dict[str, float], step: int) -> None:
        for k, v in metrics.items():
            self.writer.add_scalar(k, v, step)
        self.writer.flush()  # visible while the run goes on, and kept if it is killed

    def close(self) -> None:
        self.writer.close()


class MLflow:
    """``logger=mlflow``: an MLflow run; by default in a file store RUN/mlruns (offline)."""

    def __init__(
        self,
        run_dir: StrPath,
        run_id: str | None = None,
        run_config: Plain | None = None,
        tracking_uri: str | None = None,
        experiment: str = "fedrun",
        run_name: str | None = None,
    ):
        import os

        os.environ.setdefault(
            "MLFLOW_ALLOW_FILE_STORE", "true"
        )  # MLflow 3 deprecates, still has, it
        mlflow = _need("logger/mlflow", "mlflow")
        self.client = mlflow.tracking.MlflowClient(
            tracking_uri or (Path(run_dir).resolve() / "mlruns").as_uri()
        )
        if run_id is None:
            exp = self.client.get_experiment_by_name(experiment)
            exp_id = exp.experiment_id if exp else self.client.create_experiment(experiment)
            run = self.client.create_run(exp_id, run_name=run_name or Path(run_dir).name)
            run_id = run.info.run_id
            for k, v in _flat_params(run_config or {}).items():
                self.client.log_param(run_id, k, v)
        self.run_id = run_id

    def log(self, metrics: dict[str, float], step: int) -> None:
        for k, v in metrics.items():
            self.client.log_metric(self.run_id, k, v, step=step)

    def close(self) -> None:
        self.client.set_terminated(self.run_id)  # a resumed run logs into it again


class WandB:
    """``logger=wandb``: a W&B run, offline by default (RUN/wandb; upload with `wandb sync`)."""

    def __init__(
        self,
        run_dir: StrPath,
        run_id: str | None = None,
        run_config: Plain | None = None,
        project: str = "fedrun",
        entity: str | None = None,
        mode: str = "offline",
        name: str | None = None,
    ):
        import os

        os.environ.setdefault("WANDB_SILENT", "true")  # its banner would drown fedrun's lines
        wandb = _need("logger/wandb", "wandb")
        self.run = wandb.init(
            project=project,
            entity=entity,
            mode=mode,
            dir=str(run_dir),
            id=run_id,
            resume="allow" if run_id else None,
            config=run_config,
            name=name or Path(run_dir).name,
            reinit=True,
        )
        self.run_id = self.run.id

    def log(self, metrics: dict[str, float], step: int) -> None:
        self.run.log(metrics, step=step)

    def close(self) -> None:
        self.run.finish()


def _flat_params(config: dict[str, Any]) -> dict[str, Any]:
    from ..common.flatten import flatten

    return {k: str(v)[:250] for k, v in flatten(config).items()}


class Series:
    """The run folder's tracker, logging each metrics row once (see the module doc)."""

    def __init__(self, out: Path, start_round: int, rows: list[dict[str, float]]):
        self.out = Path(out)
        self.tracker: Tracker | None = None
        recorded = run_files.read_config_node(self.out, strict=False)
        spec = recorded.get("logger")
        if spec is None or str(spec.get("_target_", "")).endswith("trackers.Null"):
            return
        state = self._state() if start_round > 0 else {}
        if state.get("target") != spec._target_:
            state = {}  # another tracker than last time: a new series in it
        from hydra.utils import instantiate

        try:
            self.tracker = instantiate(
                spec,
                run_dir=str(self.out),
                run_id=state.get("run_id"),
                run_config=OmegaConf.to_container(recorded, resolve=True),
                _convert_="all",
                _recursive_=False,
            )
        except UserError:
            raise
        except Exception as e:  # a tracker that cannot start is a setting to fix, before training
            cause = e.__cause__ or e
            raise UserError(
                f"logger {spec._target_} could not start: {type(cause).__name__}: "
                f"{str(cause).splitlines()[0] if str(cause) else ''}"
            ) from None
        self.state = {
            "target": spec._target_,
            "run_id": self.tracker.run_id,
            "last_round": state.get("last_round", -1),
        }
        for row in rows:
            self.log(row)

    def _state(self) -> dict[str, Any]:
        return run_files.read_tracker(self.out)

    def log(self, row: dict[str, float]) -> None:
        t = row[mt.ROUND.name]
        if self.tracker is None or t <= self.state["last_round"]:
            return
        metrics = {
            k: float(v)
            for k, v in row.items()
            if k != mt.ROUND.name and isinstance(v, (int, float)) and math.isfinite(v)
        }
        self.tracker.log(metrics, int(t))
        self.state["last_round"] = t
        atomic_write_text(self.out / run_files.TRACKER, json.dumps(self.state) + "\n")

    def __enter__(self) -> Series:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.tracker is not None:
            self.tracker.close()


def open(out: Path, start_round: int, rows: list[dict[str, float]]) -> Series:  # noqa: A001 (module API)
    """The tracker of run folder ``out`` (chosen by its config.yaml), for a run starting at
    ``start_round`` whose metrics rows so far are ``rows`` (those not yet logged are logged)."""
    return Series(out, start_round, rows)
