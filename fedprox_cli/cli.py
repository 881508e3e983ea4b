"""The ``fedrun`` command: Hydra composes the config, :func:`runner.run` does the work.

Hydra's own error printing is bypassed (HYDRA_FULL_ERROR is set for the call) so that every
config problem -- an unknown group option or key, a bad override, an output folder that cannot
be created -- becomes one line on stderr and exit code 2. Set FEDRUN_DEBUG=1 to see tracebacks
instead.

After a multirun, :class:`SweepReport` (a Hydra callback, run in the launching process) reads
every job's ``summary.json`` in the sweep folder -- jobs may have run in other processes
(``hydra/launcher=joblib``) -- and reports those that did not finish.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from . import CONF_DIR, resolvers
from .errors import describe
from .outputs import read_summary
from .signals import sigterm_interrupts

EXIT_CODES = {"finished": 0, "diverged": 1, "error": 2, "refused": 2, "interrupted": 130}

_SINGLE_RUN: list[int] = []  # exit code of the run made in this process (not multirun)
_SWEEPS: list[Path] = []     # sweep folder of the multirun made by this process

_DROP = ("full_key:", "object_type", "reference_type", "Config search path", "provider=", "path=",
         "To append to your config", "Set the environment variable")


def one_line(exc: BaseException) -> str:
    """A Hydra/OmegaConf/OS error message squeezed into one readable line."""
    if isinstance(exc, OSError) and not isinstance(exc, HydraException):
        return describe(exc)
    lines = []
    for line in str(exc).splitlines():
        line = line.strip()
        if not line or line.startswith(_DROP):
            continue
        if line.startswith("Config search path"):
            break
        lines.append(line.rstrip(":") + ":" if line.startswith("Available options") else line)
    text = " ".join(lines).replace(":\t", ": ").replace("\t", ", ") or type(exc).__name__
    if isinstance(exc.__cause__, OmegaConfBaseException):  # e.g. "Key 'x' is not in struct"
        text += " " + one_line(exc.__cause__)
    return text


resolvers.register()  # before Hydra composes anything


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def _job(cfg: DictConfig) -> None:
    from . import runner  # here, so that config errors are reported before torch loads

    hc = HydraConfig.get()
    out = Path(hc.runtime.output_dir)
    multirun = hc.mode.name == "MULTIRUN"
    in_process = hc.launcher._target_.endswith("BasicLauncher")  # parallel jobs: no bars
    code = runner.run(cfg, out, progress=sys.stderr.isatty() and in_process)
    if not multirun:
        _SINGLE_RUN.append(code)
        if code == 0:
            print(f"metrics: {out / 'metrics.csv'}\nplot:    {out / 'metrics.png'}")
    elif code == EXIT_CODES["interrupted"]:
        raise KeyboardInterrupt  # stop the whole sweep, not just this job


class SweepReport(Callback):
    """Remembers the sweep folder of a multirun (see :func:`report_sweep`)."""

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        _SWEEPS.append(Path(str(config.hydra.sweep.dir)))


def _job_status(run_dir: Path) -> tuple[str, str]:
    s = read_summary(run_dir)
    if "refused" in s:
        return "refused", s["refused"]
    return s["status"], s.get("error", "")


def _natural(path: Path) -> list:
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in path.parts]


def report_sweep(sweep: Path) -> int:
    """Print how many of the sweep's jobs finished and list the others (stderr); return the
    worst exit code among them."""
    jobs = sorted((p.parent for p in sweep.rglob("summary.json")), key=_natural)
    status = {}
    for job in jobs:
        try:
            status[job] = _job_status(job)
        except (OSError, ValueError, KeyError):
            status[job] = ("missing", "no readable summary.json")
    failed = {j: s for j, s in status.items() if s[0] != "finished"}
    print(f"sweep: {len(jobs) - len(failed)} of {len(jobs)} jobs finished in {sweep}")
    for job, (st, why) in failed.items():
        print(f"  {job}: {st}" + (f" ({why})" if why else ""), file=sys.stderr)
    return max((EXIT_CODES.get(st, 1) for st, _ in status.values()), default=0)


def main() -> None:
    debug = bool(os.environ.get("FEDRUN_DEBUG"))
    os.environ["HYDRA_FULL_ERROR"] = "1"
    sigterm_interrupts()
    code = 0
    try:
        _job()
    except (HydraException, OmegaConfBaseException, ValueError, OSError) as e:
        if debug:
            raise
        print(f"fedrun: error: {one_line(e)}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        code = EXIT_CODES["interrupted"]
        if not _SWEEPS and not _SINGLE_RUN:
            print("fedrun: interrupted", file=sys.stderr)
    if _SWEEPS:
        code = max(code, report_sweep(_SWEEPS[-1]))
    sys.exit(max([code, *_SINGLE_RUN]))
