"""A file given by mistake (a shadow or .env file) reads as a mapping whose keys are its
lines: a key that is no name is never echoed, wherever a file's keys are checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipu_tune.__main__ import main
from ipu_tune.errors import key_name

# A shadow line: YAML reads the whole line, hash included, as one key (it ends in `:`).
SECRET = "root:$6$s4lt$H4shOfTheRootPassword:20228:0:99999:7:::"


def _files(tmp: Path) -> None:
    (tmp / "shadow.yaml").write_text(SECRET + "\n")
    (tmp / "nested.yaml").write_text("model:\n  " + SECRET + " 1\n")
    (tmp / "space.yaml").write_text("knobs: {}\n" + SECRET + "\n")
    (tmp / "ipu_config.json").write_text('{"' + SECRET + '": 1}')


CASES = [
    ("a config file", ["evaluate", "{tmp}/shadow.yaml"], "unknown top-level key"),
    ("a section of a config file", ["evaluate", "{tmp}/nested.yaml"], "model.<a key of"),
    ("a constants file", ["simulator.constants={tmp}/shadow.yaml"], "unknown constant"),
    ("a space file", ["search.space={tmp}/space.yaml"], "unknown key; allowed: description"),
    ("an ipu_config.json", ["plan.from_ipu_config={tmp}/ipu_config.json"],
     "unknown key; IPUConfig's fields"),
]


@pytest.mark.parametrize(("case", "args", "expected"), CASES, ids=[c[0] for c in CASES])
def test_a_key_that_is_no_name_is_not_echoed(
    case: str, args: list[str], expected: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    _files(tmp_path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main([a.replace("{tmp}", str(tmp_path)) for a in args])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2, case
    assert "\n" not in err and expected in err, err
    assert "H4sh" not in err and "root:" not in err, err
    # The key is the line but its last `:` (YAML's key end); in a JSON file, the whole string.
    assert any(f"<a key of {n} characters that is no name, not shown>" in err
               for n in (len(SECRET) - 1, len(SECRET))), err


@pytest.mark.parametrize("key", ["micro_batch_size", "workload.mode", "résumé", "n-layers",
                                 "max_2d_position_embeddings", "partials16", "use_bfloat16x",
                                 "inference_embedding_serialization_factor"])
def test_a_key_that_is_a_name_is_shown(key: str) -> None:
    assert key_name(key) == key


@pytest.mark.parametrize("key", ["API_KEY=abc", "a b", "x" * 65, 7, "9lives", "",
                                 # A token's shape: letters and digits mixed, or very long.
                                 "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
                                 "AKIAIOSFODNN7EXAMPLE", "sk-proj-abc123def456ghi789",
                                 "a_" + "b" * 30])
def test_anything_else_is_named_by_its_length(key: object) -> None:
    n = len(str(key))
    assert key_name(key) == f"<a key of {n} character{'s' * (n != 1)} that is no name, not shown>"


@pytest.mark.parametrize("override", ["plan.precision=${oc.env:IPU_TUNE_PROBE}",
                                      "study.n_trials=${oc.env:IPU_TUNE_PROBE}",
                                      "study.name=${oc.env:IPU_TUNE_PROBE}/x"])
def test_an_environment_variables_value_is_not_echoed(
    override: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A variable set to what its key refuses (a mistyped name may be a password's): the
    message shows the reference as typed, not the value."""
    monkeypatch.setenv("IPU_TUNE_PROBE", "hunter2secret")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main([override, "model=mnist_cnn"])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and "\n" not in err, err
    assert "hunter2" not in err and "${oc.env:IPU_TUNE_PROBE}" in err, err


def test_a_variables_value_is_masked_only_where_it_stands_as_the_refused_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """B=true read by one key, another key refused: `allowed: true or false` keeps its words
    (it read `allowed: ${oc.env:B} or false`)."""
    monkeypatch.setenv("IPU_TUNE_PROBE", "true")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        main(["plan.eight_bit_io=${oc.env:IPU_TUNE_PROBE}", "plan.async_dataloader=maybe"])
    err = capsys.readouterr().err.strip()
    assert err == "ipu-tune: error: plan.async_dataloader='maybe': allowed: true or false", err
