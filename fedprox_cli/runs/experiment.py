"""Setting up a run, shared by one run (:mod:`runner`), seed-batched runs (:mod:`seeds`) and the
dry run: a composed config checked (:func:`validate`), then everything built from it
(:func:`build`): the data and its partition, the model, the oracle, the algorithm's
environment."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf

from .. import algorithms, data
from ..algorithms import contract
from ..common import metric_table
from ..common.errors import UserError, no_parameter, require
from ..common.files import inside
from ..common.registry import Lookup
from ..config.compose import option_file
from ..config.forms import Composed, Plain
from ..config.schema import RunConfig
from ..config.validate import resolved, typed
from ..engine import memory, models
from ..engine.client_data import ClientData
from ..engine.device import set_matmul_precision
from ..engine.models import FlatModel
from ..engine.oracle import Oracle
from ..operators import compressors, regularizers
from . import checkpoint, numerics, provenance


@dataclass(frozen=True)
class Record:
    """The config as composed, resolved once when it is validated: what a run's ``config.yaml``
    holds (``text``), what its digests (:func:`checkpoint.digests`), the comparison with a prior
    run (:func:`checkpoint.check_same_run`) and its figures' title read (``resolved``)."""

    resolved: Plain
    text: str

    @classmethod
    def of(cls, composed: Composed) -> Record:
        return cls(resolved(composed), OmegaConf.to_yaml(composed, resolve=True))


@dataclass
class Experiment:
    cfg: RunConfig
    record: Record
    dataset: data.Dataset
    clients: list[np.ndarray]
    flat: FlatModel
    h: regularizers.Regularizer
    alg: algorithms.Algorithm[Any]
    env: algorithms.Env
    stationarity_step: float
    digest: str  # of the config that determines the numbers (checkpoint.digest)
    fingerprint: dict[str, Any]  # of the data and partition it trains on (provenance)
    numerics: dict[str, Any]  # what its numbers depend on beyond the config (numerics.of_run)
    metrics: list[metric_table.Metric] = field(default_factory=metric_table.plugins)  # plugins'

    @property
    def oracle(self) -> Oracle:
        return self.env.oracle


@dataclass
class Validated:
    """The parts of a run that need neither data nor a model, checked: the one object a run's
    life passes down (the typed config, and the record of the config as composed)."""

    cfg: RunConfig
    record: Record
    alg: algorithms.Algorithm[Any]
    h: regularizers.Regularizer
    comp: compressors.Compressor
    stationarity_step: float


def validate(composed: Composed, reference: Composed | None = None) -> Validated:
    """Every check that needs no data (:class:`UserError`), shared by the run and the dry run:
    the config typed (:func:`config.validate.typed`: keys against ``reference``, the same group
    choices without overrides; types and ranges), then :func:`checks`."""
    cfg = typed(composed, reference)
    return Validated(cfg, Record.of(composed), *checks(cfg))


def checks(
    cfg: RunConfig,
) -> tuple[algorithms.Algorithm[Any], regularizers.Regularizer, compressors.Compressor, float]:
    """The checks of a typed config: the sizes against the device's memory
    (:func:`memory.check_sizes`), the algorithm, regularizer and compressor with their
    parameters, and every prox parameter against h; returns the algorithm, h, the compressor
    and the stationarity step."""
    cfg.torch_device  # a CUDA device that is not here is refused now  # noqa: B018
    memory.check_sizes(cfg, cfg.model.name, cfg.model.without("init"), runs=cfg.seeds)
    for group, registry in (
        ("algorithm", algorithms.base),
        ("regularizer", regularizers),
        ("compressor", compressors),
    ):
        node = getattr(cfg, group)
        known_parameters(group, registry.lookup, node.name, dict(node.params))
    alg = algorithms.build(cfg.algorithm.name, **cfg.algorithm.params)
    h = regularizers.build(cfg.regularizer.name, **cfg.regularizer.params)
    comp = compressors.build(cfg.compressor.name, **cfg.compressor.params)
    require(
        not (alg.smooth_only and not h.is_zero),
        f"algorithm {alg.name} is defined for h = 0 only; use regularizer=none",
    )
    require(
        comp.is_identity or alg.takes_compressor,
        f"algorithm {alg.name} has no compressed uplink; use compressor=identity",
    )
    subdir = (cfg.logger or {}).get("subdir")
    if subdir is not None:  # a tracker writes inside the run folder only
        inside("the run folder (logger.subdir)", str(subdir))
    require(
        cfg.participation == 1 or alg.partial_participation,
        f"algorithm {alg.name} is defined for full participation only; use participation=1",
    )
    for name, step in contract.prox_steps(alg, cfg.K, cfg.T).items():
        h.check_step(step, f"algorithm.{name} (prox parameter of {alg.name})")
    stat_step = cfg.metrics.stationarity_step
    stat_step = contract.stationarity_step(alg, cfg.K) if stat_step is None else stat_step
    require(stat_step > 0, f"metrics.stationarity_step must be > 0, got {stat_step}")
    check_stationarity_step(
        stat_step, cfg.torch_dtype, natural=cfg.metrics.stationarity_step is None
    )
    h.check_step(stat_step, "metrics.stationarity_step")
    return alg, h, comp, stat_step


def known_parameters(
    group: str, lookup: Lookup[type[Any]], name: str, params: dict[str, Any]
) -> None:
    """Refuse a parameter the option's class does not take, in the words the command line
    gets (:func:`errors.no_parameter`: what it takes, did you mean), naming the YAML it was
    set in (a ``--config-dir`` file: a key given on the command line is refused before)."""
    target = params.pop("_target_", None)
    takes = [f.name for f in fields(lookup(name, target))]
    unknown = sorted(set(params) - set(takes))
    if unknown:
        where = option_file(group)
        raise UserError(
            no_parameter(group, name, unknown[0], takes, target)
            + (f" (set in {where})" if where else "")
        )


def check_stationarity_step(step: float, dtype: torch.dtype, natural: bool = False) -> None:
    """Refuse a stationarity step ``s`` outside [eps, 1/eps] of the run's number type: below,
    ``s * grad f`` vanishes against x in ``x - s grad f`` (the gradient mapping measures
    rounding, or 0/0 = NaN), above, ``x`` vanishes against it. ``natural``: the step is the
    algorithm's own (no ``metrics.stationarity_step`` given), checked from below only: a step
    that large makes the run diverge, which the run reports."""
    eps = torch.finfo(dtype).eps
    if step < eps or (step > 1 / eps and not natural):
        given = f"the algorithm's natural step {step:.3g}" if natural else f"{step:.3g}"
        raise UserError(
            f"metrics.stationarity_step ({given}) must lie in [{eps:.3g}, {1 / eps:.3g}] for "
            f"{str(dtype).removeprefix('torch.')} numbers, where the proximal gradient mapping "
            f"measures the gradient and not rounding; set metrics.stationarity_step in that range"
        )


def build(
    run: Composed | Validated,
    reference: Composed | None = None,
    dataset: data.Dataset | None = None,
    runs: int = 1,
    data_fingerprint: dict[str, Any] | None = None,
    engine: str | None = None,
    compiled: bool | None = None,
) -> Experiment:
    """Build the run's pieces from ``run``: its :func:`validate`, or a composed config, validated
    here (against ``reference``); every problem is a :class:`UserError`. ``dataset``: the loaded
    data (default: load it); ``runs``: how many runs share one vmap call (:mod:`seeds`): its
    memory plan covers all of them. A run of a seed batch (``seeds`` > 1) computes with the
    vmap engine, uncompiled, also when it is the only one left to run
    (:data:`checkpoint.BATCHED`).
    ``data_fingerprint``: :func:`provenance.of_data` of ``dataset``, if made already (the
    runs of a batch share the data, which a build moves to the device). ``engine``: the engine
    to compute with instead of ``cfg.engine`` (a resume's recorded one: :mod:`numerics`), and
    ``compiled`` whether its call is compiled instead of ``cfg.compile``'s choice (likewise)."""
    v = run if isinstance(run, Validated) else validate(run, reference)
    cfg, alg, h, comp = v.cfg, v.alg, v.h, v.comp
    device, dtype = cfg.torch_device, cfg.torch_dtype
    set_matmul_precision(cfg.matmul_precision)  # process-wide: set by every run
    ds = dataset or data.load_config(cfg)
    fingerprint = data_fingerprint or provenance.of_data(ds)
    clients = split(cfg, ds)
    torch.manual_seed(cfg.seed)
    module = models.build(cfg.model.name, ds.input_shape, ds.num_classes, **cfg.model.params).to(
        device, dtype
    )
    flat = FlatModel(module)
    probe = algorithms.TimedRound(alg, h, comp, cfg.K, cfg.T, cfg.seed)  # what engine=auto times
    oracle = _oracle(cfg, ds, clients, module, flat, runs, engine, compiled, probe)
    env = algorithms.Env(oracle, h, comp, cfg.n, cfg.K, cfg.T, cfg.participation, cfg.seed)
    ds.test_x, ds.test_y = ds.test_x.to(device, dtype), ds.test_y.to(device)
    return Experiment(
        cfg,
        v.record,
        ds,
        clients,
        flat,
        h,
        alg,
        env,
        v.stationarity_step,
        checkpoint.digest(v.record.resolved),
        {**fingerprint, **provenance.of_partition(clients)},
        numerics.of_run(
            oracle.engine_choice["engine"], cfg, oracle.compile_choice.get("compiled", False)
        ),
    )


def _oracle(
    cfg: RunConfig,
    ds: data.Dataset,
    clients: list[np.ndarray],
    module: torch.nn.Module,
    flat: FlatModel,
    runs: int,
    engine: str | None,
    compiled: bool | None,
    probe: algorithms.TimedRound,
) -> Oracle:
    """The run's gradient oracle over its clients' data, its calls planned for the memory at
    hand (:func:`memory.plan`; ``runs`` sharing one vmap call); ``engine``, ``compiled``: see
    :func:`build`; ``probe``: the run's round, which ``engine=auto`` times."""
    device, dtype = cfg.torch_device, cfg.torch_dtype
    cd = ClientData.build(ds.train_x.to(dtype), ds.train_y, clients, device)
    fp = memory.footprint(module, flat.d, ds.input_shape, dtype, device)
    chunk, eval_batch = memory.plan(
        fp,
        cfg.n * runs,
        cfg.batch or cd.index.shape[1],
        cfg.oracle.chunk,
        cfg.oracle.eval_batch,
        cfg.oracle.memory_gb,
    )
    batched = cfg.seeds > 1  # joined to the other seeds' calls, however many are left to run
    return Oracle(
        flat,
        cd,
        cfg.batch,
        cfg.seed,
        engine="vmap" if batched else engine or cfg.engine,
        chunk=max(1, min(cfg.n, chunk // runs)) if runs > 1 else chunk,
        eval_batch=eval_batch,
        train_samples=cfg.metrics.train_samples,
        compile=False if batched else cfg.compile if compiled is None else compiled,
        client_steps=cfg.T * cfg.K * max(1, round(cfg.participation * cfg.n)),
        probe=probe,
    )


def split(cfg: RunConfig, ds: data.Dataset) -> list[np.ndarray]:
    """The clients' sample ids: ``ds``'s training set partitioned as ``cfg`` says."""
    require(
        cfg.n <= len(ds.train_y),
        f"n = {cfg.n} clients exceeds the {len(ds.train_y)} training samples of {ds.name}",
    )
    p = cfg.partition
    return data.partition(
        p.name,
        ds.train_y.numpy(),
        cfg.n,
        p.params["seed"],
        min_size=p.params["min_size"],
        groups=None if ds.groups is None else ds.groups.numpy(),
        **p.without("seed", "min_size"),
    )
