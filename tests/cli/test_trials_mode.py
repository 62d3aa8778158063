"""`trials` shows the mode of each trial when a study holds trials of both modes (a study
stored before a space file's contents were part of its problem): a training and an inference
rate side by side would read as one ranking."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
from optuna.trial import create_trial

from ipu_tune.cli._trials_table import readable_table, trials_frame
from ipu_tune.storage import open_storage, resolve_storage
from ipu_tune.tuner import run
from tests.search._helpers import compose_cfg, make_problem


def test_the_mode_column_appears_when_modes_differ(tmp_path: Path) -> None:
    cfg = compose_cfg("model=mnist_cnn")
    cfg.results_dir, cfg.study.n_trials, cfg.study.progress_bar = str(tmp_path), 3, False
    summary = run(cfg)
    study = optuna.load_study(study_name=summary.study_name,
                              storage=open_storage(resolve_storage(None, str(tmp_path))))
    problem = make_problem(compose_cfg("model=mnist_cnn"))
    assert "mode" not in trials_frame(study, problem)  # one mode: nothing to tell apart
    mixed = optuna.create_study(directions=study.directions)
    for i, t in enumerate(study.get_trials()):
        attrs = dict(t.user_attrs)
        if i == 0:
            plan = json.loads(attrs["plan"])
            plan["config"]["workload"]["mode"] = "infer"
            attrs["plan"] = json.dumps(plan)
        mixed.add_trial(create_trial(state=t.state, values=t.values, params=t.params,
                                     distributions=t.distributions, user_attrs=attrs,
                                     system_attrs=t.system_attrs))
    frame = trials_frame(mixed, problem)
    assert sorted(frame["mode"]) == ["infer", "train", "train"]
    table = readable_table(frame.drop(columns=["reason"])).splitlines()
    header = next(line for line in table if line.lstrip().startswith("trial"))
    assert " mode " in f"{header} "
