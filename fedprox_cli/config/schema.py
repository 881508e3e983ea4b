"""The run config's schema: Hydra structured configs (dataclasses in the ConfigStore) for the top
level of ``conf/config.yaml`` and its ``data``, ``oracle`` and ``metrics`` sections, each field
with its type and what its value must be; the config groups' options are typed by
:class:`Choice` (the option's YAML is its schema: its keys and the types of its defaults, see
:mod:`validate`; the algorithm, regularizer and compressor objects check their own values).

Values live in the YAML (the defaults and their comments), types and ranges here: every field
is ``MISSING``, so the two never disagree on a default. A config is made typed once, at the top
(:func:`validate.typed`), and the rest of the code receives a :class:`RunConfig`. Building one
in Python (``RunConfig(T=..., ...)``) checks it the same way (``__post_init__``).

The schema checks a copy of the composed config rather than sitting in ``config.yaml``'s
defaults list: merged there, OmegaConf would rewrite ``participation=1`` as ``1.0`` in the
recorded config, and so change the digest that resume and sweep-folder names are keyed on.
"""

from __future__ import annotations

import math
import typing
from dataclasses import dataclass, field, fields, is_dataclass
from functools import cache, cached_property
from typing import Any, Callable, ClassVar, Dict, Optional, cast

import torch
from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig

from ..common import metric_table
from ..common.errors import UserError, require
from ..engine.device import MATMUL_PRECISIONS, resolve_device
from ..engine.oracle import ENGINES

DTYPES = {"float32": torch.float32, "float64": torch.float64}
GROUPS = ("dataset", "partition", "model", "regularizer", "compressor", "algorithm")


def is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def positive_int(v: Any) -> bool:
    return is_int(v) and v > 0


def key(must: str, ok: Callable[[Any], bool] = lambda v: True) -> Any:
    """A schema field: no default (the YAML has it), the value's test beyond its type, and
    what the value must be (the one-line error ``KEY must be MUST, got VALUE``)."""
    return field(default=MISSING, metadata={"must": must, "ok": ok})


def _fits(tp: Any, v: object) -> bool:
    """Whether ``v`` is of the annotated type ``tp``, strictly (no bool for an int, no string
    for a number: OmegaConf would convert ``"5"`` and ``"yes"``)."""
    if tp is Any:
        return True
    if typing.get_origin(tp) is typing.Union:
        return any(_fits(a, v) for a in typing.get_args(tp))
    if tp is type(None):
        return v is None
    if tp is float:
        return is_number(v)
    if tp is int:
        return is_int(v)
    return isinstance(v, typing.get_origin(tp) or tp)


@cache
def _hints(cls: type) -> dict[str, Any]:
    """The type hints of a schema class (evaluated once: each config checked reads them)."""
    return typing.get_type_hints(cls)


def check(cls: type, values: dict[str, Any], at: str = "") -> None:
    """Refuse the first value of ``values`` (a section of the config, as a dict) that does not
    fit its field of the schema ``cls``: of its type and passing its test. Nested sections are
    checked field by field; fields without a test (the config groups) are left to
    :mod:`validate`."""
    hints = _hints(cls)
    for f in fields(cls):
        if f.name not in values:
            continue
        v, tp, name = values[f.name], hints[f.name], at + f.name
        if is_dataclass(tp):
            check(cast(type, tp), v if isinstance(v, dict) else vars(v), name + ".")
        elif "must" in f.metadata:
            require(
                _fits(tp, v) and f.metadata["ok"](v),
                f"{name} must be {f.metadata['must']}, got {v!r}",
            )


class Checked:
    """A schema section that checks itself when built (``RunConfig(...)`` from Python); an
    integer given for a float field becomes a float."""

    at: ClassVar[str] = ""  # the section's place in the config ("oracle.")

    def __post_init__(self: Any) -> None:
        check(type(self), {f.name: getattr(self, f.name) for f in fields(self)}, self.at)
        hints = _hints(cast(Any, type(self)))
        for f in fields(self):
            v = getattr(self, f.name)
            if is_int(v) and hints[f.name] in (float, Optional[float]):
                setattr(self, f.name, float(v))


@dataclass
class Data(Checked):
    at: ClassVar[str] = "data."
    root: Optional[str] = key(
        "a folder or null ($FEDPROX_DATA or ~/.cache/fedprox_cli/data)",
        lambda v: v is None or v.strip() != "",
    )


@dataclass
class Oracle(Checked):
    at: ClassVar[str] = "oracle."
    chunk: Any = key(
        "a positive integer, auto or null", lambda v: v is None or v == "auto" or positive_int(v)
    )
    eval_batch: Any = key("a positive integer or auto", lambda v: v == "auto" or positive_int(v))
    memory_gb: float = key("a positive number", lambda v: v > 0)


@dataclass
class Metrics(Checked):
    at: ClassVar[str] = "metrics."
    stationarity_step: Optional[float] = key(
        "a number > 0 or null (the algorithm's natural step)", lambda v: v is None or v > 0
    )
    train_samples: Optional[int] = key(
        "a positive integer or null (all)", lambda v: v is None or v > 0
    )
    per_client: bool = key("true or false")


@dataclass(frozen=True)
class Choice:
    """A config group's chosen option: its ``name`` and its parameters (the YAML's other keys,
    ``_target_`` included: a plugin's class, see :mod:`fedprox_cli.common.registry`)."""

    name: str
    params: Dict[str, Any]

    def without(self, *keys: str) -> dict[str, Any]:
        """The parameters but ``keys``."""
        return {k: v for k, v in self.params.items() if k not in keys}


@dataclass
class RunConfig(Checked):
    """The run config, typed: ``conf/config.yaml``'s keys (their meaning is commented there)."""

    T: int = key("a positive integer", lambda v: v > 0)
    K: int = key("a positive integer", lambda v: v > 0)
    n: int = key("a positive integer", lambda v: v > 0)
    B: Any = key("a positive integer or 'full'", lambda v: v == "full" or positive_int(v))
    seed: int = key("an integer >= 0", lambda v: v >= 0)
    seeds: int = key("a positive integer (runs seed, seed+1, ... in one process)", lambda v: v > 0)
    device: str = key(
        "auto, cpu or cuda", lambda v: v in ("auto", "cpu", "cuda") or v.startswith("cuda:")
    )
    dtype: str = key(f"one of {', '.join(DTYPES)}", lambda v: v in DTYPES)
    matmul_precision: str = key(
        f"one of {', '.join(MATMUL_PRECISIONS)}", lambda v: v in MATMUL_PRECISIONS
    )
    eval_every: int = key("a non-negative integer (0: round T alone)", lambda v: v >= 0)
    engine: str = key(f"one of {', '.join(ENGINES)}", lambda v: v in ENGINES)
    compile: Any = key("true, false or auto", lambda v: v is True or v is False or v == "auto")
    participation: float = key("in (0, 1]", lambda v: 0 < v <= 1)
    checkpoint_every: int = key("an integer >= 0 (0 = off)", lambda v: v >= 0)
    keep_checkpoint: bool = key("true or false")
    resume: bool = key("true or false")
    mixed_code: bool = key("true or false")
    progress_every_s: float = key("a number of seconds >= 0", lambda v: v >= 0)
    dry_run: bool = key("true or false")
    sweep_metric: str = key(
        f"a metrics.csv column ({', '.join(metric_table.BUILT_IN)} or a plugin's)",
        lambda v: v in metric_table.names(),
    )
    data: Data = MISSING
    oracle: Oracle = MISSING
    metrics: Metrics = MISSING
    dataset: Any = MISSING  # a Choice once typed (validate.typed); a dict in the ConfigStore
    partition: Any = MISSING
    model: Any = MISSING
    regularizer: Any = MISSING
    compressor: Any = MISSING
    algorithm: Any = MISSING
    logger: Any = MISSING  # the tracker's settings (runs.trackers reads them)

    def __post_init__(self) -> None:
        super().__post_init__()
        require(
            not (self.compile is True and self.engine == "loop"),
            "compile=true compiles the vmap engine; use engine=vmap or auto, or compile=false",
        )
        require(
            not (self.keep_checkpoint is True and self.checkpoint_every == 0),
            "keep_checkpoint=true keeps nothing with checkpoint_every=0 (checkpoints off); "
            "set checkpoint_every > 0",
        )
        require(
            self.seeds == 1 or self.compile is not True,
            f"seeds={self.seeds} joins the runs' gradient calls, which are not compiled; use "
            f"compile=false or auto, or seeds=1 with compile=true",
        )
        require(
            self.seeds == 1 or self.engine != "loop",
            f"seeds={self.seeds} computes the runs' gradients in one vmap call; use engine=vmap "
            f"or auto, or seeds=1 with engine=loop",
        )

    @property
    def batch(self) -> int | None:
        """B as a number; None = full local gradients."""
        return None if self.B == "full" else self.B

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    @cached_property
    def torch_device(self) -> torch.device:
        """The device by :func:`resolve_device`'s rule (``auto``: the sweep job's share of the
        visible GPUs, else the CPU); a CUDA device that is not here is refused."""
        return resolve_device(self.device, sweep_job())


def sweep_job() -> int | None:
    """The number of the sweep job being run (Hydra's ``hydra.job.num``), None outside a sweep."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():
        return None
    hc = HydraConfig.get()
    return (
        int(hc.job.num)
        if hc.mode == RunMode.MULTIRUN and cast(DictConfig, hc.job).get("num") is not None
        else None
    )


def finite(key: str, v: object) -> None:
    """Refuse NaN, infinities and integers beyond int64 (every integer of a config is one)."""
    require(
        not (isinstance(v, float) and not math.isfinite(v)),
        f"{key} must be a finite number, got {v!r}",
    )
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 2**63:
        raise UserError(
            f"{key} must lie within +-2**63 (an int64), got a number of {len(str(abs(v)))} digits"
        )


ConfigStore.instance().store(name="fedrun_schema", node=RunConfig)
