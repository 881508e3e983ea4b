"""One ending path (docs/robustness.md, "Files that cannot be written"): any OSError at any
write of a run -- the temp file's open, a write, an fsync, the rename -- injected at the Nth
call of ``os.replace``, ``os.open`` or ``os.fsync`` over every N of a tiny run, once or from
then on. Whatever fails, the run exits 0 only when its summary says ``finished``; otherwise it
exits 2, its summary says how it ended (never ``running``), or one line says that the end
could not be recorded, naming summary.json. The same command then finishes the run with the
numbers of a run that never failed."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pandas as pd
import pytest
from conftest import fedrun

TINY = ["dataset=digits", "model=linear", "n=4", "K=2", "T=3"]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def numbers(out: Path) -> pd.DataFrame:
    return pd.read_csv(out / "metrics.csv").drop(columns="time_s")


def status(out: Path) -> str | None:
    from fedprox_cli.common.run_files import read_summary

    try:
        return read_summary(out)["status"]
    except FileNotFoundError:
        return None


class Failing:
    """``os.<name>`` failing with ``err`` at its ``n``-th call on a path in ``root`` or a
    descriptor (``persistent``: and every such call after it); ``calls`` counts them."""

    def __init__(self, monkeypatch, name: str, err: int, n: int, persistent: bool, root: Path):
        real, self.calls = getattr(os, name), 0

        def call(*args, **kwargs):
            if not (isinstance(args[0], int) or str(args[0]).startswith(str(root))):
                return real(*args, **kwargs)  # the test's own files
            self.calls += 1
            if self.calls == n or persistent and self.calls > n:
                raise OSError(err, os.strerror(err), *([str(args[0])] if name != "fsync" else []))
            return real(*args, **kwargs)

        monkeypatch.setattr(os, name, call)


def calls_of(monkeypatch, tmp_path, name: str) -> int:
    """How many times a run that fails nowhere calls ``os.<name>``."""
    with monkeypatch.context() as m:
        counter = Failing(m, name, errno.EIO, 10**9, False, tmp_path)
        assert fedrun(*TINY, f"hydra.run.dir={tmp_path / 'count'}", cwd=tmp_path).returncode == 0
    return counter.calls


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("reference") / "run"
    assert fedrun(*TINY, f"hydra.run.dir={out}", cwd=out.parent).returncode == 0
    return out


@pytest.mark.parametrize(
    "name, err, persistent",
    [
        ("replace", errno.EIO, False),
        ("replace", errno.EROFS, True),
        ("open", errno.EACCES, False),
        ("open", errno.EXDEV, True),
        ("fsync", errno.EIO, False),
        ("fsync", errno.ENOSPC, True),
    ],
)
def test_any_failing_write_ends_truthfully(tmp_path, monkeypatch, reference, name, err, persistent):
    total = calls_of(monkeypatch, tmp_path, name)
    for n in range(1, total + 2, 1 if name != "open" else 3):  # os.open: every third call
        out = tmp_path / f"run{n}"
        with monkeypatch.context() as m:
            Failing(m, name, err, n, persistent, tmp_path)
            p = fedrun(*TINY, f"hydra.run.dir={out}", cwd=tmp_path)
        case = f"os.{name} failing ({errno.errorcode[err]}) at call {n}{' on' if persistent else ''}: {p.stderr}"
        assert "Traceback" not in p.stderr, case
        assert p.returncode in (0, 2), case
        said = [line for line in p.stderr.splitlines() if line.startswith("fedrun: error: ")]
        if p.returncode == 0:
            assert status(out) == "finished" and not said, case
            continue
        assert said and all(str(tmp_path) in line for line in said), (
            case
        )  # each line names its file
        st = status(out)
        unrecorded = f"could not be recorded in {out / 'summary.json'}"
        assert st not in ("running", "finished") or any(unrecorded in line for line in said), case
        assert not list(out.rglob("*.tmp*")), case
        if n % 4 == 1:  # the same command, the disk repaired: nothing lost
            again = fedrun(*TINY, f"hydra.run.dir={out}", cwd=tmp_path)
            assert again.returncode == 0 and status(out) == "finished", again.stderr
            pd.testing.assert_frame_equal(numbers(out), numbers(reference))
