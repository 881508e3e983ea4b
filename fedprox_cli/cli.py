"""The ``fedrun`` command: Hydra composes the config, :func:`runner.run` does the work.

Hydra's own error printing is bypassed (HYDRA_FULL_ERROR is set for the call) so that every
config problem -- an unknown group option or key, a bad override -- becomes one line on stderr
and exit code 2. Set FEDRUN_DEBUG=1 to see tracebacks instead.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from . import resolvers, runner
from .config import CONF_DIR

_JOBS: list[tuple[Path, int]] = []  # (run folder, exit code) of each job in this process

_DROP = ("full_key:", "object_type", "reference_type", "Config search path", "provider=", "path=",
         "To append to your config", "Set the environment variable")


def one_line(exc: BaseException) -> str:
    """A Hydra/OmegaConf error message squeezed into one readable line."""
    lines = []
    for line in str(exc).splitlines():
        line = line.strip()
        if not line or line.startswith(_DROP):
            continue
        if line.startswith("Config search path"):
            break
        lines.append(line.rstrip(":") + ":" if line.startswith("Available options") else line)
    text = " ".join(lines).replace(": ", ": ", 1)
    return text.replace(":\t", ": ").replace("\t", ", ") or type(exc).__name__


resolvers.register()  # before Hydra composes anything


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def _job(cfg: DictConfig) -> None:
    hc = HydraConfig.get()
    out = Path(hc.runtime.output_dir)
    multirun = hc.mode.name == "MULTIRUN"
    code = runner.run(cfg, out, progress=not multirun or sys.stderr.isatty())
    _JOBS.append((out, code))
    if code == 0 and not multirun:
        print(f"metrics: {out / 'metrics.csv'}\nplot:    {out / 'metrics.png'}")


def _report_sweep() -> int:
    failed = [(p, c) for p, c in _JOBS if c != 0]
    print(f"sweep: {len(_JOBS) - len(failed)} of {len(_JOBS)} jobs finished"
          + (f" in {_JOBS[0][0].parent}" if _JOBS else ""))
    for p, c in failed:
        print(f"  {p}: {runner.status_of(p)}", file=sys.stderr)
    return max((c for _, c in _JOBS), default=0)


def main() -> None:
    debug = bool(os.environ.get("FEDRUN_DEBUG"))
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        _job()
    except (HydraException, OmegaConfBaseException, ValueError) as e:
        if debug:
            raise
        print(f"fedrun: error: {one_line(e)}", file=sys.stderr)
        sys.exit(2)
    multirun = any(a in ("-m", "--multirun") for a in sys.argv[1:])
    code = _report_sweep() if multirun else max((c for _, c in _JOBS), default=0)
    sys.exit(code)
