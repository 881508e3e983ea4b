"""An algorithm's state is typed (a ``TypedDict`` per algorithm, ``Algorithm[S]``): mypy, run
with the project's configuration (pyproject.toml), refuses a mistyped key where a state is read,
built or returned, and accepts the same code with the right keys."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from mypy import api

ROOT = Path(__file__).resolve().parents[1]

SNIPPET = textwrap.dedent(
    """\
    import torch

    from fedprox_cli.algorithms.base import Env
    from fedprox_cli.algorithms.fedavg import FedAvg, FedAvgState
    from fedprox_cli.algorithms.fedcanon import FedCanon, FedCanonState


    def read(s: FedCanonState) -> torch.Tensor:
        return s["z"] + s["C"].mean(0)


    def read_typo(s: FedCanonState) -> torch.Tensor:
        return s["c"].mean(0)  # typo: C


    class Mine(FedAvg):
        def round(self, state: FedAvgState, env: Env, t: int) -> FedAvgState:
            return {"z": state["z"]}


    class MineTypo(FedAvg):
        def round(self, state: FedAvgState, env: Env, t: int) -> FedAvgState:
            return {"x": state["z"]}  # typo: z


    def init_typo(z0: torch.Tensor) -> FedCanonState:
        state = FedCanon().init(z0, 4)
        state["Z"] = z0  # typo: z
        return state
    """
)


def test_a_mistyped_state_key_is_a_type_error(tmp_path, monkeypatch):
    snippet = tmp_path / "states.py"
    snippet.write_text(SNIPPET)
    monkeypatch.chdir(ROOT)  # mypy's cache of the package, as `make lint` leaves it
    monkeypatch.setenv("MYPYPATH", str(ROOT))
    out, err, code = api.run(["--config-file", str(ROOT / "pyproject.toml"), str(snippet)])
    errors = [ln for ln in out.splitlines() if ": error:" in ln]
    typos = [i for i, ln in enumerate(SNIPPET.splitlines(), 1) if "# typo" in ln]
    assert code == 1, out + err
    assert sorted({int(re.search(r":(\d+): error", ln)[1]) for ln in errors}) == typos, out
    # each typo is a TypedDict error (a read of a missing key is also Any returned, --strict)
    keyed = {int(re.search(r":(\d+): error", ln)[1]) for ln in errors if "TypedDict" in ln}
    assert sorted(keyed) == typos, out
