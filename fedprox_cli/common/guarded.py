"""The one reader of every file fedprox_cli reads back from a run or sweep folder -- summary.json,
config.yaml and ``.hydra/*.yaml``, metrics.csv and clients.csv, checkpoint.pt, partition.npz,
job records -- and of its own caches: such files may be cut short, hand-edited or hostile.

Every read is bounded before it is parsed: the file's size (:data:`TEXT_BYTES` for JSON and
YAML, :data:`TABLE_BYTES` for CSV), the nesting depth of JSON and YAML (:data:`DEPTH`), and the
size of a YAML document once its aliases are expanded (:data:`NODES`: a 549-byte "billion
laughs" is refused in milliseconds, before anything expands it). Files are opened through
:mod:`files` (regular files only, never blocking). Every failure -- a missing file aside, which
stays ``FileNotFoundError`` -- is :class:`Unreadable`, an ``OSError`` other than "no such
file" (EIO, EACCES) included: one line naming the file and what is wrong, a :class:`UserError`
(exit 2) that handlers of a ``ValueError`` also catch.
"""

from __future__ import annotations

import functools
import io
import json
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any

import yaml
from omegaconf import OmegaConf
from omegaconf._utils import get_yaml_loader

from .errors import UserError, squeeze
from .files import NotRegular, StrPath, open_file

if TYPE_CHECKING:
    import pandas as pd
    from omegaconf import DictConfig

TEXT_BYTES = 16 * 2**20  # summary.json, config.yaml, job records: a few KB when fedrun writes them
TABLE_BYTES = 2**30  # metrics.csv: ~150 bytes a row, so millions of evaluations
DEPTH = 100  # fedrun's files nest 4 deep at most
NODES = 1_000_000  # YAML nodes once aliases are expanded (a run's config: a few hundred)


class Unreadable(UserError, ValueError):
    """A file read back from a run folder that cannot be read: ``PATH is unreadable: WHY``."""

    def __init__(self, path: StrPath, why: str, os_error: OSError | None = None) -> None:
        super().__init__(f"{path} is unreadable: {squeeze(why, 200)}")
        self.path, self.why = path, squeeze(why, 200)
        self.os_error = (
            os_error  # the file system's refusal (EIO, EACCES): the file itself may be fine
        )


@contextmanager
def opened(path: StrPath, limit: int | None = None) -> Iterator[IO[bytes]]:
    """The regular file ``path`` opened for binary reading, refused (:class:`Unreadable`) when
    it is larger than ``limit`` bytes (None: any size, e.g. a checkpoint)."""
    try:
        with open_file(path) as f:
            size = os.fstat(f.fileno()).st_size
            if limit is not None and size > limit:
                raise Unreadable(
                    path, f"{size:,} bytes, more than the {limit:,} such a file may have"
                )
            yield f
    except (FileNotFoundError, NotADirectoryError, NotRegular):
        raise  # absent (or a FIFO, a folder: NotRegular's own line)
    except Unreadable:
        raise
    except OSError as e:  # there but not readable (EIO, EACCES, ...): never taken for absent
        raise Unreadable(path, e.strerror or str(e), os_error=e) from None


def read_bytes(path: StrPath, limit: int | None = None) -> bytes:
    """The bytes of ``path`` (at most ``limit``, by default :data:`TEXT_BYTES`)."""
    limit = TEXT_BYTES if limit is None else limit
    with opened(path, limit) as f:
        size = min(os.fstat(f.fileno()).st_size, limit)
        data = f.read(size + 1)  # a buffer of the file's size, not of the limit's
        if len(data) > size:  # grew since: the rest, up to the limit
            data += f.read(limit + 1 - len(data))
    if len(data) > limit:  # grew while read
        raise Unreadable(path, f"more than the {limit:,} bytes such a file may have")
    return data


def read_text(path: StrPath, limit: int | None = None) -> str:
    """The UTF-8 text of ``path`` (at most ``limit`` bytes, by default :data:`TEXT_BYTES`)."""
    data = read_bytes(path, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Unreadable(path, f"not UTF-8 text ({e.reason} at byte {e.start})") from None


def lines(path: StrPath, data: bytes) -> Iterator[str]:
    """The lines of ``data`` (read from ``path``), decoded as UTF-8 a block at a time: a large
    table is checked line by line without a decoded copy of it whole."""
    text = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", newline="")
    try:
        yield from text
    except UnicodeDecodeError as e:
        raise Unreadable(path, f"not UTF-8 text ({e.reason})") from None


def _check_depth(path: StrPath, root: object, children: Callable[[Any], Iterable[object]]) -> None:
    """Refuse a structure nested deeper than :data:`DEPTH` (walked without recursion)."""
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > DEPTH:
            raise Unreadable(path, f"nested more than {DEPTH} levels deep")
        stack.extend((c, depth + 1) for c in children(node))


def _json_children(v: object) -> Iterable[object]:
    return v.values() if isinstance(v, dict) else v if isinstance(v, list) else ()


def read_json(path: StrPath) -> Any:
    """The JSON value in ``path``."""
    text = read_text(path)
    try:
        value = json.loads(text)
    except RecursionError:
        raise Unreadable(path, f"nested more than {DEPTH} levels deep") from None
    except ValueError as e:  # cut short, not JSON
        raise Unreadable(path, f"not JSON ({e})") from None
    _check_depth(path, value, _json_children)
    return value


def _yaml_children(node: Any) -> Iterable[Any]:  # PyYAML has no types
    if isinstance(node, yaml.MappingNode):
        return [n for kv in node.value for n in kv]
    return node.value if isinstance(node, yaml.SequenceNode) else ()


def _check_graph(path: StrPath, root: Any) -> None:
    """Refuse the YAML graph ``root`` when, with every alias expanded, it has more than
    :data:`NODES` nodes or nests deeper than :data:`DEPTH`: counted once per distinct node
    (memoised, without recursion), so that no alias is ever expanded."""
    size: dict[int, tuple[int, int]] = {}  # id(node) -> (nodes, depth) of its expansion
    stack = [(root, False)]
    while stack:
        node, ready = stack.pop()
        if id(node) in size:
            continue
        kids = _yaml_children(node)
        if ready:
            below = [size[id(k)] for k in kids]
            nodes, depth = 1 + sum(n for n, _ in below), 1 + max((d for _, d in below), default=0)
            if nodes > NODES:
                raise Unreadable(
                    path, f"more than {NODES:,} values once its YAML aliases are expanded"
                )
            if depth > DEPTH:
                raise Unreadable(path, f"nested more than {DEPTH} levels deep")
            size[id(node)] = nodes, depth
        else:
            stack.append((node, True))
            stack.extend((k, False) for k in kids if id(k) not in size)


@functools.cache
def _loader() -> type:
    """OmegaConf's YAML loader (its rules for numbers, duplicate keys refused) on libyaml's C
    parser where PyYAML has it: the same values, parsed about ten times faster (thousands of
    run folders are read by one ``fedrun-table``)."""
    omegaconf_loader: type = get_yaml_loader()
    if not getattr(yaml, "__with_libyaml__", False):
        return omegaconf_loader

    # PyYAML ships no types, and OmegaConf makes its loader class when called
    class Loader(yaml.cyaml.CParser, omegaconf_loader):  # type: ignore[misc]
        def __init__(self, stream: str) -> None:
            yaml.cyaml.CParser.__init__(self, stream)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)

    return Loader


def read_yaml(path: StrPath, part: tuple[str, ...] = ()) -> Any:
    """The YAML document in ``path`` as Python values, read as OmegaConf reads YAML (``1e-05``
    is a number); ``OmegaConf.create`` of it gives the config. Parsed once: a document with an
    anchor (``&``: aliases may expand it) has its graph checked (:func:`_check_graph`) before
    it is made into values; one without is no larger than its text, and only its depth is
    checked, on the values. ``part``: the keys of one value inside it (outermost first), made
    into values alone (Hydra's record read for its choices); :class:`KeyError` where it has
    none."""
    text = read_text(path)
    try:
        return _parsed(path, text, _loader(), part)
    except Unreadable:
        if _loader() is get_yaml_loader():
            raise
        # libyaml refuses what PyYAML's own reader takes (a surrogate escape, "\udcff", of a
        # folder name's undecodable byte in Hydra's record): read as OmegaConf reads it
        return _parsed(path, text, get_yaml_loader(), part)


def parse_yaml(text: str, where: StrPath) -> Any:
    """The values of the YAML ``text`` found in ``where`` (a value inside a file already read
    through the gate, e.g. one override of ``.hydra/overrides.yaml``), with a file's limits."""
    return _parsed(where, text, _loader())


def _inside(path: StrPath, node: Any, part: tuple[str, ...]) -> Any:
    """The node at the keys ``part`` of the mapping ``node`` (a key twice is refused as
    OmegaConf refuses it)."""
    for key in part:
        if not isinstance(node, yaml.MappingNode):
            raise KeyError(key)
        found = [v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key]
        if len(found) > 1:
            raise Unreadable(path, f"not YAML (found duplicate key {key})")
        if not found:
            raise KeyError(key)
        node = found[0]
    return node


def _parsed(path: StrPath, text: str, loader_type: type, part: tuple[str, ...] = ()) -> Any:
    """The values of the YAML ``text`` (of ``path``), parsed by ``loader_type``; ``part``: of
    the value at those keys alone (:func:`read_yaml`)."""
    loader = loader_type(text)
    try:
        root = loader.get_single_node()
        if root is None:
            if part:
                raise KeyError(part[0])
            return None
        if "&" in text:
            _check_graph(path, root)
            return loader.construct_document(_inside(path, root, part))
        value = loader.construct_document(_inside(path, root, part))
        _check_depth(path, value, _json_children)
        return value
    except RecursionError:
        raise Unreadable(path, f"nested more than {DEPTH} levels deep") from None
    except yaml.YAMLError as e:
        if "maximum nesting depth" in str(e):  # libyaml's own limit (1000), beyond DEPTH
            raise Unreadable(path, f"nested more than {DEPTH} levels deep") from None
        raise Unreadable(path, f"not YAML ({' '.join(str(e).split())})") from None
    finally:
        loader.dispose()


def read_mapping(path: StrPath) -> dict[str, Any]:
    """The YAML mapping in ``path`` as plain values (a config read without making a
    ``DictConfig`` of it: what the analysis of many runs reads)."""
    value = read_yaml(path)
    if not isinstance(value, dict):
        raise Unreadable(path, f"not a YAML mapping (a {type(value).__name__})")
    return value


def read_config(path: StrPath) -> DictConfig:
    """The config (a ``DictConfig``) in the YAML file ``path``, e.g. a run's config.yaml."""
    value = read_mapping(path)
    try:
        return OmegaConf.create(value)
    except Exception as e:  # noqa: BLE001 -- OmegaConf's own refusals (a key it cannot hold)
        raise Unreadable(path, f"not a config ({type(e).__name__}: {e})") from None


def read_csv(path: StrPath, **kwargs: Any) -> pd.DataFrame:
    """The CSV table in ``path`` (at most :data:`TABLE_BYTES`) as a pandas DataFrame."""
    import pandas as pd  # only where a table is read: a run itself never needs pandas

    with opened(path, TABLE_BYTES) as f:
        data = f.read(TABLE_BYTES + 1)
    try:
        return pd.read_csv(io.BytesIO(data), **kwargs)
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as e:
        raise Unreadable(path, f"not a CSV table ({type(e).__name__}: {e})") from None


def parse_csv(data: bytes, **kwargs: Any) -> pd.DataFrame:
    """CSV ``data`` already read through :func:`read_bytes` (bounded) as a pandas DataFrame."""
    import pandas as pd

    return pd.read_csv(io.BytesIO(data), **kwargs)
