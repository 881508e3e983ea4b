"""Output that cannot be written never changes a run (fedprox_cli.common.streams): closed and
broken stdout/stderr, text a stream cannot encode, and every write of the package going through
the one console. Subprocesses only where a real descriptor must be closed or broken."""

from __future__ import annotations

import ast
import errno
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import child_env

from fedprox_cli.common import streams

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "fedprox_cli"
TINY = "dataset=digits model=linear T=3 K=2 n=4"


class _Broken(io.StringIO):
    """A stream whose reader has gone (a pipe after ``head -1``)."""

    def write(self, text):
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")


def test_safe_stream_swallows_closed_broken_and_unencodable():
    closed = io.StringIO()
    closed.close()
    for s in (streams.Safe(None), streams.Safe(closed), streams.Safe(_Broken())):
        assert s.write("x\n") == 2
        s.flush()
        assert not s.isatty()
    ascii_ = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    streams.line(ascii_, "r\udcff é")
    ascii_.flush()
    assert ascii_.buffer.getvalue() == b"r\\xff \\xe9\n"


@pytest.mark.parametrize(
    "text, encoding, shown",
    [
        ("plain", "ascii", "plain"),
        ("résultats", "utf-8", "résultats"),
        ("résultats", "ascii", "r\\xe9sultats"),
        ("run\udcff\udcfe", "utf-8", "run\\xff\\xfe"),  # a folder named with bytes 0xff 0xfe
        ("x\ud800", "utf-8", "x\\ud800"),  # a lone surrogate that is no byte
        ("日本", "latin-1", "\\u65e5\\u672c"),
    ],
)
def test_escaped(text, encoding, shown):
    assert streams.escaped(text, encoding) == shown


def test_say_survives_a_closed_stderr(monkeypatch, tmp_path):
    from fedprox_cli.common import console

    monkeypatch.setattr(sys, "stderr", None)  # what Python sets for ``2>&-``
    with console.logging_to(tmp_path):
        console.say("in \udcff", "note")
        console.say("to a broken stdout", stream=_Broken())
    log = (tmp_path / "fedrun.log").read_text()
    assert "fedrun: note: in \\xff" in log and "to a broken stdout" in log


def test_every_write_goes_through_the_console():
    """No module but common/streams.py prints or writes to sys.stdout / sys.stderr itself."""
    bad = []
    for path in PKG.rglob("*.py"):
        if path.name == "streams.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "print"
            ):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} print()")
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("stdout", "stderr")
                and isinstance(node.value, ast.Name)
                and node.value.id == "sys"
                and not _allowed(path, node)
            ):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} sys.{node.attr}")
    assert not bad, bad


def _allowed(path: Path, node: ast.Attribute) -> bool:
    """``sys.stdout`` / ``sys.stderr`` handed to the console (``stream=sys.stdout``) or asked
    ``isatty()``: allowed; written to: not."""
    tree = ast.parse(path.read_text())
    for p in ast.walk(tree):
        if isinstance(p, ast.keyword) and p.arg == "stream" and ast.dump(p.value) == ast.dump(node):
            return True
        if (
            isinstance(p, ast.Attribute)
            and p.attr == "isatty"
            and ast.dump(p.value) == ast.dump(node)
            and p.value.lineno == node.lineno
        ):
            return True
    return False


def _shell(command: str, cwd: Path, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=child_env(**env), capture_output=True, timeout=600
    )


def _fedrun() -> str:
    return f"{sys.executable} -m fedprox_cli {TINY}"


def test_closed_and_broken_outputs_do_not_change_a_run(tmp_path):
    """stdout a pipe closed before the first line and stderr closed; then stderr a broken pipe
    while stdout goes to /dev/null; both runs finish, exit 0, and report nothing on a pipe."""
    r = _shell(
        f"{_fedrun()} hydra.run.dir=a 2>&- | head -c 0; echo \"rc=${{PIPESTATUS[0]}}\"", tmp_path
    )
    assert r.stdout.decode().strip() == "rc=0", r
    r = _shell(
        f"{_fedrun()} hydra.run.dir=b progress_every_s=0 2>&1 >/dev/null | head -1 >/dev/null; "
        f"echo \"rc=${{PIPESTATUS[0]}}\"",
        tmp_path,
    )
    assert r.stdout.decode().strip() == "rc=0", r
    for run in "ab":
        summary = json.loads((tmp_path / run / "summary.json").read_text())
        assert summary["status"] == "finished" and summary["round"] == 3
        assert "Traceback" not in (tmp_path / run / "fedrun.log").read_text()


def test_undecodable_folder_name_under_an_ascii_console(tmp_path):
    """A run folder named with the byte 0xff, output encoded as ASCII: the run finishes (exit 0),
    its lines name the folder escaped, and fedrun-report and load_runs read its parent."""
    folder = os.fsdecode(b"r\xff\xc3\xa9")  # an undecodable byte, then an "é"
    r = _shell(f"{_fedrun()} 'hydra.run.dir={folder}'", tmp_path, PYTHONIOENCODING="ascii")
    assert r.returncode == 0, r
    assert b"r\\xff\\xe9/metrics.csv" in r.stdout and b"Traceback" not in r.stderr
    assert json.loads((tmp_path / folder / "summary.json").read_text())["status"] == "finished"
    report = subprocess.run(
        [
            sys.executable,
            "-c",
            "from fedprox_cli.cli.commands import report; report()",
            str(tmp_path),
        ],
        env=child_env(PYTHONIOENCODING="ascii"),
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )
    assert report.returncode == 0 and b"r\\xff\\xe9" in report.stdout, report
    import fedprox_cli

    runs = fedprox_cli.load_runs(tmp_path)
    assert list(runs["folder"]) == [str(tmp_path / folder)] and list(runs["status"]) == ["finished"]
