"""Profiles are cached on disk (JSON data, checked when read) and in process."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipu_tune.models import clear_memory_cache, profile_model
from ipu_tune.models._profile_store import load_profile, profile_path
from ipu_tune.models._profiler import cache_dir, cache_key
from tests.conftest import REPO

from .conftest import model_cfg


@pytest.fixture
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("IPU_TUNE_CACHE_DIR", str(tmp_path))
    clear_memory_cache()
    yield tmp_path
    clear_memory_cache()


def test_cache_dir_follows_the_environment(private_cache: Path, monkeypatch) -> None:
    assert cache_dir() == private_cache
    monkeypatch.delenv("IPU_TUNE_CACHE_DIR")
    assert cache_dir() == Path.home() / ".cache" / "ipu_tune"


def test_disk_then_memory(private_cache: Path) -> None:
    cfg = model_cfg(name="mnist_cnn", input_shape=[1, 28, 28])
    key = cache_key(cfg)
    path = profile_path(private_cache, key)
    assert load_profile(path, key) is None
    first = profile_model(cfg)
    assert load_profile(path, key) == first  # written to disk, as JSON
    assert json.loads(path.read_text())["key"] == key
    assert profile_model(cfg) is first  # in-process hit: the same object
    clear_memory_cache()
    again = profile_model(cfg)  # from disk: equal, not identical
    assert again == first and again is not first


class _Payload:
    """Unpickling this creates the marker file: proof that a pickle was loaded."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.marker), "w"))


def test_a_planted_pickle_runs_nothing_and_the_profile_is_rebuilt(
        private_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    marker = tmp_path_factory.mktemp("m") / "PWNED"
    cfg = model_cfg(name="mnist_cnn", input_shape=[1, 28, 28], num_classes=6)
    path = profile_path(private_cache, cache_key(cfg))
    path.parent.mkdir(parents=True)
    bomb = pickle.dumps(_Payload(marker))
    path.write_bytes(bomb)  # in place of the JSON entry
    old = private_cache / "joblib" / "ipu_tune" / "models" / "_profiler" / "x" / "output.pkl"
    old.parent.mkdir(parents=True)
    old.write_bytes(bomb)  # where the joblib cache of earlier versions kept its pickles
    prof = profile_model(cfg)
    assert not marker.exists()
    assert prof.num_classes == 6 and prof.ops
    assert json.loads(path.read_text())["profile"]["num_classes"] == 6  # rebuilt as data


@pytest.mark.parametrize(("edit", "why"), [
    (lambda d: d["profile"]["ops"][0].update(forward_flops=float("nan")), "NaN flops"),
    (lambda d: d["profile"]["ops"][0].update(parameters="12"), "text in an int field"),
    (lambda d: d["profile"]["ops"][0].update(block=999), "block outside the list"),
    (lambda d: d["profile"]["block_stats"][0].update(last_op=10**9), "ops outside the list"),
    (lambda d: d["profile"].update(input_kind="pickle"), "unknown input kind"),
    (lambda d: d["profile"]["ops"][0].update(extra=1), "an unknown field"),
    (lambda d: d.update(key="another model"), "another key"),
    (lambda d: d["profile"].update(num_classes=-3), "a negative count"),
    (lambda d: d["profile"].update(sequences_per_pack=0.5), "less than a sequence per pack"),
])
def test_an_edited_profile_entry_is_rebuilt_not_trusted(
        edit: object, why: str, private_cache: Path) -> None:
    cfg = model_cfg(name="mnist_cnn", input_shape=[1, 28, 28], num_classes=4)
    good = profile_model(cfg)
    path = profile_path(private_cache, cache_key(cfg))
    data = json.loads(path.read_text())
    edit(data)  # type: ignore[operator]
    path.write_text(json.dumps(data))
    assert load_profile(path, cache_key(cfg)) is None, why
    clear_memory_cache()
    assert profile_model(cfg) == good
    assert load_profile(path, cache_key(cfg)) == good  # the good entry was written back


def test_key_covers_every_field_and_torch(private_cache: Path) -> None:
    base = model_cfg(name="mnist_cnn", input_shape=[1, 28, 28])
    keys = {
        cache_key(base),
        cache_key(model_cfg(name="mnist_cnn", input_shape=[1, 32, 32])),
        cache_key(model_cfg(name="mnist_cnn", input_shape=[1, 28, 28], num_classes=5)),
        cache_key(model_cfg(name="mnist_cnn", input_shape=[1, 28, 28], kwargs={"hidden": 8})),
        cache_key(
            model_cfg(name="mnist_cnn", input_shape=[1, 28, 28], dataset={"sample_bytes": 9})
        ),
    }
    assert len(keys) == 5
    assert '"torch_version"' in cache_key(base)
    a = profile_model(model_cfg(name="mnist_cnn", input_shape=[1, 28, 28], num_classes=5))
    b = profile_model(model_cfg(name="mnist_cnn", input_shape=[1, 28, 28], num_classes=7))
    assert a.num_classes == 5 and b.num_classes == 7


def test_target_key_tracks_the_source_file(private_cache: Path) -> None:
    cfg = model_cfg(_target_="tests.models.factories.tiny_mlp", input_shape=[8])
    assert "factories.py" in cache_key(cfg)


def test_unwritable_cache_still_profiles(tmp_path: Path, monkeypatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("IPU_TUNE_CACHE_DIR", str(blocker / "sub"))
    clear_memory_cache()
    prof = profile_model(model_cfg(name="mnist_cnn", input_shape=[1, 28, 28], num_classes=3))
    assert prof.num_classes == 3
    clear_memory_cache()


# `ipu-tune profile` with SIGINT sent to itself at its first rename of a cache file, the moment
# a Ctrl-C used to end the process with the temporary file left in the cache.
_CTRL_C_AT_RENAME = """
import os, signal, sys
from ipu_tune import interrupts
interrupts.install()
from ipu_tune.__main__ import main
real = os.replace
def replace(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)
    return real(*args, **kwargs)
os.replace = replace
main(["profile", "mnist_cnn"])
"""


@pytest.mark.slow
def test_ctrl_c_while_a_profile_is_cached_leaves_no_temporary(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "IPU_TUNE_CACHE_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", _CTRL_C_AT_RENAME], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 130, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    left = [p.relative_to(tmp_path) for p in tmp_path.rglob(".*")]
    assert left == [], f"temporary files left in the cache: {left}"
    for cached in tmp_path.rglob("*.json"):  # what was renamed is whole
        json.loads(cached.read_text())
