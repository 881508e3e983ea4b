"""A finished run survives any later attempt in its folder (an extension to a larger T, a re-run
with ``resume=false``) that fails or is stopped.

When an attempt starts in a folder whose run has finished (:func:`protect`, from
``run_folder.begin``, before its first write), the finished run's files -- ``metrics.csv``,
``metrics.png``, ``summary.json``, ``config.yaml``, ``partition.npz``, ``checkpoint.pt``,
``tracker.json``, the per-client files (:mod:`client_log`) and ``.hydra/`` -- are hard-linked
into ``RUN/.kept/``. Every file fedrun writes is replaced by a rename
(:func:`common.files.atomic_write`), so the linked copies keep the finished bytes whatever the
attempt writes. The attempt writes the run folder as usual; when it ends
(:func:`settle`, from ``ending.conclude``) finished, ``.kept/`` goes; otherwise every kept file
is renamed back, byte for byte as it was, except a checkpoint the attempt wrote (it resumes the
extension). A process killed outright leaves ``.kept/``; the next process in the folder puts
it back first (:func:`recover`). The kept names end in ``.kept`` so that no reader takes
``.kept/`` for a run folder.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..common import run_files
from ..common.errors import UserError, describe
from ..common.files import folder, remove

_protected: set[Path] = set()


def _pairs(out: Path) -> list[tuple[Path, Path]]:
    """(file of the run, its kept name) of every file :func:`protect` keeps."""
    record = out / run_files.HYDRA
    hydra = (
        sorted(p.name for p in record.iterdir())
        if record.is_dir() and not record.is_symlink()
        else []
    )
    return [(out / n, out / run_files.KEPT / f"{n}.kept") for n in run_files.RECORD] + [
        (record / n, out / run_files.KEPT / f"hydra.{n}.kept") for n in hydra
    ]


class Unprotected(UserError):
    """An attempt on a finished run whose files could not be kept first (:func:`protect`: the
    folder cannot be written, a file system refuses links and copies): refused before anything
    else is written, so the finished run is left byte for byte (:func:`ending.conclude` records
    nothing for it)."""


def protect(out: Path, finished: bool) -> None:
    """Keep the ``finished`` run's files of ``out`` (see the module doc); nothing otherwise.
    This is the attempt's first write: when it fails, what it made of ``.kept/`` goes and
    :class:`Unprotected` says why."""
    out = Path(out)
    if not finished or out in _protected:
        return
    try:
        kept = folder(out, run_files.KEPT)
        for src, dst in _pairs(out):
            if src.is_file() and not src.is_symlink():
                remove(dst)
                try:
                    os.link(src, dst)
                except OSError:  # a file system without hard links
                    shutil.copy2(src, dst)
        (kept / "complete").touch()  # a .kept/ without it was cut short: the run's files are intact
    except OSError as e:
        try:
            _drop(out)
        except OSError:
            pass  # a .kept/ without "complete" is dropped by the next fedrun in the folder
        raise Unprotected(
            f"the finished run in {out} cannot be continued: its folder cannot be written "
            f"({describe(e)}); nothing in it was changed"
        ) from None
    _protected.add(out)


def settle(out: Path, finished: bool) -> bool:
    """End :func:`protect`'s keeping: drop the kept files if the attempt ``finished``, else put
    them back. Returns whether files were put back."""
    out = Path(out)
    if out not in _protected:
        return False
    _protected.discard(out)
    if finished:
        _drop(out)
        return False
    return _restore(out)


def recover(out: Path) -> bool:
    """Put back what a killed attempt left kept in ``out`` (before anything else runs there)."""
    return (Path(out) / run_files.KEPT).is_dir() and _restore(Path(out))


def _restore(out: Path) -> bool:
    kept = out / run_files.KEPT
    if not (kept / "complete").exists():
        _drop(out)
        return False
    left = False
    for p in sorted(kept.glob("*.kept")):
        name = p.name[: -len(".kept")]
        try:
            dst = (
                folder(out, run_files.HYDRA) / name[len("hydra.") :]
                if name.startswith("hydra.")
                else out / name
            )
            if name == run_files.CHECKPOINT and dst.exists():  # the attempt's own is kept
                continue
            remove(dst)  # a link the attempt's user put there goes, never what it points to
            os.replace(p, dst)
        except OSError:  # a folder or a FIFO put there meanwhile: the kept file stays in .kept/
            left = True
    if not left:
        _drop(out)
    return True


def _drop(out: Path) -> None:
    kept = out / run_files.KEPT
    if kept.is_dir() and not kept.is_symlink():
        for p in kept.iterdir():
            remove(p)
        kept.rmdir()
