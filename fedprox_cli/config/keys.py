"""Config keys that cannot change a run's numbers (run control), defined once: the resume check
ignores them (with ``T``, which may be extended), the checkpoint digest leaves them out, and
the reports never split groups of runs by them."""

from __future__ import annotations

from typing import Any

RUN_CONTROL = frozenset(
    {
        "checkpoint_every",
        "keep_checkpoint",
        "resume",
        "mixed_code",
        "data.root",
        "oracle.chunk",
        "oracle.eval_batch",
        "oracle.memory_gb",
        "progress_every_s",
        "dry_run",
        "sweep_metric",
        "seeds",
        "metrics.per_client",
    }
)
RUN_CONTROL_GROUPS = frozenset({"hydra", "logger"})  # every key under these


def is_run_control(key: str) -> bool:
    """Whether the dotted config ``key`` is where a run reads, writes or reports, not what it
    computes (a different chunk may change the last bits of float sums, not the results)."""
    return key in RUN_CONTROL or key.split(".")[0] in RUN_CONTROL_GROUPS


# Keys added to conf/config.yaml after runs were recorded, each with the value that computes
# what those runs computed: a recorded config.yaml without one is read as having it, so reports
# pool such runs with newer ones and a resume check accepts them.
ADDED = {
    "matmul_precision": "highest",
    "seeds": 1,
    "metrics.train_samples": None,
    "compile": False,
    "metrics.per_client": False,
    "mixed_code": False,
}


# Values that compute what another value of the key computes, for a run's identity (the resume
# check's digest, a sweep job's folder, the reports' groups): ``compile=auto`` runs the eager
# engine unless its measurement takes compiled rounds, whose numbers differ from eager ones only
# in the order of float sums (as another ``oracle.chunk``'s do), and a resume keeps its choice.
SAME_AS = {"compile": {"auto": False}}


def canonical(flat: dict[str, Any]) -> dict[str, Any]:
    """A flattened config with each :data:`SAME_AS` value replaced by the one it computes as."""
    return {
        k: SAME_AS[k].get(v, v) if k in SAME_AS and isinstance(v, str) else v
        for k, v in flat.items()
    }


def complete(flat: dict[str, Any]) -> dict[str, Any]:
    """A flattened recorded config with the :data:`ADDED` keys it lacks, :func:`canonical`."""
    return canonical({**ADDED, **flat})
