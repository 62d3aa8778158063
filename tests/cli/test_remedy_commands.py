"""No plan fits: each remedy the summary prints is a command; pasted, it fits where it says so.

Remedies never raise memory: each one's simulated peak is below the plan it changes.
"""

from __future__ import annotations

import itertools
import shlex
from pathlib import Path

import pytest

import ipu_tune
import ipu_tune.cli.run as cli_run

_NO_FIT = ["+experiment=seed_resnet101", "workload.micro_batch_size=1024",
           "plan.precision=32.32", "study.n_trials=8", "study.progress_bar=false"]


def _remedies(text: str) -> list[tuple[str, bool]]:
    """(command, says it fits) of each remedy of a printed no-fit summary."""
    lines = text.splitlines()
    out = []
    for verdict, command in itertools.pairwise(lines):
        if verdict.startswith("  - ") and command.strip().startswith("python -m ipu_tune "):
            out.append((command.strip(), ": fits," in verdict))
    return out


def test_each_printed_remedy_command_fits_where_the_summary_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli_run.hydra_main(_NO_FIT) == 0
    text = capsys.readouterr().out
    assert "no plan fits" in text
    remedies = _remedies(text)
    fitting = [c for c, fits in remedies if fits]
    assert fitting, text
    for command in fitting:
        argv = shlex.split(command)[3:]  # after `python -m ipu_tune`
        assert cli_run.hydra_main(argv) == 0
        out = capsys.readouterr().out
        assert "no plan fits" not in out and "best: trial" in out, (command, out)


def test_remedies_never_raise_memory_and_each_is_what_the_simulator_says(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ipu_tune.cli._summary import format_summary
    from ipu_tune.config import compose, to_plain_dict
    from ipu_tune.tuner import run

    cfg = compose([*_NO_FIT, f"results_dir={tmp_path}"])
    summary = run(cfg, frozenset({"workload.micro_batch_size", "plan.precision"}))
    assert summary.explanation is not None and summary.explanation.closest is not None
    rows = summary.explanation.closest.remedies
    assert rows
    plain = to_plain_dict(cfg)
    user_peak = max(ipu_tune.evaluate({k: plain[k] for k in ("model", "workload", "system",
                                                              "plan")}).memory_per_ipu)
    for r in rows:
        res = ipu_tune.evaluate(r["config"])
        assert res.fits == r["fits"] and res.throughput == pytest.approx(r["throughput"])
        if "(on the closest plan)" not in r["remedy"]:
            assert max(res.memory_per_ipu) < user_peak, r["remedy"]
    # What fits comes first, then the fewest changes.
    order = [(not r["fits"], len(r["overrides"])) for r in rows]
    assert order == sorted(order)
    text = format_summary(summary)
    assert "add to your command: " in text  # no command line known: the overrides to add


def test_no_memory_saver_is_offered_in_the_direction_that_raises_memory() -> None:
    from ipu_tune.config import compose
    from ipu_tune.explain import remedies
    from ipu_tune.tuner import prepare

    cfg = compose(["+experiment=seed_resnet101", "workload.micro_batch_size=1024",
                   "plan.available_memory_proportion=0.1", "plan.recompute=every_block",
                   "plan.precision=16.16"])
    problem = prepare(cfg).problem
    rows = remedies(problem, problem.codec.user)
    assert rows
    changed = {o.partition("=")[0] for r in rows for o in r["overrides"]}
    assert not {"plan.available_memory_proportion", "plan.recompute",
                "plan.precision"} & changed, changed


def test_remedies_of_an_invalid_starting_plan_peak_below_the_closest_plan() -> None:
    """An invalid plan has no memory to lower: its remedies must beat the closest plan found
    (before, 16 pipeline stages peaking 3x above the closest plan were offered)."""
    import copy

    from ipu_tune.config import compose
    from ipu_tune.explain import remedies
    from ipu_tune.tuner import prepare

    cfg = compose(["+experiment=seed_resnet101", "workload.micro_batch_size=1024",
                   "plan.precision=32.32", "system.num_ipus=4"])
    problem = prepare(cfg).problem
    user = problem.codec.user
    assert problem.evaluate(user).result.bottleneck == "invalid plan"
    closest = copy.deepcopy(user)  # the savers on, 2 stages x 2 replicas: still too big
    closest.plan.replication_factor = 4 // (len(user.plan.pipeline.splits) + 1)
    for knob, value in (("precision", "16.16"), ("available_memory_proportion", 0.1),
                        ("recompute", "every_block"), ("offload_optimizer_state", True)):
        setattr(closest.plan, knob, value)
    closest_peak = max(problem.evaluate(closest).result.memory_per_ipu)
    rows = remedies(problem, closest, user)
    assert rows
    for r in rows:
        assert max(ipu_tune.evaluate(r["config"]).memory_per_ipu) < closest_peak, r["remedy"]


def test_a_closest_plan_with_no_remedy_says_none_lowers_it_and_what_would() -> None:
    from ipu_tune.cli.explain_cmd import format_remedies
    from ipu_tune.explain import Closest

    closest = Closest(trial=1, reason="IPU0 over", peak_memory_bytes=1_352_000_000,
                      memory_limit_bytes=940_572_672, excess_bytes=411_427_328, remedies=(),
                      overflows=True)
    lines = format_remedies(closest, [])
    assert lines[0].startswith("closest plan: trial 1, peak 1,352 MB of 941 MB per IPU")
    assert len(lines) == 2 and lines[1].startswith("remedies: none;")
    assert "more memory per IPU than this system has" in lines[1]


def test_a_study_kept_in_memory_suggests_no_command_that_needs_it_stored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli_run.hydra_main(["study.storage=memory", "study.n_trials=2",
                               "study.progress_bar=false"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("next: this study was kept in memory only")
    assert "--storage memory" not in last


def test_when_no_remedy_fits_the_summary_says_what_is_left_to_change() -> None:
    from ipu_tune.cli.explain_cmd import format_remedies
    from ipu_tune.explain import Closest

    row = {"remedy": "available memory proportion 0.15 -> 0.1", "fits": False,
           "throughput": 0.0, "memory": "1,628/941 MB", "overrides": [
               "plan.available_memory_proportion=0.1"]}
    closest = Closest(trial=61, reason="IPU0 over", peak_memory_bytes=1_673_000_000,
                      memory_limit_bytes=940_572_672, excess_bytes=732_427_328, overflows=True,
                      remedies=(row,))
    lines = format_remedies(closest, ["model=gpt2_large"])
    assert "still does not fit (peak 1,628/941 MB)" in lines[2]
    assert lines[-1].startswith("none of these fits: it needs more IPUs")
    assert "system=pod16" in lines[-1]


def test_a_model_no_saver_fits_is_offered_the_fewest_ipus_of_its_kind_that_fit() -> None:
    """BERT-Large on one Mk2: its weights and gradients alone exceed the IPU, so no saver fits
    there; the remedy is the fewest IPUs (a power of two) that fit, simulated as run."""
    from ipu_tune.config import compose
    from ipu_tune.explain import larger_system, remedies
    from ipu_tune.tuner import prepare

    cfg = compose(["model=bert_large", "system.num_ipus=1", "workload.micro_batch_size=1"])
    problem = prepare(cfg).problem
    user = problem.codec.user
    rows = remedies(problem, user)
    bigger = [r for r in rows if r.get("larger_system")]
    assert [r["fits"] for r in rows if not r.get("larger_system")] == [False] * (len(rows) - 1)
    assert len(bigger) == 1 and bigger[0]["fits"], rows
    ipus = int(bigger[0]["overrides"][0].removeprefix("system.num_ipus="))
    assert ipus == 2 and bigger[0]["remedy"].startswith("2 mk2 IPUs (2 pipeline stages")
    res = ipu_tune.evaluate(bigger[0]["config"])
    assert res.fits and res.throughput == pytest.approx(bigger[0]["throughput"])
    assert larger_system(problem, user) == bigger[0]


def test_savers_together_and_more_ipus_never_peak_above_the_best_saver_alone() -> None:
    """Savers interact: on ALBERT (Transformers' defaults: one shared block), recomputing every
    block adds code and stashes nothing less, and I/O tiles take tiles from the model. Neither
    the savers together nor the larger system may then peak above the best single saver."""
    from ipu_tune.config import compose
    from ipu_tune.explain import remedies
    from ipu_tune.tuner import prepare

    cfg = compose(["model=hf", "model.hf.model_type=albert", "plan.io_tiles=32",
                   "plan.precision=16.16", "plan.offload_optimizer_state=true",
                   "plan.gradient_accumulation=4", "plan.replication_factor=2"])
    problem = prepare(cfg).problem
    rows = remedies(problem, problem.codec.user)
    single = [r["peak_memory_bytes"] for r in rows if not r["remedy"].startswith("together")
              and not r.get("larger_system") and "micro-batch" not in r["remedy"]]
    assert single and not any(r["fits"] for r in rows), rows
    assert any("I/O tiles 32 -> 0" in r["remedy"] for r in rows), rows
    for r in rows:
        if r["remedy"].startswith("together") or r.get("larger_system"):
            assert r["peak_memory_bytes"] <= min(single), (r["remedy"], single)


def test_when_not_even_more_ipus_fit_the_summary_says_what_is_left() -> None:
    from ipu_tune.cli.explain_cmd import format_remedies
    from ipu_tune.explain import Closest

    row = {"remedy": "16 mk2 IPUs (16 pipeline stages x 1 replicas, every memory saver)",
           "fits": False, "throughput": 0.0, "memory": "998/941 MB", "larger_system": True,
           "overrides": ["system.num_ipus=16"]}
    closest = Closest(trial=3, reason="IPU0 over", peak_memory_bytes=1_962_000_000,
                      memory_limit_bytes=940_572_672, excess_bytes=1_021_427_328, overflows=True,
                      remedies=(row,))
    last = format_remedies(closest, ["model=hf"])[-1]
    assert last.startswith("none of these fits: not even with more IPUs of this kind")
    assert "system=pod16" not in last and "a smaller vocabulary" in last


@pytest.mark.parametrize("argv", [
    ["model=mnist_cnn", "study.storage=postgresql://postgres:S3cretPW@127.0.0.1:5432/ipu_tune"],
    ["model=mnist_cnn", "study.storage=postgresql://u@h/db?password=S3cretPW"],
    None,
])
def test_a_remedy_command_never_shows_the_storage_password(argv: list[str] | None) -> None:
    from ipu_tune.explain import remedy_command

    text = remedy_command(["workload.micro_batch_size=1",
                           "study.storage=postgresql://a:S3cretPW@h/db"], argv)
    assert "S3cretPW" not in text and "***" in text
    if argv is not None:
        assert text.startswith("python -m ipu_tune model=mnist_cnn ")


def test_a_lower_proportion_on_a_plan_with_one_per_ipu_replaces_them_all() -> None:
    """The remedy runs its proportion on every IPU: its overrides drop the per-IPU values,
    which would otherwise still win over it."""
    from ipu_tune.config import compose
    from ipu_tune.explain import remedies
    from ipu_tune.tuner import prepare

    cfg = compose(["+experiment=seed_resnet101", "workload.micro_batch_size=1024",
                   "plan.precision=16.16", "plan.available_memory_proportion_per_ipu=[0.3,0.6]"])
    problem = prepare(cfg).problem
    rows = [r for r in remedies(problem, problem.codec.user)
            if r["remedy"].startswith("available memory proportion")]
    assert len(rows) == 1
    assert rows[0]["remedy"].startswith("available memory proportion [0.3, 0.6] -> 0.1")
    assert set(rows[0]["overrides"]) == {"plan.available_memory_proportion=0.1",
                                         "plan.available_memory_proportion_per_ipu=[]"}
    result = ipu_tune.evaluate(rows[0]["config"])
    assert result.throughput == pytest.approx(rows[0]["throughput"])


def test_savers_together_set_each_knob_once() -> None:
    """BERT-Large at micro-batch 64 on one Mk2: two recomputation savers (checkpoints, then
    every_block) each lower memory; combined, recompute is set once, to the one that lowers the
    peak, and the label names each knob once, as its command runs it."""
    from ipu_tune.config import compose
    from ipu_tune.explain import remedies
    from ipu_tune.tuner import prepare

    cfg = compose(["model=bert_large", "system.num_ipus=1", "workload.micro_batch_size=64"])
    problem = prepare(cfg).problem
    rows = [r for r in remedies(problem, problem.codec.user)
            if r["remedy"].startswith("together: ")]
    assert rows
    for r in rows:
        parts = r["remedy"].removeprefix("together: ").split(", ")
        knobs = [p.split(" -> ")[0].rsplit(" ", 1)[0] if " -> " in p else p for p in parts]
        assert len(knobs) == len(set(knobs)), r["remedy"]
        keys = [o.partition("=")[0] for o in r["overrides"]]
        assert len(keys) == len(set(keys)), r["overrides"]
        assert keys.count("plan.recompute") == 1 and len(parts) == len(keys), r
