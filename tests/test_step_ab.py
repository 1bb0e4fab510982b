"""``python -m benchmarks step-ab`` (``benchmarks/step_ab.py``): step variants in one process,
rehearsed on the CPU with the tiny model (the GPU call compares the recorded step with and
without the speed settings)."""

import json

import pytest

from benchmarks.step_ab import parse_variant, run_step_ab


def test_variants_run_in_alternating_rounds_and_are_compared_with_the_first(tmp_path):
    output = tmp_path / "ab.json"
    run_step_ab(
        ["today:step=eager", "wavefront:step=eager,lstm_wavefront=true,directions_on_streams=true"],
        rows=4, window=5, precision="fp32", device_name="cpu", warmup=1, steps=1, rounds=2, smoke=True,
        output=output, threads=1,
    )  # fmt: skip
    result = json.loads(output.read_text(encoding="utf-8"))
    assert result["complete"]
    for name in ("today", "wavefront"):
        variant = result["variants"][name]
        assert "error" not in variant, variant.get("error")
        assert len(variant["rounds"]) == 2 and variant["median_tokens_per_s"] > 0
    assert result["variants"]["today"]["ratio_to_first"] == 1.0
    assert result["variants"]["wavefront"]["overrides"] == {"training.step": "eager", "training.lstm_wavefront": True,
                                                            "training.directions_on_streams": True}  # fmt: skip


def test_a_variant_without_settings_is_refused_with_the_expected_form():
    assert parse_variant("a:objective.dropout=0") == ("a", {"objective.dropout": 0})
    with pytest.raises(ValueError, match="NAME:key=value"):
        parse_variant("today")
