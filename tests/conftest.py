import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def fedrun(*args, cwd=None, timeout=600, path=()):
    """Run ``fedrun`` (as ``python -m fedprox_cli``) on this checkout (then the folders ``path``
    and the caller's PYTHONPATH on the path); returns the CompletedProcess."""
    extra = [*map(str, path), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *extra]), PYTHONUNBUFFERED="1")
    env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.run([sys.executable, "-m", "fedprox_cli", *args], cwd=cwd or ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


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
    sweep's job records (fedprox_cli.sweep): folders are named by config, not number."""
    from fedprox_cli.sweep import records
    return [Path(r.folder) for r in sorted(records(Path(sweep)), key=lambda r: r.num)]
