"""The tutorial of docs/extending.md, "Claims of your own paper": the FedProx plugin's claims file
(examples/fedprox_server/fedprox_server/claims/fedprox.yaml) listed, planned, run, recorded,
reported and checked in a folder outside the repository, and a damaged copy of its results caught by check.
Its T made small (6 rounds instead of 20) to keep the test short; its runs launched by
``fedrun-reproduce run`` as the tutorial's are."""

import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
from test_example_fedprox import install_from_source

from fedprox_cli.cli import reproduce

CLAIMS = (
    Path(__file__).resolve().parents[1]
    / "examples"
    / "fedprox_server"
    / "fedprox_server"
    / "claims"
    / "fedprox.yaml"
)


@pytest.fixture
def paper(tmp_path, monkeypatch):
    """A paper's folder with the tutorial's claims at T = 6, the example plugin importable by
    the runs `run` launches."""
    path = install_from_source(tmp_path / "site")
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([*map(str, path), os.environ.get("PYTHONPATH", "")])
    )
    for p in reversed(path):
        monkeypatch.syspath_prepend(str(p))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    folder = tmp_path / "mypaper"
    folder.mkdir()
    text = CLAIMS.read_text()
    for old, new in (("T=20", "T=6"), ("T: 20", "T: 6"), ("T = 20", "T = 6")):
        assert old in text
        text = text.replace(old, new)
    (folder / "claims.yaml").write_text(text)
    monkeypatch.chdir(folder)
    return folder


def test_the_tutorial_from_claims_to_a_checked_report(paper, capsys):
    mine = ["--claims", "claims.yaml"]
    assert reproduce.main(["list", *mine]) == 0
    out = capsys.readouterr().out
    assert "fedprox-mu0      FedProx Remark 1       not run" in out
    assert reproduce.main(["plan", *mine]) == 0
    out = capsys.readouterr().out
    assert "hydra.sweep.dir=results/reproduction/vs_fedavg" in out
    assert reproduce.main(["plan", "fedprox-mu0", "--device", "cuda", *mine]) == 0
    assert "device=cuda" in capsys.readouterr().out
    ids = ["fedprox-mu0", "fedprox-slower"]
    assert reproduce.main(["run", *ids, *mine, "hydra/launcher=basic"]) == 0
    capsys.readouterr()
    assert reproduce.main(["record", *mine]) == 0  # outside git: each test's order unknown
    assert "2 tests' bounds were declared relative to its runs" in capsys.readouterr().out
    assert reproduce.main(["report", *mine]) == 0
    assert capsys.readouterr().out.strip() == "fedrun-reproduce: wrote results/REPRODUCTION.md"
    report = (paper / "results" / "REPRODUCTION.md").read_text()
    assert "from the claims in `claims.yaml` and the runs" in report
    assert "| **reproduced** | [figure](reproduction/figures/fedprox-mu0.png) |" in report
    assert "| **reproduced** | [figure](reproduction/figures/fedprox-slower.png) |" in report
    for name in ("fedprox-mu0", "fedprox-slower"):
        assert (paper / "results" / "reproduction" / "figures" / f"{name}.pdf").is_file()
    assert reproduce.main(["check", *mine]) == 0
    code = Path(reproduce.__file__).resolve().parents[1]
    assert capsys.readouterr().out.strip() == (
        "fedrun-reproduce: check: 2 claims, every word and number as committed "
        f"(recomputed by the fedprox_cli at {code})"
    )
    # a damaged copy: one number of one run edited
    shutil.copytree(paper / "results", paper / "damaged")
    run = sorted((paper / "damaged" / "reproduction" / "vs_fedavg").glob("*algorithm=fedprox*"))[0]
    frame = pd.read_csv(run / "metrics.csv")
    frame.loc[frame.index[-1], "objective"] *= 0.5
    frame.to_csv(run / "metrics.csv", index=False)
    assert reproduce.main(["check", *mine, "--results", "damaged"]) == 1
    out = capsys.readouterr().out
    assert f"fedrun-reproduce: check: evidence vs_fedavg/{run.name}: metrics.csv edited" in out
    # a misspelled key: one line, the file and the key, exit 2
    (paper / "claims.yaml").write_text(
        (paper / "claims.yaml").read_text().replace("folders: [mu0]", "folder: [mu0]")
    )
    assert reproduce.main(["check", *mine]) == 2
    assert capsys.readouterr().err.strip() == (
        "fedrun-reproduce: error: claims.yaml:17: claim fedprox-mu0: ran[0].folder: unknown key "
        "'folder' of a run set (did you mean 'folders'?)"
    )
