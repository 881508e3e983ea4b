"""A finished run whose record is damaged is never "nothing to do": its metrics.csv is read as the
readers of its evidence read it, and a damaged one is one line naming the file, exit 2, nothing
changed; no ``plot:`` line names a metrics.png that is not there."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import fedrun

ARGS = ("dataset=digits", "model=linear", "n=4", "K=2", "T=3")


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("finished") / "run"
    p = fedrun(*ARGS, f"hydra.run.dir={out}", cwd=out.parent)
    assert p.returncode == 0, p.stderr
    return out


@pytest.mark.parametrize(
    "damage, why",
    [
        (
            lambda m: m.write_bytes(m.read_bytes()[:40]),
            "is cut (no end of line after its last row)",
        ),
        (lambda m: m.write_text("round,test_acc\n0,abc\n"), "holds a value that is not a number"),
        (lambda m: m.unlink(), "is missing"),
    ],
)
def test_a_finished_run_with_a_damaged_metrics_csv_is_no_nothing_to_do(
    finished, tmp_path, damage, why
):
    out = tmp_path / "run"
    out.mkdir()
    for f in finished.iterdir():
        if f.is_file():
            (out / f.name).write_bytes(f.read_bytes())
    damage(out / "metrics.csv")
    before = {f.name: f.read_bytes() for f in out.iterdir() if f.is_file() and f.suffix != ".log"}
    p = fedrun(*ARGS, f"hydra.run.dir={out}", cwd=tmp_path)
    assert p.returncode == 2
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith(
        f"fedrun: error: the run in {out} has finished its 3 rounds, but its record is damaged: "
        f"{out / 'metrics.csv'} {why}"
    )
    assert line.endswith("it is kept as it is: to run it again, add resume=false")
    assert "nothing to do" not in p.stdout + p.stderr and "plot:" not in p.stdout
    after = {f.name: f.read_bytes() for f in out.iterdir() if f.is_file() and f.suffix != ".log"}
    assert after == before


def test_no_plot_line_names_a_figure_that_is_not_there(finished, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    for f in finished.iterdir():
        if f.is_file() and f.name != "metrics.png":
            (out / f.name).write_bytes(f.read_bytes())
    p = fedrun(*ARGS, f"hydra.run.dir={out}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "nothing to do" in p.stdout
    assert f"metrics: {out / 'metrics.csv'}" in p.stdout and "plot:" not in p.stdout
