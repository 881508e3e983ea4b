"""A run's folder: whose it is (:func:`check_owned`), what it holds (a prior run to resume or
keep, a start cut short), where a run in it starts (:func:`resume_point`: fresh, resumed,
extended; rules in :mod:`checkpoint`), on the same data (:func:`fits`, :func:`same_data`), and
the record that a run starts in it (:func:`begin`)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Literal

from .. import data
from ..algorithms import contract
from ..common import run_files
from ..common.console import say
from ..common.errors import UserError, require
from ..common.files import atomic_write_text, clear_temps, folder, remove, temp_of
from ..common.guarded import Unreadable
from ..common.run_files import read_summary
from ..config.schema import RunConfig
from ..engine import choice
from ..engine import compile as compile_choice
from ..engine.device import hardware
from . import checkpoint, code_record, keep, provenance
from .experiment import Experiment, Record, split
from .outputs import Summary, is_fedrun_summary


def status_of(out: Path) -> str:
    """A run folder's recorded status (``missing`` without a readable summary)."""
    try:
        return read_summary(out)["status"]
    except (OSError, ValueError, KeyError, TypeError):
        return "missing"


def has_prior_run(out: Path) -> bool:
    """Whether ``out`` holds a run to resume or keep: a checkpoint, or a summary whose status
    is not ``error`` of a start that was not cut short (:func:`cut_short`)."""
    return (out / run_files.CHECKPOINT).exists() or (
        status_of(out) not in ("missing", "error") and not cut_short(out)
    )


def cut_short(out: Path) -> bool:
    """Whether ``out`` holds only the start of a run that ended before it recorded its config
    (killed, stopped): a summary ``running`` or ``interrupted``, no ``config.yaml``, no
    checkpoint. Nothing of it trained, so a run into ``out`` starts it over. (A start refused
    or failed, a full disk's included, says ``error``: no prior run either.)"""
    return (
        status_of(out) in ("running", "interrupted")
        and not (out / run_files.CONFIG).exists()
        and not (out / run_files.CHECKPOINT).exists()
    )


SCAFFOLD = {
    run_files.HYDRA,
    run_files.LOCK,
    run_files.LOG,
    run_files.ERROR_LOG,
}  # what fedrun leaves before a run starts
OWN = {*run_files.RECORD, run_files.ERROR_LOG}  # the files fedrun writes atomically in a run folder


def is_scaffold(p: Path) -> bool:
    """Whether ``p`` is one of :data:`SCAFFOLD` as fedrun makes it: ``.hydra`` a real folder,
    the others regular files (a link or a FIFO of that name is someone else's), or the temp
    file of a write of one of :data:`OWN` that a killed fedrun left."""
    if temp_of(p) in OWN:
        return True
    return (
        p.name in SCAFFOLD
        and not p.is_symlink()
        and (p.is_dir() if p.name == run_files.HYDRA else p.is_file())
    )


def check_owned(out: Path) -> None:
    """Refuse a folder that is not a file, or holds files of something other than a fedrun
    run (a run folder's ``summary.json`` says it is one; an empty folder is free)."""
    require(not out.exists() or out.is_dir(), f"run folder {out} is a file, not a folder")
    if not out.is_dir():
        return
    try:
        ours = is_fedrun_summary(read_summary(out))
    except (
        Unreadable
    ) as e:  # EIO, EACCES: the run may be fine; cut short, hand-edited, hostile: nothing to keep
        raise UserError(
            f"{e}; "
            + (
                "nothing in the folder was changed: re-run once it can be read"
                if e.os_error
                else "choose another run folder"
            )
        ) from None
    except (OSError, ValueError):
        ours = False
    if ours:
        return
    foreign = sorted(p.name for p in out.iterdir() if not is_scaffold(p))
    require(
        not foreign,
        f"run folder {out} holds files that are not a fedrun run "
        f"({', '.join(foreign[:4])}{', ...' if len(foreign) > 4 else ''}); "
        f"choose another folder",
    )


def resume_point(
    cfg: RunConfig, record: Record, out: Path
) -> checkpoint.Checkpoint | None | Literal[True]:
    """How the run of ``cfg`` (its config's ``record``) starts in ``out`` (rules in
    :mod:`checkpoint`): the checkpoint to continue from, ``None`` to start from round 0, or
    ``True`` when the folder's run has already finished these T rounds. Refusals are
    :class:`UserError`; nothing is written."""
    if not (cfg.resume and has_prior_run(out)):
        return None
    prior = checkpoint.check_same_run(out, record.resolved)
    finished = status_of(out) == "finished"
    if finished and prior.get("T") == cfg.T:  # a checkpoint beside it is an extension's, stopped
        return True
    path = out / run_files.CHECKPOINT
    ckpt = (
        checkpoint.load(path, cfg.torch_device, checkpoint.digests(record.resolved))
        if path.exists()
        else None
    )
    done = ckpt.round if ckpt else (prior["T"] if finished else 0)
    require(
        done <= cfg.T,
        f"T={cfg.T} is below the {done} rounds the run in {out} has done; "
        f"T may only be extended (or set resume=false to start over)",
    )
    if ckpt is None:
        say(f"no checkpoint in {out}; starting it over from round 0", "note")
    else:
        _same_code(out, cfg, ckpt.round)
    return ckpt


def _same_code(out: Path, cfg: RunConfig, round: int) -> None:
    """Refuse to continue the run in ``out`` from ``round`` with other code than made its rounds
    so far (:func:`code_record.stale`: an algorithm's, regularizer's, ... source changed), unless
    ``mixed_code=true``: then a note, and the run records both codes (:func:`code_history`)."""
    why = code_record.stale(out, cfg)
    if not why:
        return
    require(
        cfg.mixed_code,
        f"the run in {out} was made by other code than this ({'; '.join(why)}): to start it "
        f"over with this code, set resume=false; to continue it from round {round} with this "
        f"code, set mixed_code=true (its record then keeps both codes and the round they changed)",
    )
    say(
        f"continuing the run in {out} from round {round} with other code than made its rounds so "
        f"far ({'; '.join(why)}); its record keeps both (mixed_code=true)",
        "note",
    )


def code_history(out: Path, current: dict, round: int) -> list[dict]:
    """The code records of the run in ``out`` continued from ``round`` by code ``current``:
    ``[{"from_round": 0, "code": ...}, ...]``, one entry per code that made rounds, in order --
    one entry (its own) while the code never changed."""
    try:
        s = run_files.read_summary(out)
    except (OSError, ValueError):
        s = {}
    history = s.get("code_history") or (
        [{"from_round": 0, "code": s["code"]}] if s.get("code") else []
    )
    history = [h for h in history if h.get("from_round", 0) < round]
    if not history or code_record.changed(history[-1]["code"], current):
        history.append({"from_round": round, "code": current})
    return history


def recover(out: Path) -> None:
    """Clear what a killed fedrun left in ``out``, whose lock this process holds: the attempt
    on a finished run undone (:func:`keep.recover`), the temp files of its writes deleted."""
    if keep.recover(out):
        say(f"a killed attempt on the finished run in {out} was undone", "note")
    gone = clear_temps(out)
    if gone:
        say(
            f"deleted {len(gone)} temp file{'s' if len(gone) > 1 else ''} of writes a killed "
            f"fedrun "
            f"left in {out} ({', '.join(str(p.relative_to(out)) for p in gone[:3])}"
            f"{', ...' if len(gone) > 3 else ''})",
            "note",
        )
    if cut_short(out):
        say(f"the run in {out} ended before it recorded its config; starting it over", "note")


def fits(exp: Experiment, out: Path, ckpt: checkpoint.Checkpoint | None) -> None:
    """Refuse to continue the run in ``out`` (resumed, extended) on other data than it trained
    on (:func:`provenance.check`), or from a checkpoint that cannot continue ``exp``
    (:func:`checkpoint.check_fits`)."""
    if exp.cfg.resume and has_prior_run(out):
        recorded = ckpt.data if ckpt is not None and ckpt.data else _recorded_data(out)
        provenance.check(recorded, exp.fingerprint, out)
    if ckpt is not None:
        checkpoint.check_fits(
            out / run_files.CHECKPOINT,
            ckpt,
            contract.init(exp.alg, exp.flat.flat(), exp.cfg.n),
            exp.cfg.T,
        )


def same_data(
    cfg: RunConfig,
    out: Path,
    dataset: data.Dataset | None = None,
    data_fingerprint: dict | None = None,
) -> None:
    """Refuse a run that has finished already in ``out`` when the data of ``cfg`` (``dataset``,
    default: loaded now) differ from those it trained on (:func:`provenance.check`)."""
    recorded = _recorded_data(out)
    if recorded is None:
        return
    ds = dataset or data.load_config(cfg)
    now = {
        **(data_fingerprint or provenance.of_data(ds)),
        **provenance.of_partition(split(cfg, ds)),
    }
    provenance.check(recorded, now, out)


def _recorded_data(out: Path) -> dict | None:
    """The fingerprint of the data the run in ``out`` trained on, from its summary."""
    try:
        recorded = read_summary(out).get("data")
    except (OSError, ValueError):
        return None
    return recorded if isinstance(recorded, dict) else None


def begin(
    exp: Experiment,
    out: Path,
    ckpt: checkpoint.Checkpoint | None,
    summary: Summary,
    hydra_record: dict[str, str] | None,
) -> None:
    """Record in ``out`` that the run starts (or resumes): summary, ``.hydra/``, config and
    partition; a previous run's leftovers go when starting over."""
    keep.protect(out, status_of(out) == "finished")  # before the first write (see keep.py)
    if ckpt is not None and summary.fields.get("code"):
        history = code_history(out, summary.fields["code"], ckpt.round)
        if len(history) > 1:  # made by more than one code (mixed_code=true)
            summary.fields["code_history"] = history
    summary.fields.update(
        device=str(exp.cfg.torch_device),
        hardware=hardware(exp.cfg.torch_device),
        dimension=exp.flat.d,
        engine=exp.oracle.engine_choice,
        compile=exp.oracle.compile_choice,
        data_source=exp.dataset.source,
        data=exp.fingerprint,
        numerics=exp.numerics,
    )
    if ckpt is None:
        for name in (
            run_files.CHECKPOINT,
            run_files.METRICS_FIGURE,
            run_files.ERROR_LOG,
            run_files.CLIENTS,
            run_files.CLIENTS_SUMMARY,
            run_files.CLIENTS_FIGURE,
        ):  # a previous run's
            remove(out / name)
    summary.start(round=ckpt.round if ckpt else 0, started_round=ckpt.round if ckpt else 0)
    chosen = choice.line(exp.oracle.engine_choice)
    if chosen:
        say(chosen, "engine", stream=sys.stdout)
    compiled = compile_choice.line(exp.oracle.compile_choice)
    if compiled:
        say(compiled, "compile", stream=sys.stdout)
    if ckpt is not None:
        say(
            f"resuming {out} from round {ckpt.round} of {exp.cfg.T} (checkpoint of "
            f"{checkpoint_time(out / run_files.CHECKPOINT)})"
        )
    _write_hydra_record(out, hydra_record)
    atomic_write_text(out / run_files.CONFIG, exp.record.text)
    data.save_partition(out / run_files.PARTITION, exp.clients)


def checkpoint_time(path: Path) -> str:
    """When the checkpoint at ``path`` was written (local time, from the file's mtime)."""
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(path.stat().st_mtime))
    except OSError:
        return "unknown time"


def _write_hydra_record(out: Path, files: dict[str, str] | None) -> None:
    """Hydra's record of the command (``.hydra/``), written only once the run has started."""
    if not files:
        return
    record = folder(out, run_files.HYDRA)
    for name, text in files.items():
        atomic_write_text(record / name, text)
