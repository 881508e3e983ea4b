"""The suite runs on any clone with any cache: every cache the code under test uses lies in a
folder of the test process (tests/conftest.py), never in the user's home; and the closing
summary says why tests were skipped."""

import os
from pathlib import Path

from conftest import _CACHE, child_env, fedrun, skip_reasons


def test_every_cache_of_a_test_lies_in_the_sessions_folder(tmp_path):
    from fedprox_cli.common.files import cache_folder
    from fedprox_cli.data import cache as decoded
    from fedprox_cli.engine import choice, compile
    from fedprox_cli.runs import provenance

    home = Path("~").expanduser()
    for path in (
        cache_folder(),
        choice.cache_file(),
        compile.cache_file(),
        decoded.folder(),
        provenance.cache_file(),
        Path(os.environ["MPLCONFIGDIR"]),
    ):
        # this process's folder, or that of the pytest process which started this worker (a
        # worker inherits its environment): a folder of the test session either way
        session = [p for p in path.parents if p.name.startswith(_CACHE.name[:-8])]
        assert session and session[0].parent == _CACHE.parent, path
        assert not path.is_relative_to(home / ".cache"), path
    for name in ("XDG_CACHE_HOME", "FEDPROX_CACHE", "MPLCONFIGDIR"):
        assert child_env()[name] == os.environ[name]  # subprocesses inherit it
    p = fedrun("dataset=digits", "model=linear", "n=4", "K=2", "T=1", f"hydra.run.dir={tmp_path}")
    assert p.returncode == 0, p.stderr
    assert choice.cache_file().is_file()  # the run's engine record: in the session's cache


def test_the_closing_line_counts_each_reason_of_a_skip():
    class Report:
        def __init__(self, why):
            self.longrepr = ("t.py", 1, f"Skipped: {why}")

    reports = [Report("no CUDA device")] * 2 + [Report("no SLURM here (slurm_local.sh)")] * 3
    assert skip_reasons(reports) == [(3, "no SLURM here (slurm_local.sh)"), (2, "no CUDA device")]
