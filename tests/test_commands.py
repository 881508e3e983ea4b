"""Every console script's first instant (``cli/commands.py``): a stop signal while the command's
modules still load ends it with one line and exit code 130, never a traceback or a signal's own
exit status; a package that is not installed is one line naming it and how to install it, exit
code 2, in every command. The signal is raised by the child itself at a chosen import (no
timing), and a package is made missing by :func:`conftest.without`."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
from conftest import child_env, without

# console script -> (its function in cli.commands, its module in cli/, arguments that do work)
COMMANDS = {
    "fedrun": (
        "fedrun",
        "main",
        ["dataset=digits", "model=linear", "T=1", "K=2", "n=4", "hydra.run.dir=run"],
    ),
    "fedrun-report": ("report", "status", ["."]),
    "fedrun-plot": ("plot", "plot", [".", "--out", "x.png"]),
    "fedrun-table": ("table", "table", ["."]),
    "fedrun-reproduce": ("reproduce", "reproduce", ["list"]),
    "fedrun-check-algorithm": ("check_algorithm", "check_algorithm", ["fedavg"]),
}

DRIVER = """
import importlib.abc, signal, sys
sig, at, prog, function = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
class At(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == at:
            sys.meta_path.remove(self)
            signal.raise_signal(sig)
sys.meta_path.insert(0, At())
from fedprox_cli.cli import commands
sys.argv = [prog, *sys.argv[5:]]
getattr(commands, function)()
"""


def as_from_a_terminal() -> None:
    """The stop signals' default actions in the child, as a command typed in a terminal has
    them, whatever the suite inherited (``nohup`` ignores SIGHUP, a background job SIGINT; a
    command keeps a signal ignored so, as documented)."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def command(tmp_path, prog: str, *driver_args: str, env=None) -> subprocess.CompletedProcess:
    function, _, args = COMMANDS[prog]
    return subprocess.run(
        [sys.executable, "-c", DRIVER, *driver_args, prog, function, *args],
        cwd=tmp_path,
        env=env or child_env(OMP_NUM_THREADS="1"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        preexec_fn=as_from_a_terminal,
    )


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
@pytest.mark.parametrize("prog", list(COMMANDS))
def test_a_stop_signal_while_a_command_loads_is_one_line(tmp_path, prog, sig):
    """At the import of the command's own module: the first thing after the gate."""
    p = command(tmp_path, prog, str(int(sig)), f"fedprox_cli.cli.{COMMANDS[prog][1]}")
    assert (p.returncode, p.stderr) == (130, f"{prog}: interrupted\n")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("at", ["torch", "fedprox_cli.runs.runner"])
def test_a_stop_signal_while_fedrun_loads_torch_is_one_line(tmp_path, at, sig):
    """Deeper: inside fedrun's own handling, as its run's modules load (torch: while Hydra
    composes where a plugin imports it, else after Hydra made the run folder, as the runner's
    modules load);
    the shell that started it may have ignored SIGINT (a background job): fedrun catches it all
    the same. The run never began: no run folder is left."""

    def ignored():
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    function, _, args = COMMANDS["fedrun"]
    p = subprocess.run(
        [sys.executable, "-c", DRIVER, str(int(sig)), at, "fedrun", function, *args],
        cwd=tmp_path,
        env=child_env(OMP_NUM_THREADS="1"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        preexec_fn=ignored,
    )
    assert (p.returncode, p.stderr) == (130, "fedrun: interrupted\n")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "prog,module,package",
    [
        *((prog, "omegaconf", "omegaconf") for prog in COMMANDS),
        ("fedrun", "torch", "torch"),
        ("fedrun-check-algorithm", "torch", "torch"),
        ("fedrun-plot", "matplotlib", "matplotlib"),
        ("fedrun", "hydra", "hydra-core"),
    ],
)
def test_a_missing_package_is_one_line_naming_it(tmp_path, prog, module, package):
    p = command(tmp_path, prog, "0", "-", env=without(tmp_path, module))
    assert p.returncode == 2, p.stderr
    line = f"{prog}: error: the package {package} is not installed (No module named {module!r})"
    assert p.stderr.startswith(line) and p.stderr.count("\n") == 1, p.stderr
    assert f"pip install '{package}" in p.stderr and "make setup" in p.stderr


READING = """
import signal, sys
from fedprox_cli.common import guarded
from fedprox_cli.cli import commands
read, calls = guarded.read_text, []
def reading(*a, **k):
    calls.append(1)
    if len(calls) == 3:
        signal.raise_signal(signal.SIGINT)
    return read(*a, **k)
guarded.read_text = reading
sys.argv = sys.argv[1:]
getattr(commands, sys.argv[0].removeprefix("fedrun-"))()
"""


@pytest.mark.parametrize("prog", ["fedrun-report", "fedrun-plot", "fedrun-table"])
def test_ctrl_c_while_an_analysis_command_reads_runs_is_one_line(tmp_path, prog):
    """Ctrl-C in the middle of reading a folder of runs (the third file read)."""
    from fedprox_cli import run

    assert run(COMMANDS["fedrun"][2][:-1], folder=tmp_path / "runs" / "a").status == "finished"
    p = subprocess.run(
        [sys.executable, "-c", READING, prog, str(tmp_path / "runs")],
        cwd=tmp_path,
        env=child_env(OMP_NUM_THREADS="1"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert (p.returncode, p.stderr) == (130, f"{prog}: interrupted\n")
