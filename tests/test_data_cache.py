"""The decoded-data cache (data/cache.py) shared by users: an entry is as readable as the cache
folder (mkdtemp made it its writer's alone, so another user's run found an entry it could not
list and read it as empty: ``dataset digits ... cannot be read (KeyError: 'train_x')``), and an
entry that cannot be listed or holds no arrays is decoded again, never read as complete."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

from fedprox_cli.data import cache

ARRAYS = {"train_x": np.arange(6, dtype=np.uint8), "train_y": np.zeros(6, dtype=np.int64)}


@pytest.fixture
def entry(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDPROX_CACHE", str(tmp_path / "decoded"))
    source = tmp_path / "source.bin"
    source.write_bytes(b"data")
    return cache.folder() / f"toy-{cache.key('toy', [source])}", source


def _decode(calls: list[int]):
    def decode() -> dict[str, np.ndarray]:
        calls.append(1)
        return dict(ARRAYS)

    return decode


def test_an_entry_is_as_readable_as_a_folder_made_there(entry):
    path, source = entry
    calls: list[int] = []
    cache.decoded("toy", [source], _decode(calls))
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o777 & ~umask  # mkdtemp's was 0o700
    again = cache.decoded("toy", [source], _decode(calls))
    assert calls == [1] and sorted(again) == ["train_x", "train_y"] and again.origin


def test_an_entry_without_arrays_is_decoded_again(entry, capsys):
    path, source = entry
    path.mkdir(parents=True)  # listed as empty: another user's entry, or emptied
    calls: list[int] = []
    out = cache.decoded("toy", [source], _decode(calls))
    assert calls == [1] and np.array_equal(out["train_x"], ARRAYS["train_x"])
    assert "cannot be read (ValueError); decoding it again" in capsys.readouterr().err


def test_an_entry_that_cannot_be_listed_is_decoded_again(entry, monkeypatch, capsys):
    path, source = entry
    cache.decoded("toy", [source], _decode([]))
    listdir = os.listdir

    def refused(p):
        if os.fspath(p) == os.fspath(path):
            raise PermissionError(13, "Permission denied", os.fspath(p))
        return listdir(p)

    monkeypatch.setattr(cache.os, "listdir", refused)
    calls: list[int] = []
    out = cache.decoded("toy", [source], _decode(calls))
    assert calls == [1] and sorted(out) == ["train_x", "train_y"]
    assert "cannot be read (PermissionError)" in capsys.readouterr().err
