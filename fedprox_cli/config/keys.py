"""Config keys that cannot change a run's numbers (run control), defined once: the resume check
ignores them (with ``T``, which may be extended), the checkpoint digest leaves them out, and
the reports never split groups of runs by them."""

from __future__ import annotations

RUN_CONTROL = frozenset(
    {
        "checkpoint_every",
        "keep_checkpoint",
        "resume",
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
}


def complete(flat: dict) -> dict:
    """A flattened recorded config with the :data:`ADDED` keys it lacks."""
    return {**ADDED, **flat}
