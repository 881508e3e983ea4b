"""check names every change of the evidence since its digests were recorded, by file, run and
cause, also after `report` ran again; a timestamp or line-end change is none. On a small copy
of the committed results (FedNMap Fig. 5's folders)."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from fedprox_cli.claims import declare, digests, history, sources
from fedprox_cli.cli import reproduce
from fedprox_cli.common import run_files

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "results"
FIG5 = ("fednmap_fig5", "fednmap_fig5_seeds12")
CLAIM = "fednmap-fig5c"


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


@pytest.fixture
def copy(tmp_path):
    """FedNMap Fig. 5's run folders, the digests, the report and the figures it links."""
    rep = tmp_path / "results" / "reproduction"
    for f in FIG5:
        shutil.copytree(RESULTS / "reproduction" / f, rep / f)
    (rep / "figures").mkdir()
    for c in declare.select(sources.claims(), ["fednmap-fig5b", CLAIM]):
        for suffix in (".png", ".pdf"):
            name = c.figure.removesuffix(".png") + suffix
            shutil.copy(RESULTS / name, tmp_path / "results" / name)
    shutil.copy(RESULTS / "reproduction" / digests.FILE, rep)
    shutil.copy(RESULTS / "reproduction" / history.FILE, rep)
    shutil.copy(RESULTS / "REPRODUCTION.md", tmp_path / "results")
    (tmp_path / "docs").mkdir()
    shutil.copy(REPO / "README.md", tmp_path)
    shutil.copy(REPO / "docs" / "reproducing.md", tmp_path / "docs")
    return tmp_path


def check(where: Path, capsys) -> tuple[int, str]:
    capsys.readouterr()
    code = reproduce.main(
        ["check", CLAIM, "--results", str(where / "results"), "--root", str(where)]
    )
    return code, capsys.readouterr().out


def run_dir(where: Path, n: int) -> Path:
    return where / "results" / "reproduction" / "fednmap_fig5" / str(n)


def edit_summary(d: Path) -> None:
    s = json.loads((d / "summary.json").read_text())
    s["final"]["test_acc"] = 0.99
    (d / "summary.json").write_text(json.dumps(s, indent=2))


def edit_overrides(d: Path) -> None:
    path = d / ".hydra" / "overrides.yaml"
    path.write_text(path.read_text().replace("n=30", "n=20"))


def mid_curve(d: Path) -> None:
    lines = (d / "metrics.csv").read_text().splitlines(keepends=True)
    lines[5] = lines[5].replace("0.", "0.9", 1)
    (d / "metrics.csv").write_text("".join(lines))


def swap(where: Path) -> None:
    a, b = run_dir(where, 3) / "metrics.csv", run_dir(where, 4) / "metrics.csv"
    text = a.read_text()
    a.write_text(b.read_text())
    b.write_text(text)


DAMAGE = {
    "copied": (
        lambda w: shutil.copytree(run_dir(w, 3), run_dir(w, 99)),
        ["evidence fednmap_fig5/99:", "added, a copy of fednmap_fig5/3"],
    ),
    "copied beside": (
        lambda w: shutil.copytree(run_dir(w, 3), run_dir(w, 3).with_name("3copy")),
        ["evidence fednmap_fig5/3copy:", "added, a copy of fednmap_fig5/3"],
    ),
    "moved": (
        lambda w: run_dir(w, 3).rename(run_dir(w, 3).with_name("3moved")),
        ["evidence fednmap_fig5/3moved:", "moved from fednmap_fig5/3"],
    ),
    "deleted": (
        lambda w: shutil.rmtree(run_dir(w, 3)),
        ["evidence fednmap_fig5/3:", "metrics.csv", "deleted"],
    ),
    "summary edited": (
        lambda w: edit_summary(run_dir(w, 3)),
        ["evidence fednmap_fig5/3: summary.json edited", "summary.json's final test_acc is 0.99"],
    ),
    "overrides edited": (
        lambda w: edit_overrides(run_dir(w, 3)),
        ["evidence fednmap_fig5/3: .hydra/overrides.yaml edited", ".hydra/overrides.yaml n=20"],
    ),
    "mid-curve edit": (
        lambda w: mid_curve(run_dir(w, 3)),
        ["evidence fednmap_fig5/3: metrics.csv edited"],
    ),
    "swapped": (
        swap,
        [
            "evidence fednmap_fig5/3: metrics.csv holds the recorded content of fednmap_fig5/4 (swapped)",
            "evidence fednmap_fig5/4: metrics.csv holds the recorded content of fednmap_fig5/3 (swapped)",
        ],
    ),
}


def test_the_copy_passes_as_recorded(copy, capsys):
    assert check(copy, capsys)[0] == 0


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_each_change_is_named_with_file_run_and_cause_also_after_report(
    copy, capsys, monkeypatch, case
):
    damage, said = DAMAGE[case]
    damage(copy)
    code, out = check(copy, capsys)
    assert code == 1 and all(s in out for s in said), out
    if case in ("copied", "summary edited"):  # the report rewritten from the damaged evidence
        mine = declare.select(sources.claims(), ["fednmap-fig5b", CLAIM])
        monkeypatch.setattr(sources, "load", lambda found: mine)  # the copy holds their runs
        where = ["--results", str(copy / "results"), "--root", str(copy)]
        assert reproduce.main(["report", *where]) == 0
        code, out = check(copy, capsys)
        assert code == 1 and said[0] in out, out


def test_a_touch_or_crlf_line_ends_are_no_change(copy, capsys):
    d = run_dir(copy, 3)
    os.utime(d / "metrics.csv", (1, 1))
    for name in ("config.yaml", ".hydra/overrides.yaml"):
        (d / name).write_bytes((d / name).read_bytes().replace(b"\n", b"\r\n"))
    assert check(copy, capsys)[0] == 0


def test_record_makes_the_digests_of_evidence_made_otherwise(copy, capsys):
    shutil.copytree(run_dir(copy, 3), run_dir(copy, 99))
    assert reproduce.main(["record", CLAIM, "--results", str(copy / "results")]) == 0
    code, out = check(copy, capsys)
    assert "evidence fednmap_fig5/99" not in out  # recorded: the duplicate is named instead
    assert "the same run (settings and seed)" in out and code == 1


def _elsewhere(where: Path) -> Path:
    return where / "elsewhere"


def _link(where: Path, target: Path, name: Path) -> None:
    shutil.move(name, target)
    name.symlink_to(target, target_is_directory=True)


def _edit_digest(where: Path, keep=None) -> None:
    path = where / "results" / "reproduction" / digests.FILE
    lines = path.read_text().splitlines(keepends=True)
    if keep is not None:
        path.write_text("".join(lines[:keep]))
        return
    i = next(i for i, x in enumerate(lines) if x.endswith("fednmap_fig5/3/metrics.csv\n"))
    lines[i] = "0" * 16 + lines[i][16:]
    path.write_text("".join(lines))


LINKED = "refused: evidence must be the repository's own files"
EDITED = f"reproduction/{digests.FILE}: the digest file itself was edited"
NAMED = {
    "run folder a link": (
        lambda w: _link(w, _elsewhere(w), run_dir(w, 3)),
        [f"evidence fednmap_fig5/3: a symbolic link to {{elsewhere}}, {LINKED}"],
        "fednmap_fig5/3: metrics.csv",  # the files it replaced are not called deleted
    ),
    "claim folder a link": (
        lambda w: _link(w, _elsewhere(w), run_dir(w, 3).parent),
        [f"evidence fednmap_fig5: a symbolic link to {{elsewhere}}, {LINKED}"],
        "deleted",
    ),
    "a digest line edited": (_edit_digest, [EDITED], "evidence fednmap_fig5/3"),
    "the digest file cut to one line": (
        lambda w: _edit_digest(w, keep=1),
        [EDITED],
        "added",
    ),
    "a digest line outside every claim": (
        lambda w: (
            (w / "results" / "reproduction" / digests.FILE)
            .open("a")
            .write("0123456789abcdef  elsewhere/extra.csv\n")
        ),
        [f"{digests.FILE}: a line for elsewhere/extra.csv, outside the evidence of every claim"],
        "",
    ),
}


@pytest.mark.parametrize("case", sorted(NAMED))
def test_check_names_the_damaged_thing_links_digest_edits_and_stray_lines(copy, capsys, case):
    damage, said, never = NAMED[case]
    damage(copy)
    code, out = check(copy, capsys)
    said = [s.format(elsewhere=_elsewhere(copy)) for s in said]
    assert code == 1 and all(s in out for s in said), out
    assert not never or never not in out, out


def test_a_claim_left_without_a_usable_run_is_named_and_the_others_still_checked(copy, capsys):
    for d in [
        *run_dir(copy, 0).parent.iterdir(),
        *(copy / "results/reproduction/fednmap_fig5_seeds12").iterdir(),
    ]:
        if d.is_dir() and "eta_0.05" in (d / ".hydra" / "overrides.yaml").read_text():
            shutil.rmtree(d)
    capsys.readouterr()
    where = ["--results", str(copy / "results"), "--root", str(copy)]
    code = reproduce.main(["check", "fednmap-fig5b", CLAIM, *where])
    out = capsys.readouterr().out
    assert code == 1 and f"check: {CLAIM}: claim {CLAIM}: no finished or diverged run" in out
    assert "check: fednmap-fig5b:" not in out, out  # the other claim's words and numbers hold
    assert "deleted" in out  # and the digests name what went


def test_a_changed_claims_file_is_named_by_its_digest():
    report = digests.said({"reproduction/EVIDENCE.sha256": "aaa", "fedprox_cli/claims/x.yaml": "b"})
    now = {"reproduction/EVIDENCE.sha256": "aaa", "fedprox_cli/claims/x.yaml": "c"}
    assert digests.edited(report, now) == [
        "fedprox_cli/claims/x.yaml: changed since the report was written (b -> c)"
    ]
    assert digests.edited(report, {**now, "fedprox_cli/claims/x.yaml": "b"}) == []


@pytest.mark.parametrize("keep", [None, 1])
def test_an_edited_digest_file_is_one_line_naming_it_and_blames_no_run(copy, capsys, keep):
    _edit_digest(copy, keep=keep)
    code, out = check(copy, capsys)
    said = [x for x in out.splitlines() if ": check: " in x and ": check: note: " not in x]
    assert code == 1 and len(said) == 1 and EDITED in said[0], out


def test_what_a_clone_lacks_is_no_evidence(copy, capsys, monkeypatch):
    """A run's lock, owner, checkpoint, partition and metrics figure are not kept by the
    repository (.gitignore): present but not recorded, or recorded but absent (a clone of
    evidence recorded where the run was made), check is unmoved by them."""
    d = run_dir(copy, 3)
    for name in sorted(run_files.NOT_EVIDENCE):
        (d / name).write_bytes(b"left by the run")
    code, out = check(copy, capsys)
    assert code == 0, out
    rep = copy / "results" / "reproduction"
    assert not set(digests.current(rep, ["fednmap_fig5"])) & {
        f"fednmap_fig5/3/{n}" for n in run_files.NOT_EVIDENCE
    }
    for name in run_files.NOT_EVIDENCE:
        (d / name).unlink()
    recorded = digests.read(rep)
    extra = {f"fednmap_fig5/3/{n}": "0123456789abcdef" for n in run_files.NOT_EVIDENCE}
    monkeypatch.setattr(digests, "read", lambda root: {**recorded, **extra})
    claims = declare.select(sources.claims(), [CLAIM])
    assert digests.changes(rep, claims) == []


def test_the_repository_ignores_what_is_no_evidence():
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        input="".join(
            f"results/reproduction/any/run/{n}\n" for n in sorted(run_files.NOT_EVIDENCE)
        ),
        capture_output=True,
        text=True,
        cwd=REPO,
    ).stdout.split()
    assert len(ignored) == len(run_files.NOT_EVIDENCE), ignored
