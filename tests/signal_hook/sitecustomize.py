"""Test hook: SIGTERM to fedrun at the n-th entry into a phase of a job (FEDRUN_SIGNAL_AT=phase:n),
counted in the process that runs the phase: fedrun's, or its drawing process's (plotting), whose
signal goes to fedrun, the process the hook loaded in first (FEDRUN_SIGNAL_PID)."""

import os
import signal
import sys

_at = os.environ.get("FEDRUN_SIGNAL_AT")
if _at:
    phase, nth = _at.split(":")
    count = [0]
    os.environ.setdefault("FEDRUN_SIGNAL_PID", str(os.getpid()))  # inherited by its children

    def _hit():
        count[0] += 1
        if count[0] == int(nth):
            os.kill(int(os.environ["FEDRUN_SIGNAL_PID"]), signal.SIGTERM)

    class _Finder:
        """import: the runner module's import (the first job's)."""

        def find_spec(self, name, path=None, target=None):
            if name == "fedprox_cli.runs.runner" and phase == "import":
                _hit()
            return None

    sys.meta_path.insert(0, _Finder())
    where = {
        "data": ("fedprox_cli.data", "load_config"),
        "build": ("fedprox_cli.engine.models", "build"),
        "training": ("fedprox_cli.runs.training", "Training.round"),
        "evaluation": ("fedprox_cli.runs.training", "evaluate"),
        "plotting": ("fedprox_cli.analysis.run_plots", "plot_run"),
        "between": ("fedprox_cli.cli.main", "sweep_value"),
    }.get(phase)
    if where:
        import importlib
        import importlib.abc

        def _patch():
            mod = importlib.import_module(where[0])
            owner, attr = (
                (getattr(mod, where[1].split(".")[0]), where[1].split(".")[1])
                if "." in where[1]
                else (mod, where[1])
            )
            orig = getattr(owner, attr)

            def hooked(*a, **k):
                _hit()
                return orig(*a, **k)

            setattr(owner, attr, hooked)

        class _After(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == where[0]:
                    sys.meta_path.remove(self)
                    spec = importlib.util.find_spec(name)
                    loader = spec.loader
                    orig_exec = loader.exec_module

                    def exec_module(module):
                        orig_exec(module)
                        sys.modules[name] = module
                        _patch()

                    loader.exec_module = exec_module
                    return spec
                return None

        import importlib.util

        sys.meta_path.insert(0, _After())
