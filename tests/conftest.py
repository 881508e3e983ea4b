import importlib.util
import os
import re
import runpy
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if sys.path[:1] != [str(ROOT)]:  # in-process runs use this checkout, as subprocesses do
    sys.path.insert(0, str(ROOT))

import in_process  # noqa: E402

# Every cache the code under test reads or writes -- fedprox_cli's engine and compile records
# and decoded datasets ($XDG_CACHE_HOME/fedprox_cli), matplotlib's font list and rc file
# (MPLCONFIGDIR), the datasets' download folder ($FEDPROX_DATA, where the user gave none) --
# in a folder of this test process, removed at its end: no test reads what the user's runs
# measured, none leaves a record in the user's cache, and a fresh clone runs as any other.
# Set at import, before a test module makes its environments; every subprocess inherits it.
_CACHE = Path(tempfile.mkdtemp(prefix="fedprox-tests-cache-"))
os.environ["XDG_CACHE_HOME"] = str(_CACHE / "xdg")
os.environ["FEDPROX_CACHE"] = str(_CACHE / "decoded")
os.environ["MPLCONFIGDIR"] = str(_CACHE / "matplotlib")
os.environ.setdefault("FEDPROX_DATA", str(_CACHE / "data"))

if os.environ.get("PYTEST_XDIST_WORKER"):  # a worker of `pytest -n` (pyproject's addopts): tiny
    os.environ["OMP_NUM_THREADS"] = "1"  # problems gain nothing from threads, and the workers
    if "torch" in sys.modules:  # share the cores; subprocesses inherit it
        sys.modules["torch"].set_num_threads(1)

MAX_WORKERS = 4  # `-n auto`: one worker per usable core, at most this many


def pytest_xdist_auto_num_workers(config):
    """How many workers ``-n auto`` starts: $PYTEST_XDIST_AUTO_NUM_WORKERS, else one per core
    this process may use (xdist's own count is of physical cores: 1 on a 2-vCPU machine), at
    most :data:`MAX_WORKERS` (the suite's longest group bounds its time beyond that)."""
    explicit = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS")
    return int(explicit) if explicit else max(1, min(len(os.sched_getaffinity(0)), MAX_WORKERS))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under ``--dist loadgroup``, the tests that share a module-scoped fixture of their own
    module (one made once: a table of runs, a reference run) run on one worker, in one group
    per module, so that it is still made once. A test with a group of its own keeps it (its
    module's other users of the fixture must then be in that group too)."""
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        module = item.nodeid.split("::")[0]
        if any(
            defs[-1].scope in ("module", "class", "package") and defs[-1].baseid == module
            for defs in item._fixtureinfo.name2fixturedefs.values()
            if defs
        ):
            item.add_marker(pytest.mark.xdist_group(module))


class _GroupedIds:
    """pytest-xdist (3.8) sends a test of an ``xdist_group`` to its group's worker by setting the
    item's ``_nodeid`` to ``<nodeid>@<group>``, which pytest 9.2 no longer reads (``nodeid`` comes
    from ``_id``): every test would run wherever it falls. After xdist's hook, the suffixed id
    is made the item's id."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items):
        for item in items:
            suffixed = item.__dict__.get("_nodeid")
            if suffixed and suffixed != item.nodeid and hasattr(item, "_id"):
                item._id = type(item._id).parse(suffixed)


def pytest_configure(config):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        config.pluginmanager.register(_GroupedIds(), "grouped_ids")


def pytest_unconfigure(config):
    shutil.rmtree(_CACHE, ignore_errors=True)


def skip_reasons(reports) -> list[tuple[int, str]]:
    """(count, reason) of the skipped tests' ``reports``, most frequent first."""
    counts: dict[str, int] = {}
    for r in reports:
        reason = r.longrepr[2] if isinstance(r.longrepr, tuple) else str(r.longrepr)
        reason = reason.removeprefix("Skipped: ")
        counts[reason] = counts.get(reason, 0) + 1
    return sorted(((n, why) for why, n in counts.items()), key=lambda c: (-c[0], c[1]))


def pytest_terminal_summary(terminalreporter):
    """A closing line of why tests were skipped: each reason (it names what would run them)
    with its count."""
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if r.skipped]
    if skipped:
        terminalreporter.write_line(f"{len(skipped)} skipped:")
        for n, why in skip_reasons(skipped):
            terminalreporter.write_line(f"  {n:4d}  {why}")


# Tests of the example package (examples/fedprox_server: a user's plugin with its own claims);
# `make test` installs it.
needs_example = pytest.mark.skipif(
    importlib.util.find_spec("fedprox_server") is None,
    reason="the example plugin is not installed: pip install --no-deps examples/fedprox_server "
    "(make test installs it)",
)


def child_env(**extra: str) -> dict[str, str]:
    """The environment of every subprocess the tests start: the tests' own (the interpreter's
    setup, e.g. carried wheels on PYTHONPATH on the device machine), with this checkout first
    on PYTHONPATH and without fedrun's debugging switches; ``extra`` on top."""
    paths = [str(ROOT), *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
    env = {k: v for k, v in os.environ.items() if k not in ("FEDRUN_DEBUG", "HYDRA_FULL_ERROR")}
    return {**env, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths)), **extra}


def fedrun(*args, cwd=None, timeout=600, env=None, path=()):
    """Run ``fedrun`` on this checkout with ``args`` in ``cwd`` (default: the checkout) under
    ``env`` (default :func:`child_env`): in this process (:mod:`in_process`: the CLI's ``main``,
    output and exit code as a subprocess would give them, the process put back afterwards),
    or as a subprocess (:func:`fedrun_process`) where the environment differs in what a process
    cannot change for itself: folders ``path`` or another PYTHONPATH, a package made missing by
    :func:`without` -- or where it is called outside the main thread (runs in parallel threads
    cannot share one process's folder, environment and streams). Returns a CompletedProcess; ``timeout`` bounds a subprocess."""
    env = dict(env or child_env(PYTHONUNBUFFERED="1"))
    if (
        path
        or "FEDRUN_TEST_MISSING" in env
        or env.get("PYTHONPATH") != child_env()["PYTHONPATH"]
        or threading.current_thread() is not threading.main_thread()
    ):
        return fedrun_process(*args, cwd=cwd, timeout=timeout, env=env, path=path)
    from fedprox_cli.cli.main import main

    return in_process.run(
        main,
        str(ROOT / "fedprox_cli" / "__main__.py"),
        list(map(str, args)),
        Path(cwd or ROOT),
        env,
    )


@pytest.fixture(autouse=True)
def no_check_progress(monkeypatch):
    """A sweep's check says how far it is every cli/dryrun.PROGRESS_S seconds: on a loaded
    machine a check of two jobs takes that long, and its line would land among the lines a
    test reads. In-process runs check without it (a test of the line sets its own);
    subprocesses' stderr is read through :func:`said`."""
    monkeypatch.setattr("fedprox_cli.cli.dryrun.PROGRESS_S", float("inf"))


def said(stderr: str) -> list[str]:
    """The lines of ``stderr`` but the progress lines a slow check prints every few seconds
    (``fedrun: checked N jobs (...)``, cli/dryrun.PROGRESS_S): on a loaded machine they come."""
    progress = re.compile(r"fedrun: checked \d+ jobs \(")
    return [line for line in stderr.splitlines() if line.strip() and not progress.match(line)]


def script(name: str, *args, cwd=None, env=None) -> subprocess.CompletedProcess:
    """``python scripts/<name> ARGS`` as a user runs it, in this process (:mod:`in_process`: the
    script's ``__main__`` block with its own argv, environment (default :func:`child_env`) and
    working folder (default this process's), its output and exit code)."""
    path = str(ROOT / "scripts" / name)
    return in_process.run(
        lambda _: runpy.run_path(path, run_name="__main__"),
        path,
        list(map(str, args)),
        Path(cwd or os.getcwd()),
        dict(env or child_env()),
    )


def fedrun_process(*args, cwd=None, timeout=600, env=None, path=()):
    """Run ``fedrun`` (as ``python -m fedprox_cli``) on this checkout in a subprocess, with the
    folders ``path`` next on PYTHONPATH; returns the CompletedProcess. For what needs a real
    process: signals, locks between processes, the interpreter's own exit, a missing package."""
    env = dict(env or child_env(PYTHONUNBUFFERED="1"))
    if path:
        first, *rest = env["PYTHONPATH"].split(os.pathsep)
        env["PYTHONPATH"] = os.pathsep.join([first, *map(str, path), *rest])
    return subprocess.run(
        [sys.executable, "-m", "fedprox_cli", *args],
        cwd=cwd or ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def run_fedrun():
    return fedrun


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny problems gain nothing from threads; on a busy machine OpenMP's spinning threads
    make them 10-50x slower. Restored afterwards. Use with
    ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def job_folders(sweep) -> list[Path]:
    """The job folders of the sweep in ``sweep`` (its last run), in launch order, from the
    sweep's job records (fedprox_cli.analysis.jobrecords): folders are named by config, not number."""
    from fedprox_cli.analysis.jobrecords import records

    return [Path(r.folder) for r in sorted(records(Path(sweep)), key=lambda r: r.num)]


_MISSING = '''import importlib.abc, os, pkgutil, sys
_GONE = tuple(os.environ["FEDRUN_TEST_MISSING"].split(","))
def _gone(name):
    return any(name == g or name.startswith(g + ".") for g in _GONE)
class _Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if _gone(name):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _Missing())
_walk = pkgutil.walk_packages
def _walk_installed(*args, **kwargs):  # Hydra's plugin scan finds no files of a missing package
    return (m for m in _walk(*args, **kwargs) if not _gone(m.name))
pkgutil.walk_packages = _walk_installed
'''


def without(tmp_path: Path, *modules: str) -> dict[str, str]:
    """The environment of a subprocess in which ``modules`` (and their submodules) are not
    installed: a ``sitecustomize`` makes importing them fail and hides them from Hydra's plugin
    scan, as if their packages were absent."""
    site = tmp_path / "missing_site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(_MISSING)
    env = child_env(FEDRUN_TEST_MISSING=",".join(modules), PYTHONUNBUFFERED="1")
    return {**env, "PYTHONPATH": os.pathsep.join([str(site), env["PYTHONPATH"]])}


def processes_of_session(sid: int) -> list[int]:
    """Live processes of the session ``sid`` (a ``start_new_session`` child's pid): what a
    command left running, e.g. a joblib pool's workers."""
    out = subprocess.run(["ps", "-o", "pid=,sid=,stat=", "-e"], capture_output=True, text=True)
    rows = (line.split() for line in out.stdout.splitlines())
    return [int(p) for p, s, stat in rows if int(s) == sid and not stat.startswith("Z")]
