"""A run's per-client table (``metrics.per_client=true``): the rows :mod:`engine.clients`
computes at each evaluation, written to ``clients.csv`` and ``clients_summary.csv``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..common import metric_table, run_files
from ..common.files import atomic_write_text
from ..engine import clients


class Log:
    """A run's per-client rows, ``clients.csv`` and ``clients_summary.csv`` rewritten
    (atomically) at every evaluation. A resumed run keeps the rows of the rounds up to its
    checkpoint (those after it are evaluated again), as ``metrics.csv`` does."""

    def __init__(self, out: Path, resumed_at: int | None):
        import pandas as pd

        self.out = Path(out)
        self.table = pd.DataFrame(columns=clients.COLUMNS)
        if resumed_at is not None and (self.out / run_files.CLIENTS).exists():
            old = run_files.read_clients(self.out)
            self.table = old[old[metric_table.ROUND.name] <= resumed_at]

    def add(self, t: int, values: dict[str, np.ndarray]) -> None:
        import pandas as pd

        new = pd.DataFrame(clients.rows(t, values), columns=clients.COLUMNS)
        self.table = new if self.table.empty else pd.concat([self.table, new], ignore_index=True)
        self.write()

    def write(self) -> None:
        atomic_write_text(self.out / run_files.CLIENTS, self.table.to_csv(index=False))
        atomic_write_text(
            self.out / run_files.CLIENTS_SUMMARY, clients.summary(self.table).to_csv(index=False)
        )
