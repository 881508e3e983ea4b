"""A run folder without a code record was made by an older version: continuing its rounds is
refused unless ``mixed_code=true``, which records that its first rounds came from code not
recorded."""

from __future__ import annotations

import json

from conftest import fedrun

ARGS = ("dataset=digits", "model=linear", "n=4", "K=2", "keep_checkpoint=true")


def test_a_run_of_an_older_version_continues_only_under_a_true_record(tmp_path):
    out = tmp_path / "run"
    assert fedrun(*ARGS, "T=4", f"hydra.run.dir={out}", cwd=tmp_path).returncode == 0
    summary = json.loads((out / "summary.json").read_text())
    del summary["code"]  # as an older fedprox_cli wrote it
    (out / "summary.json").write_text(json.dumps(summary))
    metrics = (out / "metrics.csv").read_bytes()
    p = fedrun(*ARGS, "T=6", f"hydra.run.dir={out}", cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines()[-1] == (
        f"fedrun: error: the run in {out} was made by other code than this (an older version of "
        f"fedprox_cli, which recorded no code): to start it over with this code, set "
        f"resume=false; to continue it from round 4 with this code, set mixed_code=true (its "
        f"record then keeps both codes and the round they changed)"
    )
    assert (out / "metrics.csv").read_bytes() == metrics
    p = fedrun(*ARGS, "T=6", "mixed_code=true", f"hydra.run.dir={out}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    history = json.loads((out / "summary.json").read_text())["code_history"]
    assert [(h["from_round"], bool(h["code"])) for h in history] == [(0, False), (4, True)]
    assert (
        "mixed code: code of an older version of fedprox_cli, which recorded no code -> this "
        "code after round 4" in p.stdout
    )


def test_a_finished_run_of_an_older_version_is_stale_not_nothing_to_do(tmp_path):
    """Re-run with the same T, a finished run without a code record is named as made by an
    older version (`stale`, as a run made by other code), in the run and in a dry run: never
    "already finished ... nothing to do", and nothing in its folder changes."""
    out = tmp_path / "run"
    assert fedrun(*ARGS, "T=4", f"hydra.run.dir={out}", cwd=tmp_path).returncode == 0
    summary = json.loads((out / "summary.json").read_text())
    del summary["code"]  # as an older fedprox_cli wrote it
    (out / "summary.json").write_text(json.dumps(summary))
    before = {f.name: f.read_bytes() for f in out.iterdir() if f.is_file()}
    p = fedrun(*ARGS, "T=4", f"hydra.run.dir={out}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "nothing to do" not in p.stdout + p.stderr
    assert (
        f"fedrun: the run in {out} is stale: it was made by other code (an older version of "
        f"fedprox_cli, which recorded no code); it is kept as it is: to re-run it, add "
        f"resume=false" in p.stdout.splitlines()
    )
    dry = fedrun(*ARGS, "T=4", "dry_run=true", f"hydra.run.dir={out}", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert "stale: made by other code (an older version of fedprox_cli" in dry.stdout
    after = {f.name: f.read_bytes() for f in out.iterdir() if f.is_file()}
    assert {k: v for k, v in after.items() if k != "fedrun.log"} == {
        k: v for k, v in before.items() if k != "fedrun.log"
    }
