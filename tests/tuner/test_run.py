"""The study runner in-process: totals, resume, stale trials, export round trip."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import yaml
from hydra import compose, initialize_config_dir
from optuna.trial import TrialState

import ipu_tune
from ipu_tune.config import CONF_DIR, TuneConfig
from ipu_tune.config._load import typed
from ipu_tune.records import TrialRecord
from ipu_tune.storage import ResultsStore, open_storage, resolve_storage
from ipu_tune.tuner import run
from tests.conftest import REPO


def _cfg(results: Path, n: int, *extra: str) -> TuneConfig:
    overrides = [f"results_dir={results}", f"study.n_trials={n}", "study.progress_bar=false",
                 *extra]
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        return typed(TuneConfig, compose(config_name="config", overrides=overrides))


def _study(results: Path, name: str) -> optuna.Study:
    storage = open_storage(resolve_storage(None, str(results)))
    return optuna.load_study(study_name=name, storage=storage)


def test_resume_reaches_the_total_without_duplicates(tmp_path: Path) -> None:
    first = run(_cfg(tmp_path, 12))
    assert (first.n_complete, first.ran_here) == (12, 12)
    again = run(_cfg(tmp_path, 12))
    assert (again.n_complete, again.ran_here) == (12, 0)
    more = run(_cfg(tmp_path, 20))
    assert (more.n_complete, more.ran_here) == (20, 8)

    study = _study(tmp_path, first.study_name)
    numbers = [t.number for t in study.trials]
    assert len(numbers) == len(set(numbers)) == 20
    # Finished: COMPLETE when the plan is feasible, PRUNED (no value) when it is not.
    assert all(t.state == (TrialState.COMPLETE if TrialRecord.of(t).feasible
                           else TrialState.PRUNED) for t in study.trials)
    rows = ResultsStore(resolve_storage(None, str(tmp_path)).results_url).frame(first.study_name)
    assert sorted(rows["trial_number"]) == numbers


def test_export_evaluates_again_to_the_same_result(tmp_path: Path) -> None:
    summary = run(_cfg(tmp_path, 10))
    best_yaml = summary.exports["best"]
    assert best_yaml.exists() and summary.exports["poptorch"].exists()
    assert summary.exports["report"].exists()
    again = ipu_tune.evaluate(best_yaml)
    assert again.fits
    assert again.to_dict() == summary.best_result.to_dict()  # type: ignore[union-attr]
    stored = _study(tmp_path, summary.study_name).trials[summary.best_trial]  # type: ignore[index]
    assert again.throughput == pytest.approx(TrialRecord.of(stored).result["throughput"])
    text = yaml.safe_load(best_yaml.read_text())
    assert set(text) >= {"model", "workload", "system", "plan", "ipu_tune"}
    assert "python -m ipu_tune evaluate" in text["ipu_tune"]["evaluate"]


def test_trial_of_a_dead_worker_is_failed_and_retried(tmp_path: Path) -> None:
    summary = run(_cfg(tmp_path, 4))
    study = _study(tmp_path, summary.study_name)
    stale = study.ask({"x_unused": optuna.distributions.FloatDistribution(0, 1)})
    # A worker of this host whose process no longer exists (PID beyond pid_max).
    stale.set_user_attr("worker", f"{socket.gethostname()}:99999999:0")
    resumed = run(_cfg(tmp_path, 6))
    assert resumed.retried == (stale.number,)
    study = _study(tmp_path, summary.study_name)
    assert study.trials[stale.number].state == TrialState.FAIL
    assert not study.get_trials(states=(TrialState.RUNNING, TrialState.WAITING))
    assert resumed.n_complete == 6


def test_a_study_of_another_model_is_refused(tmp_path: Path) -> None:
    run(_cfg(tmp_path, 2, "study.name=shared"))
    with pytest.raises(ipu_tune.IpuTuneError, match=r"study\.name='shared'"):
        run(_cfg(tmp_path, 2, "study.name=shared", "model=resnet50"))


def test_trial_killed_between_ask_and_tag_is_recovered(tmp_path: Path) -> None:
    summary = run(_cfg(tmp_path, 3))
    study = _study(tmp_path, summary.study_name)
    untagged = study.ask({"x_unused": optuna.distributions.FloatDistribution(0, 1)})
    resumed = run(_cfg(tmp_path, 4))
    assert resumed.retried == (untagged.number,)
    study = _study(tmp_path, summary.study_name)
    assert not study.get_trials(states=(TrialState.RUNNING,))
    assert resumed.n_complete == 4


_HOLDER = """
import sys, time, optuna
from ipu_tune.storage import open_storage, resolve_storage
target = resolve_storage(None, sys.argv[1])
study = optuna.load_study(study_name=sys.argv[2], storage=open_storage(target))
with target.claims.claiming():
    running = target.claims.running_file("holder-worker")
    trial = study.ask({"x_unused": optuna.distributions.FloatDistribution(0, 1)})
    running.hold(trial.number)
print(trial.number, flush=True)
time.sleep(600)
"""


def test_a_live_workers_trial_is_kept_and_a_killed_ones_retried(tmp_path: Path) -> None:
    """On one machine a worker records its trial in a locked file, not on the trial: a
    resume leaves the trial of a live worker running, and retries it once the worker is
    SIGKILLed (the kernel drops the lock), naming the worker."""
    summary = run(_cfg(tmp_path, 3))
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(tmp_path),
                               summary.study_name], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert holder.stdout is not None
        number = int(holder.stdout.readline())
        alive = run(_cfg(tmp_path, 4))
        assert alive.retried == ()
        assert _study(tmp_path, summary.study_name).trials[number].state == TrialState.RUNNING
    finally:
        holder.kill()
        holder.wait()
    resumed = run(_cfg(tmp_path, 5))
    assert resumed.retried == (number,)
    study = _study(tmp_path, summary.study_name)
    assert study.trials[number].system_attrs["fail_reason"] == "worker died: holder-worker"
    assert "worker" not in study.trials[-1].user_attrs  # no tag write on a local storage
    assert not study.get_trials(states=(TrialState.RUNNING,))
    assert list((tmp_path / "ipu_tune.journal.claims.running").iterdir()) == []


def test_only_feasible_trials_keep_the_whole_result(tmp_path: Path) -> None:
    """The exports read the whole result of the best trial, which is feasible; an infeasible
    trial keeps the row's figures (why it failed), not the whole result."""
    summary = run(_cfg(tmp_path, 20))
    records = [TrialRecord.of(t) for t in _study(tmp_path, summary.study_name).trials]
    feasible = [r for r in records if r.feasible]
    infeasible = [r for r in records if not r.feasible]
    assert feasible and infeasible
    assert all(r.sim_result() is not None for r in feasible)
    for r in infeasible:
        assert r.sim_result() is None and "detail" not in r.result
        assert r.result["memory_per_ipu"] and r.result["fits"] is not None and r.config
    rows = ResultsStore(resolve_storage(None, str(tmp_path)).results_url).rows(summary.study_name)
    assert len(rows) == 20 and all(row["memory_per_ipu"] for row in rows)


def test_report_embeds_the_written_poptorch_snippet(tmp_path: Path) -> None:
    # every_block lists a checkpoint per block only when the snippet sees the profile: the
    # report once rebuilt it without one and showed a different text than the file.
    import html
    import re

    from ipu_tune.tuner import prepare

    pinned = frozenset({"plan.recompute", "plan.pipeline.splits"})
    cfg = _cfg(tmp_path, 3, "system.num_ipus=2", "plan.recompute=every_block",
               "plan.pipeline.splits=[layer3.8]")
    summary = run(prepare(cfg, pinned))
    written = summary.exports["poptorch"].read_text()
    page = summary.exports["report"].read_text()
    shown = re.search(r"<details><summary>show</summary><pre>(.*?)</pre></details>", page, re.S)
    assert shown is not None
    assert html.unescape(shown.group(1)) == written
    assert "checkpoints = [" in written and '"layer4.0"' in written  # every block listed


def test_export_takes_the_result_stored_with_the_best_trial(tmp_path: Path) -> None:
    from ipu_tune.records import TrialRecord

    summary = run(_cfg(tmp_path, 6))
    best = _study(tmp_path, summary.study_name).trials[summary.best_trial]  # type: ignore[index]
    stored = TrialRecord.of(best).sim_result()
    assert stored is not None and summary.best_result is not None
    assert stored.to_dict() == summary.best_result.to_dict()


def test_same_name_in_two_storages_exports_to_two_folders(tmp_path: Path) -> None:
    # The second study must not overwrite the first's exports in results/same/.
    first = run(_cfg(tmp_path, 3, "study.name=same"))
    kept = first.exports["best"].read_bytes()
    other = run(_cfg(tmp_path, 3, "study.name=same", f"study.storage=sqlite:///{tmp_path}/o.db"))
    assert first.exports["best"].parent == tmp_path / "same"
    assert other.exports["best"].parent.parent == tmp_path
    assert other.exports["best"].parent.name.startswith("same@")
    assert first.exports["best"].read_bytes() == kept
    assert set(other.exports.values()).isdisjoint(first.exports.values())
