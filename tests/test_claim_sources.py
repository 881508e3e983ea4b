"""Claims from sources (fedprox_cli/claims/sources.py): the papers as one source among files,
folders and installed packages' entry points, each file checked where it comes in
(claims/schema.py): one line naming the file, its line, the claim and the key, exit 2."""

import shutil
from pathlib import Path

import pytest
from conftest import needs_example

from fedprox_cli.claims import declare, sources
from fedprox_cli.cli import reproduce

REPO = Path(__file__).resolve().parent.parent
CLAIMS = REPO / "examples" / "fedprox_server" / "fedprox_server" / "claims" / "fedprox.yaml"


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.chdir(tmp_path)


def said(argv, capsys) -> tuple[int, list[str]]:
    code = reproduce.main(argv)
    return code, capsys.readouterr().err.splitlines()


def test_the_papers_are_the_default_source_read_like_any_other():
    papers = sources.resolve(["papers"])
    assert sources.resolve(None) == papers
    assert papers[0].files[0][1] == "fedprox_cli/claims/fedcanon.yaml" and papers[0].blocks
    claims = sources.claims()
    assert [c.id for c in claims] == [c.id for c in sources.load(papers)]
    assert {c.paper for c in claims} == {"FedCanon", "FedCEF", "FedNMap"}
    assert claims[0].origin == "fedprox_cli/claims/fedcanon.yaml:2"


def _edited(tmp_path, old: str, new: str) -> Path:
    text = CLAIMS.read_text()
    assert old in text
    (tmp_path / "mine.yaml").write_text(text.replace(old, new, 1))
    return tmp_path / "mine.yaml"


BAD = {  # an edit of the tutorial's claims file -> the one line it gives
    "misspelled key": (
        "      seeds: [0, 1]\n",
        "      sedes: [0, 1]\n",
        "mine.yaml:21: claim fedprox-mu0: ran[0].sedes: unknown key 'sedes' of a run set "
        "(did you mean 'seeds'?)",
    ),
    "wrong type": (
        "paper_T: 20",
        "paper_T: twenty",
        "mine.yaml:12: claim fedprox-mu0: paper_T: must be a whole number or null, got text "
        "'twenty'",
    ),
    "unknown algorithm": (
        "{algorithm: fedavg}",
        "{algorithm: fedavgg}",
        "mine.yaml:20: claim fedprox-mu0: ran[0].points[0].algorithm: unknown algorithm "
        "'fedavgg' (fedrun's algorithm options and installed plugins) (did you mean 'fedavg'?)",
    ),
    "unknown dataset": (
        "overrides: [dataset=digits,",
        "overrides: [dataset=digitz,",
        "mine.yaml:16: claim fedprox-mu0: ran[0].overrides[0]: unknown dataset 'digitz' "
        "(fedrun's dataset options and installed plugins) (did you mean 'digits'?)",
    ),
    "unknown metric": (
        "metric: objective, key: algorithm, values: [fedprox]",
        "metric: objectiv, key: algorithm, values: [fedprox]",
        "mine.yaml:24: claim fedprox-mu0: tests[0].metric: unknown metric 'objectiv' (a column "
        "of metrics.csv) (did you mean 'objective'?)",
    ),
    "test key not in the grid": (
        "key: algorithm, values: [fedavg, fedprox]",
        "key: algo, values: [fedavg, fedprox]",
        "mine.yaml:53: claim fedprox-slower: tests[0].key: 'algo' is no key of its runs' grid "
        "or points (algorithm, algorithm.mu) (did you mean 'algorithm'?)",
    ),
    "test value not in the grid": (
        "values: [fedavg, fedprox]",
        "values: [fedavg, fedprx]",
        "mine.yaml:53: claim fedprox-slower: tests[0].values: 'fedprx' is not among its runs' "
        "values of algorithm (fedavg, fedprox) (did you mean 'fedprox'?)",
    ),
    "unknown kind": (
        "kind: order",
        "kind: ordering",
        "mine.yaml:53: claim fedprox-slower: tests[0].kind: must be one of order, slope, drop, "
        "ratio, level, got 'ordering' (did you mean 'order'?)",
    ),
    "missing key": ("  paper: FedProx\n", "", "mine.yaml:4: claim fedprox-mu0: a claim needs the key 'paper'"),
    "not YAML": ('  quote: "At mu', '  quote "At mu', "mine.yaml:9: not YAML (could not find expected ':')"),
}  # fmt: skip


@needs_example
@pytest.mark.parametrize("case", BAD)
def test_a_mistake_in_a_claims_file_is_one_line_naming_file_line_and_key(
    case, tmp_path, capsys
):
    old, new, line = BAD[case]
    mine = _edited(tmp_path, old, new)
    for command in ("list", "plan", "run", "record", "report", "check"):
        argv = [command, *(["fedprox-mu0"] if command == "run" else []), "--claims", "mine.yaml"]
        assert said(argv, capsys) == (2, [f"fedrun-reproduce: error: {line}"]), command
    assert mine.exists()


@needs_example
def test_sources_by_name_file_and_folder_and_ids_unique_across_them(tmp_path, capsys):
    folder = tmp_path / "paper"
    folder.mkdir()
    shutil.copy(CLAIMS, folder / "a.yaml")
    (folder / "stand_ins.yaml").write_text("digits: scikit-learn's 1,797 8x8 digits\n")
    found = sources.resolve(["paper"])
    assert found[0].files == ((Path("paper/a.yaml"), "paper/a.yaml"),)
    assert found[0].stand_ins == {"digits": "scikit-learn's 1,797 8x8 digits"}
    assert [c.id for c in sources.load(found)] == ["fedprox-mu0", "fedprox-slower"]
    shutil.copy(CLAIMS, tmp_path / "b.yaml")
    assert said(["list", "--claims", "paper", "--claims", "b.yaml"], capsys) == (
        2,
        [
            "fedrun-reproduce: error: b.yaml:4: claim id 'fedprox-mu0' is declared twice "
            "(first at paper/a.yaml:4)"
        ],
    )
    code, err = said(["list", "--claims", "papres"], capsys)
    assert code == 2 and err[0].endswith("(did you mean 'papers'?)"), err
    (tmp_path / "empty").mkdir()
    assert said(["list", "--claims", "empty"], capsys) == (
        2,
        ["fedrun-reproduce: error: --claims empty: no claims file (*.yaml) in the folder"],
    )


@needs_example
def test_a_package_ships_claims_through_its_entry_point(tmp_path, monkeypatch, capsys):
    site = tmp_path / "site"
    (site / "mypaper" / "claims").mkdir(parents=True)
    (site / "mypaper" / "__init__.py").write_text("")
    shutil.copy(CLAIMS, site / "mypaper" / "claims" / "draft.yaml")
    info = site / "mypaper-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mypaper\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[fedprox_cli.claims]\nmypaper = mypaper.claims\n")
    monkeypatch.syspath_prepend(str(site))
    assert "mypaper" in sources.installed()
    claims = sources.claims(["mypaper"])
    assert [c.origin for c in claims] == ["mypaper/claims/draft.yaml:4", "mypaper/claims/draft.yaml:33"]
    assert reproduce.main(["list", "--claims", "mypaper"]) == 0
    out = capsys.readouterr().out
    assert "fedprox-mu0      FedProx Remark 1       not run" in out
    assert not (tmp_path / "results" / "REPRODUCTION.md").exists()
