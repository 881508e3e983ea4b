"""A run's folder: whose it is (:func:`check_owned`), what it holds (:class:`Held`, read once:
a prior run to resume or keep, a start cut short), where a run in it starts
(:func:`resume_point`: fresh, resumed, extended; rules in :mod:`checkpoint`), on the same data
(:func:`fits`, :func:`same_data`), and the record that a run starts in it (:func:`begin`)."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

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
from . import checkpoint, code_record, keep, provenance, view
from .experiment import Experiment, Record, split
from .outputs import Summary, is_fedrun_summary


@dataclass(frozen=True, eq=False)
class Held(view.RunView):
    """What the run folder ``path`` holds, read once (:func:`read`; in a run's own folder after
    :func:`recover`): its view (:class:`view.RunView`: the summary, ``{}`` when missing or
    unreadable) and whether a config and a checkpoint are there. A run's start decides on it;
    the folder is read again only for the files a resume loads (the recorded config, the
    checkpoint)."""

    has_config: bool = False
    has_checkpoint: bool = False

    @property
    def cut_short(self) -> bool:
        """Whether the folder holds only the start of a run that ended before it recorded its
        config (killed, stopped): a summary ``running`` or ``interrupted``, no ``config.yaml``,
        no checkpoint. Nothing of it trained, so a run into it starts it over. (A start refused
        or failed, a full disk's included, says ``error``: no prior run either.)"""
        return (
            self.recorded in ("running", "interrupted")
            and not self.has_config
            and not self.has_checkpoint
        )

    @property
    def prior(self) -> bool:
        """Whether it holds a run to resume or keep: a checkpoint, or a summary whose status is
        not ``error`` of a start that was not cut short."""
        return self.has_checkpoint or (
            self.recorded not in (view.MISSING, "error") and not self.cut_short
        )

    @property
    def data(self) -> dict[str, Any] | None:
        """The fingerprint of the data its run trained on (:mod:`provenance`)."""
        recorded = self.summary.get("data")
        return recorded if isinstance(recorded, dict) else None

    @property
    def code(self) -> dict[str, Any] | None:
        """The record of the code that made its run (:mod:`code_record`)."""
        return self.summary.get("code")


def read(out: Path) -> Held:
    """What ``out`` holds now (:class:`Held`)."""
    v = view.read(out)
    return Held(out, v.summary, v.fault, v.has(run_files.CONFIG), v.has(run_files.CHECKPOINT))


SCAFFOLD = {
    run_files.HYDRA,
    run_files.LOCK,
    run_files.OWNER,
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
    cfg: RunConfig, record: Record, held: Held
) -> checkpoint.Checkpoint | None | Literal[True]:
    """How the run of ``cfg`` (its config's ``record``) starts in the folder that ``held`` read
    (rules in :mod:`checkpoint`): the checkpoint to continue from, ``None`` to start from round
    0, or ``True`` when the folder's run has already finished these T rounds. Refusals are
    :class:`UserError`; nothing is written."""
    if not (cfg.resume and held.prior):
        return None
    out = held.path
    prior = checkpoint.check_same_run(out, record.resolved)
    finished = held.recorded == "finished"
    if finished and prior.get("T") == cfg.T:  # a checkpoint beside it is an extension's, stopped
        return True
    ckpt = (
        checkpoint.load(
            out / run_files.CHECKPOINT, cfg.torch_device, checkpoint.digests(record.resolved)
        )
        if held.has_checkpoint
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
        _same_code(held, cfg, ckpt.round)
    return ckpt


def _same_code(held: Held, cfg: RunConfig, round: int) -> None:
    """Refuse to continue the run ``held`` from ``round`` with other code than made its rounds
    so far (:func:`code_record.stale`: an algorithm's, regularizer's, ... source changed), unless
    ``mixed_code=true``: then a note, and the run records both codes (:func:`code_history`)."""
    out = held.path
    # without a record, only rounds made (by an older version) count: a round-0 start is new
    why = code_record.stale(held.code, cfg) if held.code or round > 0 else []
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


def code_history(held: Held, current: dict[str, Any], round: int) -> list[dict[str, Any]]:
    """The code records of the run ``held`` continued from ``round`` by code ``current``:
    ``[{"from_round": 0, "code": ...}, ...]``, one entry per code that made rounds, in order --
    one entry (its own) while the code never changed."""
    s = held.summary
    history = s.get("code_history") or [{"from_round": 0, "code": s.get("code") or None}]
    history = [h for h in history if h.get("from_round", 0) < round]
    if not history or not history[-1]["code"] or code_record.changed(history[-1]["code"], current):
        history.append({"from_round": round, "code": current})
    return history


def recover(out: Path) -> Held:
    """Clear what a killed fedrun left in ``out``, whose lock this process holds: the attempt
    on a finished run undone (:func:`keep.recover`), the temp files of its writes deleted;
    then what ``out`` holds, read (:func:`read`)."""
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
    held = read(out)
    if held.cut_short:
        say(f"the run in {out} ended before it recorded its config; starting it over", "note")
    return held


def fits(exp: Experiment, held: Held, ckpt: checkpoint.Checkpoint | None) -> None:
    """Refuse to continue the run ``held`` (resumed, extended) on other data than it trained
    on (:func:`provenance.check`), or from a checkpoint that cannot continue ``exp``
    (:func:`checkpoint.check_fits`)."""
    if exp.cfg.resume and held.prior:
        recorded = ckpt.data if ckpt is not None and ckpt.data else held.data
        provenance.check(recorded, exp.fingerprint, held.path)
    if ckpt is not None:
        checkpoint.check_fits(
            held.path / run_files.CHECKPOINT,
            ckpt,
            contract.init(exp.alg, exp.flat.flat(), exp.cfg.n),
            exp.cfg.T,
        )


def same_data(
    cfg: RunConfig,
    held: Held,
    dataset: data.Dataset | None = None,
    data_fingerprint: dict[str, Any] | None = None,
) -> None:
    """Refuse a run that has finished already (``held``) when the data of ``cfg`` (``dataset``,
    default: loaded now) differ from those it trained on (:func:`provenance.check`)."""
    recorded = held.data
    if recorded is None:
        return
    ds = dataset or data.load_config(cfg)
    now = {
        **(data_fingerprint or provenance.of_data(ds)),
        **provenance.of_partition(split(cfg, ds)),
    }
    provenance.check(recorded, now, held.path)


def begin(
    exp: Experiment,
    held: Held,
    ckpt: checkpoint.Checkpoint | None,
    summary: Summary,
    hydra_record: dict[str, str] | None,
) -> None:
    """Record in the folder ``held`` read that the run starts (or resumes): summary,
    ``.hydra/``, config and partition; a previous run's leftovers go when starting over."""
    out = held.path
    keep.protect(out, held.recorded == "finished")  # before the first write (see keep.py)
    if ckpt is not None and summary.fields.get("code"):
        history = code_history(held, summary.fields["code"], ckpt.round)
        if len(history) > 1:  # made by more than one code (mixed_code=true)
            summary.fields["code_history"] = history
    summary.fields.update(
        {
            "device": str(exp.cfg.torch_device),
            "hardware": hardware(exp.cfg.torch_device),
            "dimension": exp.flat.d,
            "engine": exp.oracle.engine_choice,
            "compile": exp.oracle.compile_choice,
            "data_source": exp.dataset.source,
            "data": exp.fingerprint,
            "numerics": exp.numerics,
        }
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
