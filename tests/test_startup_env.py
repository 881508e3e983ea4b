"""Start-up in any environment: no work at import that can fail (no temp folder, docstrings
stripped by ``PYTHONOPTIMIZE=2``), one crash log per user, and the memory check sized by the
process's cgroup limit (v1 and v2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import child_env

from fedprox_cli.cli import faults
from fedprox_cli.common import cgroup

COMMANDS = ("fedrun", "report", "plot", "table", "reproduce", "check_algorithm")


def python(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=child_env(**env),
        timeout=300,
    )


def test_no_usable_temp_folder_is_no_fault_at_import():
    """``tempfile.gettempdir()`` fails where no temp folder can be written: the commands load,
    and an internal error outside a run is still its one line (no traceback kept)."""
    p = python(
        "import tempfile\n"
        "def none(): raise FileNotFoundError(2, 'No usable temporary directory found')\n"
        "tempfile.gettempdir = none\n"
        "from fedprox_cli.cli import faults, main, status, table, plot, reproduce\n"
        "raise SystemExit(faults.crash(RuntimeError('boom')))\n"
    )
    assert p.returncode == 3, p.stderr
    assert p.stderr.strip().splitlines() == ["fedrun: internal error: RuntimeError: boom"]


def test_the_crash_log_is_the_users_own():
    log = faults.crash_log()
    assert log is not None and log.name == f"fedrun-error-{os.getuid()}.log"


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_runs_without_docstrings(command):
    """``PYTHONOPTIMIZE=2`` strips docstrings, of which the commands make their help."""
    p = python(
        f"import sys; sys.argv = ['x', '--help']\n"
        f"from fedprox_cli.cli import commands\n"
        f"commands.{command}()\n",
        PYTHONOPTIMIZE="2",
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() and "Traceback" not in p.stderr


@pytest.mark.parametrize(
    "files, expected",
    [
        ({"cgroup": "0::/a/b\n", "a/b/memory.max": "1073741824\n", "a/memory.max": "max\n"}, 2**30),
        ({"cgroup": "0::/a/b\n", "a/b/memory.max": "max\n", "a/memory.max": "2147483648\n"}, 2**31),
        ({"cgroup": "0::/\n", "memory.max": "max\n"}, None),
        (
            {
                "cgroup": "4:memory:/job\n1:cpu:/\n",
                "memory/job/memory.limit_in_bytes": "536870912\n",
            },
            2**29,
        ),
        (  # v1 inside a container: its group's path is not under the mount; the mount's root
            {"cgroup": "4:cpu,memory:/elsewhere\n", "memory/memory.limit_in_bytes": "268435456"},
            2**28,
        ),
        ({"cgroup": "4:memory:/\n", "memory/memory.limit_in_bytes": "9223372036854771712"}, None),
    ],
)
def test_the_cgroup_memory_limit_is_read(tmp_path, files, expected):
    for name, text in files.items():
        path = tmp_path / ("sys/" if name != "cgroup" else "") / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert cgroup.limit(tmp_path / "cgroup", tmp_path / "sys") == expected


def test_the_memory_check_is_sized_by_the_cgroup_limit(tmp_path, monkeypatch):
    from fedprox_cli.engine import memory

    (tmp_path / "cgroup").write_text("0::/job\n")
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "memory.max").write_text(f"{2**30}\n")
    monkeypatch.setattr(cgroup, "PROC", tmp_path / "cgroup")
    monkeypatch.setattr(cgroup, "ROOT", Path(tmp_path))
    import torch

    assert memory.available_bytes(torch.device("cpu")) == (2**30, "its cgroup's memory limit")


ASCII_LOCALE = {  # a locale whose encoding is ASCII, and Python's UTF-8 mode kept off
    "LANG": "C",
    "LC_ALL": "C",
    "PYTHONCOERCECLOCALE": "0",
    "PYTHONUTF8": "0",
}


def command(name: str, *args, **env: str) -> subprocess.CompletedProcess:
    """The console script ``name`` (``table``, ``plot``, ...) with ``args`` as a process."""
    e = {k: v for k, v in child_env(**env).items() if k != "PYTHONIOENCODING"}
    return subprocess.run(
        [sys.executable, "-c", f"from fedprox_cli.cli import commands; commands.{name}()", *args],
        capture_output=True,
        env=e,
        timeout=300,
    )


def test_non_ascii_text_under_an_ascii_locale(tmp_path):
    """Labels, a title and a --where value typed in UTF-8 under an ASCII locale reach the
    table file, the figure and the match as the text typed (UTF-8 in files), never exit 1."""
    from conftest import fedrun

    run = tmp_path / "run"
    made = fedrun("dataset=digits", "model=linear", "n=4", "K=2", "T=2", f"hydra.run.dir={run}")
    assert made.returncode == 0, made.stderr
    out = tmp_path / "table.md"
    p = command(
        "table", str(run), "--label", "fedcanon=Méthode→1", "--out", str(out), **ASCII_LOCALE
    )
    assert p.returncode == 0, p.stderr
    assert "| Méthode→1 |" in out.read_text(encoding="utf-8")
    p = command(
        "plot",
        str(run),
        "--label",
        "fedcanon=Méthode→1",
        "--title",
        "Köln",
        "--out",
        str(tmp_path / "f.png"),
        **ASCII_LOCALE,
    )
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "f.png").is_file()
    p = command(
        "table", str(run), "--where", "dataset=digits", "--label", "fedcanon=Ä", **ASCII_LOCALE
    )
    assert p.returncode == 0, p.stderr
    assert b"| \\xc4 |" in p.stdout  # the terminal's ASCII: escaped, as every line fedrun prints
