"""OmegaConf's errors as one line that names the key, the value as written and what is
allowed: a file's unquoted `yes` made a boolean by YAML, an unset `${oc.env:NAME}`."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipu_tune.__main__ import main


def _fails(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and "\n" not in err, err
    return err


@pytest.mark.parametrize("word", ["yes", "on", "true"])
def test_a_files_word_read_as_a_boolean_says_so(
    word: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: `workload.micro_batch_size='True'`, a value the user never wrote, quoted as
    text. YAML 1.1's yes/no/on/off are refused as the file is read, with the word written."""
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "e.yaml").write_text(
        f"# @package _global_\nworkload:\n  micro_batch_size: {word}\n")
    monkeypatch.chdir(tmp_path)
    err = _fails(["--config-dir", str(tmp_path), "+experiment=e"], capsys)
    if word == "true":
        assert err == ("ipu-tune: error: experiment/e: workload.micro_batch_size=True: allowed: "
                       "an integer (YAML reads an unquoted yes/no/on/off/true/false as a boolean)")
    else:
        assert err == (f"ipu-tune: error: config file '{tmp_path / 'experiment' / 'e.yaml'}': "
                       f"workload.micro_batch_size='{word}': YAML reads an unquoted "
                       "yes/no/on/off as a boolean (the command line as text): refused, to mean "
                       "one thing everywhere; allowed: true or false for a switch, or quote it "
                       f"('{word}') for text")


def test_an_unset_environment_variable_is_named_with_what_is_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("IPU_TUNE_NOT_SET", raising=False)
    monkeypatch.chdir(tmp_path)
    err = _fails(["study.name=${oc.env:IPU_TUNE_NOT_SET}", f"results_dir={tmp_path}/r"], capsys)
    assert err == ("ipu-tune: error: study.name=${oc.env:IPU_TUNE_NOT_SET}: the environment "
                   "variable IPU_TUNE_NOT_SET is not set; allowed: set it, or give a default, "
                   "${oc.env:IPU_TUNE_NOT_SET,DEFAULT}")
    assert not (tmp_path / "r").exists()
