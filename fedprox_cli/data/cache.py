"""The decoded-data cache: a dataset's arrays decoded once from its source files and read back,
memory-mapped, by every later run.

An entry is a folder ``<name>-<key>/`` of ``.npy`` files (images as uint8, as stored in the
sources) under :func:`folder`: ``$FEDPROX_CACHE``, else ``$XDG_CACHE_HOME/fedprox_cli/decoded``
(default ``~/.cache``). The key is a digest of the dataset's name, :data:`VERSION`, the versions
of the packages that decode it and each source file's resolved path, size and modification
time, so a changed source (or a new package version) is decoded again. Entries are written into
a temporary folder and renamed, so concurrent runs never see a partial one; an unwritable cache
folder only costs the decoding; an unreadable entry is decoded again.

:func:`lookup` turns uint8 levels into normalized float32 by table look-up: the 256 levels go
through the loader's own normalization once, so the result is bit-identical to normalizing the
whole array, at a fraction of the work.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import numpy as np
import torch

from ..common.console import say
from ..common.files import as_mkdir, cache_folder

VERSION = 1  # bump when a loader decodes differently


def folder() -> Path:
    """Where decoded datasets are cached."""
    explicit = os.environ.get("FEDPROX_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    return cache_folder() / "decoded"


def key(name: str, sources: list[Path], packages: tuple[str, ...] = ()) -> str:
    """Digest of what the decoded arrays depend on (see the module's docstring)."""
    h = hashlib.sha256(f"{name}\0{VERSION}".encode())
    for p in packages:
        h.update(f"\0{p}={metadata.version(p)}".encode())
    for s in sources:
        st = Path(s).stat()
        h.update(f"\0{Path(s).resolve()}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return h.hexdigest()[:20]


class Decoded(dict[str, np.ndarray]):
    """A dataset's decoded arrays by name, and ``origin``: what they are a function of -- the
    cache entry's name (its :func:`key`) and each of its files' size, modification time and
    inode -- or "" where they were decoded without a cache entry to read back."""

    origin: str = ""


def decoded(
    name: str,
    sources: list[Path],
    decode: Callable[[], dict[str, np.ndarray]],
    packages: tuple[str, ...] = (),
) -> Decoded:
    """``decode()``'s arrays for the dataset ``name`` read from ``sources``: from the cache
    (memory-mapped, read-only) when an entry for their current :func:`key` exists, else decoded
    and stored."""
    entry = folder() / f"{name}-{key(name, sources, packages)}"
    if entry.is_dir():
        try:
            out = Decoded(
                (f.stem, np.load(f, mmap_mode="r", allow_pickle=False)) for f in _arrays(entry)
            )
            out.origin = _origin(entry)
            return out
        except (OSError, ValueError) as e:
            say(
                f"the cached {name} in {entry} cannot be read ({type(e).__name__}); decoding it "
                f"again from its source files",
                "note",
            )
            shutil.rmtree(entry, ignore_errors=True)
    out = Decoded(decode())
    try:
        _store(entry, out)
        out.origin = _origin(entry)  # the arrays just stored there
    except OSError:
        pass  # a read-only or full cache folder: this run decodes without a cache
    return out


def _arrays(entry: Path) -> list[Path]:
    """The ``.npy`` files of the cache entry ``entry``. Raises ``OSError`` where it cannot be
    listed (another user's entry, say: ``Path.glob`` would find nothing there) and
    ``ValueError`` where it holds none."""
    found = sorted(entry / n for n in os.listdir(entry) if n.endswith(".npy"))
    if not found:
        raise ValueError(f"{entry} holds no arrays")
    return found


def _origin(entry: Path) -> str:
    """:attr:`Decoded.origin` of the arrays in ``entry``."""
    return entry.name + "".join(
        f"\0{f.name}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"
        for f, st in ((f, f.stat()) for f in _arrays(entry))
    )


def _store(entry: Path, arrays: dict[str, np.ndarray]) -> None:
    entry.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", dir=entry.parent))
    try:
        as_mkdir(tmp)  # readable as the cache folder is: it may be shared
        for k, a in arrays.items():
            np.save(tmp / f"{k}.npy", np.ascontiguousarray(a), allow_pickle=False)
        os.rename(tmp, entry)
    except OSError:
        if not entry.is_dir():
            raise
    finally:  # left over where another run stored the same entry first, or on a fault
        shutil.rmtree(tmp, ignore_errors=True)


CHUNK = 1 << 18  # levels gathered per call: their int64 indices stay in cache


def lookup(
    u8: np.ndarray,
    normalize: Callable[[torch.Tensor], torch.Tensor],
    channel_dim: int | None = None,
) -> torch.Tensor:
    """``normalize(torch.from_numpy(u8))`` as float32 (bit-identical), computed on the 256
    levels only: ``normalize`` maps uint8 samples (first dimension) to floats elementwise, per
    channel along ``channel_dim`` where given; it is applied to one sample per level, which
    ``u8`` then indexes (:func:`gather`)."""
    levels = np.arange(256, dtype=np.uint8)
    if channel_dim is None:
        return gather(normalize(torch.from_numpy(levels)).float(), u8)
    C = u8.shape[channel_dim]
    shape = [256] + [1] * (u8.ndim - 1)
    shape[channel_dim] = C
    grid = np.ascontiguousarray(np.broadcast_to(levels.reshape(256, *[1] * (u8.ndim - 1)), shape))
    table = normalize(torch.from_numpy(grid)).float().reshape(256, C)  # (level, channel)
    out = torch.empty(u8.shape, dtype=torch.float32)
    for c in range(C):
        index: list[slice | int] = [slice(None)] * u8.ndim
        index[channel_dim] = c
        out[tuple(index)] = gather(table[:, c].contiguous(), u8[tuple(index)])
    return out


def gather(table: torch.Tensor, u8: np.ndarray) -> torch.Tensor:
    """``table[u8]`` (a (256,) table, uint8 levels of any shape), :data:`CHUNK` levels per
    gather: indexing with the whole array at once builds int64 indices 8x its size, ~5x slower."""
    with warnings.catch_warnings():  # a read-only memory map: only read here
        warnings.simplefilter("ignore", UserWarning)
        src = torch.from_numpy(np.ascontiguousarray(u8)).reshape(-1)
    out = torch.empty(src.shape, dtype=table.dtype)
    for a in range(0, len(src), CHUNK):
        torch.index_select(table, 0, src[a : a + CHUNK].long(), out=out[a : a + CHUNK])
    return out.view(u8.shape)
