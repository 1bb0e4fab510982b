"""``python -m benchmarks profile-step`` (``benchmarks/profile_step.py``): the step's work
grouped by phase and kind, rehearsed on the CPU with the tiny model (what the GPU call runs at
full size)."""

import json

from benchmarks.profile_step import group_of, kind_of, run_profile


def test_the_profile_groups_a_cpu_step_by_phase_and_writes_json_and_markdown(tmp_path):
    result = run_profile(
        tmp_path, "bilm-tf", rows=4, window=5, precision="fp32", step_kinds=["eager"], device_name="cpu",
        warmup=1, steps=1, memory=True, smoke=True, threads=1,
    )  # fmt: skip
    written = json.loads((tmp_path / "profile.json").read_text(encoding="utf-8"))
    assert written["complete"] and result["complete"]
    part = written["kinds"]["eager"]
    assert "error" not in part, part.get("error")
    groups = {g["group"]: g for g in part["groups"]}
    # The forward's and the backward's work lands in the model's phases, not in "other".
    for name in ("char CNN", "LSTM element-wise", "softmax", "optimizer"):
        assert groups[name]["ms_per_step"] > 0, name
    assert abs(sum(g["share"] for g in part["groups"]) - 1.0) < 1e-6
    assert groups["other"]["share"] < 0.5 if "other" in groups else True
    assert part["memory"]["held"]["parameters_mb"] > 0
    table = (tmp_path / "profile.md").read_text(encoding="utf-8")
    assert "| LSTM element-wise |" in table and "Memory: peak" in table


def test_kernel_names_fall_in_the_groups_the_gpu_profile_reports():
    assert kind_of("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64") == "products"
    assert kind_of("nvjet_hsh_128x256_64x4_1x2_h_bz_coopA_NTN") == "products"
    assert kind_of("triton_poi_fused_add_clamp_mul_sigmoid_tanh_0") == "element-wise"
    assert kind_of("Memcpy DtoD (Device -> Device)") == "copies/casts"
    assert kind_of("Optimizer.step#Adagrad.step") == "optimizer"
    assert group_of("lstm", "products", projection=True) == "LSTM projection"
    assert group_of("graph", "products") == "graph: products"
    assert group_of("softmax", "copies/casts") == "copies/casts"
