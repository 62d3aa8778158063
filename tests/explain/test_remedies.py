"""A remedy's label says what its overrides change: the stage count, or where the stages are
cut when their count stays, and the replicas when they move."""

from __future__ import annotations

import re

from ipu_tune.config import compose
from ipu_tune.explain import remedies
from ipu_tune.tuner import prepare


def _pipeline_rows(*overrides: str) -> tuple[list[str], list[dict]]:
    cfg = compose(["+experiment=seed_resnet101", "workload.micro_batch_size=1024",
                   "plan.precision=32.32", *overrides])
    problem = prepare(cfg).problem
    user = problem.codec.user
    rows = [r for r in remedies(problem, user)
            if any(o.startswith("plan.pipeline.splits=") for o in r["overrides"])
            and not r.get("larger_system")]
    return list(user.plan.pipeline.splits), rows


def _splits(row: dict) -> list[str]:
    (o,) = [o for o in row["overrides"] if o.startswith("plan.pipeline.splits=")]
    return o.partition("=")[2].strip("[]").split(",")


def test_an_even_split_at_the_same_stage_count_is_labelled_by_its_cuts() -> None:
    """2 stages cut at layer1.1, evenly re-cut: it was labelled '2 pipeline stages (1
    replicas)', as if it added stages, hiding that only the cut moved."""
    old, rows = _pipeline_rows("plan.pipeline.splits=[layer1.1]")
    assert len(old) == 1 and rows
    same = [r for r in rows if len(_splits(r)) == 1]
    assert same, [r["remedy"] for r in rows]
    for r in same:
        new = _splits(r)[0]
        assert new != old[0]
        assert r["remedy"].startswith(
            f"pipeline split {old[0]} -> {new} (2 stages, evenly split)"), r["remedy"]


def test_more_stages_are_labelled_by_the_count_they_change_and_the_replicas() -> None:
    old, rows = _pipeline_rows("system.num_ipus=4", "plan.replication_factor=2",
                               "plan.gradient_accumulation=8", "plan.pipeline.splits=[layer4.1]")
    assert any(len(_splits(r)) == 3 for r in rows), [r["remedy"] for r in rows]
    for r in rows:
        found = re.match(r"pipeline (stages (\d+) -> (\d+)|split .* \((\d+) stages)", r["remedy"])
        assert found, r["remedy"]
        after = int(found.group(3) or found.group(4))
        assert after == len(_splits(r)) + 1
        if found.group(2):
            assert int(found.group(2)) == len(old) + 1 != after
        replicas = [o for o in r["overrides"] if o.startswith("plan.replication_factor=")]
        assert (", replicas 2 -> " in r["remedy"]) == bool(replicas), (r["remedy"], replicas)


def test_more_stages_raise_the_gradient_accumulation_to_the_pipelines_minimum() -> None:
    """4 stages at GA 3 is no plan PopTorch compiles: the remedy raises GA to the minimum,
    as the search draws it, and says so, where it was dropped as an invalid plan."""
    _, rows = _pipeline_rows("system.num_ipus=4", "plan.replication_factor=2",
                             "plan.gradient_accumulation=3", "plan.pipeline.splits=[layer4.1]")
    deeper = [r for r in rows if len(_splits(r)) == 3]
    assert deeper, [r["remedy"] for r in rows]
    for r in deeper:
        (ga,) = [o for o in r["overrides"] if o.startswith("plan.gradient_accumulation=")]
        assert int(ga.partition("=")[2]) > 3
        assert f"GA 3 -> {ga.partition('=')[2]} (the pipeline's minimum)" in r["remedy"]
