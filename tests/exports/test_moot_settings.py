"""The programs set no knob the plan does not run (`knobs.moot_keys`), and say so instead."""

from __future__ import annotations

import copy

import ipu_tune

from ._export_plans import DEFAULT_STUDY, PIPELINED_BERT, make_config
from ._render import popart_snippet, poptorch_snippet, tf_snippet


def test_an_fp32_model_gets_no_partials_type() -> None:
    """fp32 arithmetic accumulates in fp32 whatever the partials type: the simulator gives
    half partials with a 32.32 or 16.32 model exactly the float figures, so no program may
    set half partials there, nor call them faster."""
    for precision in ("32.32", "16.32"):
        raw = copy.deepcopy(DEFAULT_STUDY)
        raw["plan"].update(precision=precision, partials="half")
        cfg = make_config(raw)
        result = ipu_tune.evaluate(cfg)
        poptorch, popart, tf = (f(cfg, result) for f in (poptorch_snippet, popart_snippet,
                                                         tf_snippet))
        assert "setPartialsType" not in poptorch and "faster and smaller" not in poptorch
        assert "partialsType" not in popart and "partialsType" not in tf
        for text in (poptorch, popart, tf):
            assert "partials half: not set; it runs only with an fp16 model" in text


def test_token_input_gets_no_8_bit_io() -> None:
    """8-bit I/O sends pixels as uint8: a BERT plan with eight_bit_io=true is simulated as
    without it, so no program tells you to feed uint8 pixels."""
    raw = copy.deepcopy(PIPELINED_BERT)
    raw["plan"]["eight_bit_io"] = True
    cfg = make_config(raw)
    result = ipu_tune.evaluate(cfg)
    tf, popart = tf_snippet(cfg, result), popart_snippet(cfg, result)
    assert "uint8" not in tf and "UINT8" not in popart
    for text in (tf, popart):
        assert "8-bit I/O True: not set; it runs only with pixel input" in text
    assert "uint8" not in poptorch_snippet(cfg, result).lower().replace("8-bit", "")
