"""Unreadable is not absent (docs/robustness.md, "Files that cannot be read"): a file of a run
that is there but cannot be opened or read (EIO, EACCES, injected at ``os.open``) is
``unreadable`` in every reader -- fedrun into the folder, its dry run, fedrun-report,
fedrun-table, fedrun-plot, load_runs -- never a folder without a run; and a checkpoint that
cannot be read for the same reason is kept, with advice to retry."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import in_process
import pytest
from conftest import child_env, fedrun

from fedprox_cli.cli import commands
from fedprox_cli.common.errors import UserError

TINY = ["dataset=digits", "model=linear", "n=4", "K=2", "T=3"]
ENV = child_env(OMP_NUM_THREADS="1")

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("unreadable")
    assert fedrun(*TINY, f"hydra.run.dir={root / 'r'}", cwd=root, env=ENV).returncode == 0
    return root


def refuse_reading(monkeypatch, name: str, err: int) -> None:
    """Opening a file called ``name`` for reading fails with ``err``; writing it still works."""
    real = os.open

    def fake(path, flags, *args, **kwargs):
        if Path(path).name == name and not flags & (os.O_WRONLY | os.O_RDWR):
            raise OSError(err, os.strerror(err), str(path))
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", fake)


@pytest.mark.parametrize("err", [errno.EIO, errno.EACCES])
def test_an_unreadable_summary_is_unreadable_everywhere(finished, monkeypatch, err):
    before = (finished / "r" / "summary.json").read_bytes()
    refuse_reading(monkeypatch, "summary.json", err)
    why = os.strerror(err)
    for extra in ([], ["dry_run=true"]):
        p = fedrun(*TINY, f"hydra.run.dir={finished / 'r'}", *extra, cwd=finished, env=ENV)
        assert p.returncode == 2, p.stderr
        assert (
            f"fedrun: error: {finished / 'r' / 'summary.json'} is unreadable: {why}; nothing in the folder "
            f"was changed: re-run once it can be read" in p.stderr.splitlines()
        ), p.stderr
    p = in_process.run(lambda _: commands.report(), "fedrun-report", [str(finished)], finished, ENV)
    assert (
        f"{finished / 'r' / 'summary.json'} is unreadable: {why}" in p.stderr
        and "not started" not in p.stdout
    )
    assert "1 runs: 1 unreadable" in p.stdout
    for cmd in ("table", "plot"):
        p = in_process.run(
            lambda _, c=cmd: getattr(commands, c)(), f"fedrun-{cmd}", [str(finished)], finished, ENV
        )
        assert f"skipped {finished / 'r'}: {finished / 'r' / 'summary.json'} is unreadable: {why}" in p.stderr, p.stderr
        assert "no summary" not in p.stdout + p.stderr
    import fedprox_cli

    with (
        pytest.warns(UserWarning, match=f"summary.json is unreadable: {why}"),
        pytest.raises(UserError),
    ):
        fedprox_cli.load_runs(finished)  # the one run skipped as unreadable: none left
    monkeypatch.undo()
    assert (finished / "r" / "summary.json").read_bytes() == before


def test_a_checkpoint_that_cannot_be_read_now_is_kept(tmp_path, monkeypatch):
    out = tmp_path / "r"
    assert (
        fedrun(
            *TINY, "T=2", "keep_checkpoint=true", f"hydra.run.dir={out}", cwd=tmp_path, env=ENV
        ).returncode
        == 0
    )
    refuse_reading(monkeypatch, "checkpoint.pt", errno.EIO)
    p = fedrun(
        *TINY, "T=3", f"hydra.run.dir={out}", cwd=tmp_path, env=ENV
    )  # extend: reads the checkpoint
    assert p.returncode == 2
    assert (
        f"fedrun: error: cannot read checkpoint {out / 'checkpoint.pt'} (Input/output error); it is kept as "
        f"it is: re-run the same command once the file can be read again" in p.stderr.splitlines()
    ), p.stderr
    assert "delete" not in p.stderr
    monkeypatch.undo()
    assert fedrun(*TINY, "T=3", f"hydra.run.dir={out}", cwd=tmp_path, env=ENV).returncode == 0
