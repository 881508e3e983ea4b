import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def fedrun(*args, cwd=None, timeout=600):
    """Run ``fedrun`` (as ``python -m fedprox_cli``) on this checkout; returns the CompletedProcess."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.run([sys.executable, "-m", "fedprox_cli", *args], cwd=cwd or ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def run_fedrun():
    return fedrun
