"""Profiles are cached on disk (joblib) and in process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ipu_tune.models import clear_memory_cache, profile_model
from ipu_tune.models._profiler import _disk, cache_dir, cache_key

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
    cached = _disk(private_cache)
    assert cached is not None
    assert not cached.check_call_in_cache(key, cfg)
    first = profile_model(cfg)
    assert cached.check_call_in_cache(key, cfg)  # written to disk
    assert any(private_cache.rglob("output.pkl"))
    assert profile_model(cfg) is first  # in-process hit: the same object
    clear_memory_cache()
    again = profile_model(cfg)  # from disk: equal, not identical
    assert again == first and again is not first


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
