"""The dataset registry: the :class:`Dataset` record, :func:`register`, :func:`load`.

Loaders live in one module per on-disk format (:mod:`.idx`, :mod:`.images`, :mod:`.tabular`,
:mod:`.leaf`) and register under a config name; :func:`load` dispatches. Every fault of the
data on disk is one :class:`UserError` line: a dataset that cannot be found names where it
looked and how to get it; a file that cannot be read (truncated, corrupt, of another format)
names the file, what is wrong and what to do (:func:`reading`, with :func:`load` as the net
for any file a loader did not wrap); labels outside the classes are refused; a corrupt cache
is rebuilt from its source files (:func:`cached`). :func:`load` records in
``Dataset.source`` which copy was read; with ``data.root`` given, a copy elsewhere (another
candidate folder of the loader) is refused, never used silently in its place.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from numpy.typing import ArrayLike

from ..common.console import say
from ..common.errors import UserError, require, squeeze
from ..common.files import StrPath, atomic_write, check_readable, open_file
from ..common.plugin_calls import calling, returned
from ..common.registry import Registry, callable_contract

REDOWNLOAD = "delete it and download it again"

# name -> loader(root: Path) -> Dataset
register, names, lookup = (
    _REGISTRY := Registry["Callable[[Path], Dataset]"](  # (a plugin's result checked: load)
        "dataset",
        "datasets",
        callable_contract("a dataset loader (root: Path) -> fedprox_cli.data.Dataset"),
    )
).calls()[:3]


@dataclass
class Dataset:
    name: str
    train_x: torch.Tensor  # (N, *input_shape) float32
    train_y: torch.Tensor  # (N,) int64
    test_x: torch.Tensor
    test_y: torch.Tensor
    num_classes: int
    groups: torch.Tensor | None = (
        None  # (N,) int64 natural group of each training sample (FEMNIST writer)
    )
    source: str = ""  # the folder (or package) the data were read from
    # what the arrays are a function of, where the loader knows it: the decoded-data cache's
    # entry they were normalized from (cache.Decoded.origin); load() adds the loader's code.
    # Data with an origin have their fingerprint computed once (runs/provenance.py).
    origin: str = ""

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.train_x.shape[1:])


def default_root() -> Path:
    """Where datasets are looked for (and downloaded to) unless ``data.root`` says otherwise:
    $FEDPROX_DATA, else ~/.cache/fedprox_cli/data."""
    return Path(os.environ.get("FEDPROX_DATA", "~/.cache/fedprox_cli/data")).expanduser()


def load(name: str, root: StrPath | None = None, target: str | None = None) -> Dataset:
    """Train/test tensors of dataset ``name`` (normalized as in training), on the CPU
    (``target``: a plugin's loader by dotted path, see :mod:`fedprox_cli.common.registry`)."""
    loader = lookup(name, target)
    base = Path(root).expanduser() if root else default_root()
    require(not base.exists() or base.is_dir(), f"data.root {base} is a file, not a folder")
    try:
        with calling(loader, "dataset", "its loader", name):
            ds = loader(base)
    except UserError:
        raise
    except Exception as e:  # a file no loader wrapped in reading()
        raise UserError(
            f"dataset {name} under {base} cannot be read ({type(e).__name__}: "
            f"{squeeze(str(e), 200)}); its files may be corrupt: delete them and "
            f"download them again"
        ) from None
    returned(
        loader,
        "dataset",
        "the loader",
        ds,
        isinstance(ds, Dataset),
        "a fedprox_cli.data.Dataset",
        name,
    )
    ds.source = ds.source or str(base)
    if ds.origin:
        ds.origin += f"\0{code_digest(loader)}"
    check_whole(ds)
    for split, y in (("training", ds.train_y), ("test", ds.test_y)):
        require(
            len(y) == 0 or (int(y.min()) >= 0 and int(y.max()) < ds.num_classes),
            f"dataset {name} in {ds.source}: {split} labels must lie in 0..{ds.num_classes - 1}, "
            f"found {int(y.min())}..{int(y.max())}; the files are corrupt: "
            f"{REDOWNLOAD.replace('it', 'them')}",
        )
    require(
        not (
            root
            and Path(ds.source).exists()
            and not Path(ds.source).resolve().is_relative_to(base.resolve())
        ),
        f"dataset {name} is not under data.root={base} (a copy is in {ds.source}); put it there, "
        f"give data.root={ds.source}, or leave data.root unset to use that copy",
    )
    return ds


def code_digest(loader: Callable[..., object]) -> str:
    """A digest of the source file of ``loader``'s module (its normalization lives there), or of
    its name where the file cannot be read."""
    import hashlib
    import inspect

    try:
        text = Path(inspect.getfile(loader)).read_bytes()
    except (OSError, TypeError):  # a loader made at run time: its name
        text = repr(loader).encode()
    return hashlib.sha256(text).hexdigest()[:16]


def check_whole(ds: Dataset) -> None:
    """Whatever loader made ``ds`` (a plugin's too): each split's samples and labels agree
    (tensors, as many labels as samples, labels one per sample) and the test samples have
    the training samples' shape, which the model is built for. One :class:`UserError`."""
    where = f"dataset {ds.name} in {ds.source}"
    for split, x, y in (("training", ds.train_x, ds.train_y), ("test", ds.test_x, ds.test_y)):
        require(
            isinstance(x, torch.Tensor)
            and isinstance(y, torch.Tensor)
            and x.dim() >= 2
            and y.dim() == 1,
            f"{where}: the {split} samples must be a tensor (N, ...) and the labels a tensor "
            f"(N,), got "
            f"{_shape(x)} and {_shape(y)}; {REDOWNLOAD.replace('it', 'them')}",
        )
        require(
            len(x) == len(y),
            f"{where}: {len(x)} {split} samples but {len(y)} labels; "
            f"{REDOWNLOAD.replace('it', 'them')}",
        )
        require(
            not (x.is_floating_point() is False or y.is_floating_point()),
            f"{where}: the {split} samples must be floats and the labels integers, got {x.dtype} "
            f"and "
            f"{y.dtype}; {REDOWNLOAD.replace('it', 'them')}",
        )
    require(
        ds.train_x.shape[1:] == ds.test_x.shape[1:],
        f"{where}: training samples of shape {tuple(ds.train_x.shape[1:])} but test samples of "
        f"shape "
        f"{tuple(ds.test_x.shape[1:])}; a model takes one shape: "
        f"{REDOWNLOAD.replace('it', 'them')}",
    )


def _shape(t: object) -> str:
    return f"shape {tuple(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__


class _Named(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def params(self) -> Mapping[str, Any]: ...


class _Root(Protocol):
    @property
    def root(self) -> str | None: ...


class DataConfig(Protocol):
    """What :func:`load_config` reads of a run's config (``config.schema.RunConfig``)."""

    @property
    def dataset(self) -> _Named: ...
    @property
    def data(self) -> _Root: ...


def load_config(cfg: DataConfig) -> Dataset:
    """The dataset a typed run config (:class:`config.schema.RunConfig`) chooses
    (``dataset.name``, its ``_target_`` if any, ``data.root``)."""
    return load(cfg.dataset.name, cfg.data.root, cfg.dataset.params.get("_target_"))


@contextmanager
def reading(path: Path, remedy: str = REDOWNLOAD) -> Iterator[None]:
    """Turn any failure to read ``path`` inside the block into one :class:`UserError` naming
    the file, what is wrong and ``remedy``. A path that is not a regular file (a FIFO, a
    device node, a folder) is refused before it is opened (:func:`atomic.check_readable`)."""
    try:
        check_readable(path)
        yield
    except UserError:
        raise
    except Exception as e:
        raise UserError(
            f"{path} cannot be read ({type(e).__name__}: {squeeze(str(e), 200)}); {remedy}"
        ) from None


def not_found(name: str, looked: list[Path], how_to_get: str) -> UserError:
    """The one error for a missing dataset: where it looked and how to obtain it."""
    return UserError(
        f"dataset {name} not found (looked in: {', '.join(map(str, looked))}); {how_to_get}"
    )


def labels(y: ArrayLike) -> torch.Tensor:
    return torch.from_numpy(np.asarray(y).astype(np.int64))


def standardize(
    train: torch.Tensor,
    test: torch.Tensor,
    mean: float | Sequence[float],
    std: float | Sequence[float],
    channel_dim: int = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(x - mean) / std for float tensors; ``mean``/``std`` scalars or per-channel sequences
    (broadcast along ``channel_dim``)."""
    shape = [1] * train.dim()
    m, s = (
        torch.as_tensor(mean, dtype=torch.float32),
        torch.as_tensor(std, dtype=torch.float32),
    )
    if m.dim():
        shape[channel_dim] = -1
        m, s = m.view(shape), s.view(shape)
    return (train.float() - m) / s, (test.float() - m) / s


def split(x: np.ndarray, y: np.ndarray, test_fraction: float, seed: int = 0) -> list[np.ndarray]:
    """Deterministic stratified train/test split (independent of the run's seed)."""
    from sklearn.model_selection import train_test_split

    parts: list[np.ndarray] = train_test_split(  # (scikit-learn is untyped)
        x, y, test_size=test_fraction, random_state=seed, stratify=y
    )
    return parts


def cached(path: Path, build: Callable[[], dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """``build()``'s dict of tensors, saved to / read from ``path`` (a ``.pt`` file written
    atomically, so runs that load at once never see a partial file; skipped where the folder
    is read-only). An unreadable cache (truncated, say) is rebuilt from the source files."""
    if path.exists():
        try:
            with open_file(path) as f:
                loaded: dict[str, torch.Tensor] = torch.load(f, weights_only=True)
                return loaded
        except Exception as e:
            say(
                f"the cache {path} cannot be read ({type(e).__name__}); rebuilding it from "
                f"the source files",
                "note",
            )
    out = build()
    try:
        atomic_write(path, lambda f: torch.save(out, f))
    except OSError:  # a read-only data folder: load without a cache
        pass
    return out
