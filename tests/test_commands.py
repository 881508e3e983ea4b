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


ENDING = """
import atexit, importlib.abc, os, sys
atexit._clear()  # hooks of the site's start-up (a .pth file importing certifi) are not the test's
from fedprox_cli.cli import commands
class Torn:  # a module's object: deleted by the interpreter's teardown of the modules
    def __del__(self, open=open):  # builtins may be gone by then
        open("torn down", "w").close()
torn = Torn()
def hook():
    atexit.register(lambda: open("exit hook ran", "w").close())
class At(importlib.abc.MetaPathFinder):  # the hook registered as the command loads its help
    def find_spec(self, name, path=None, target=None):
        if name == "fedprox_cli.cli.help":
            sys.meta_path.remove(self)
            hook()
sys.argv = ["fedrun", "--help"]
def in_python():
    try:
        commands.fedrun()
    except SystemExit as e:
        print("caught", e.code)
    sys.exit(7)
caller = os.environ["CALLER"]
if caller == "in Python":
    sys.meta_path.insert(0, At())
    in_python()
else:
    hook() if caller == "main program, a hook before" else sys.meta_path.insert(0, At())
    commands.fedrun()
"""


def test_a_commands_process_ends_without_the_interpreters_teardown(tmp_path):
    """Called by the main program's top level (the console script, python -m fedprox_cli), a
    command ends its process once it has its exit code: every exit hook run, its output whole,
    the modules not torn down (cli/commands.py). Where an exit hook was registered before the
    command started (it would run after the command's), or called from Python (the caller's
    process and exit code are its own), the process ends as usual."""
    ended = {}
    for caller in ("main program", "main program, a hook before", "in Python"):
        folder = tmp_path / str(len(ended))
        folder.mkdir()
        p = subprocess.run(
            [sys.executable, "-c", ENDING],
            cwd=folder,
            env=child_env(CALLER=caller),
            capture_output=True,
            text=True,
            timeout=120,
        )
        ended[caller] = (p.returncode, p.stdout, p.stderr, (folder / "torn down").exists())
        assert (folder / "exit hook ran").exists(), caller
    code, out, err, torn = ended["main program"]
    assert (code, err, torn) == (0, "", False)
    assert out.startswith("fedrun trains a model") and len(out) > 2000
    assert ended["main program, a hook before"] == (0, out, "", True)
    assert ended["in Python"] == (7, out + "caught 0\n", "", True)
