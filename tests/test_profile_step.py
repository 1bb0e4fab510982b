"""``python -m benchmarks profile-step`` (``benchmarks/profile_step.py``): the step's work
grouped by phase and kind, rehearsed on the CPU with the tiny model (what the GPU call runs at
full size)."""

import json

import pytest

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


class _Range:
    def __init__(self, start, end):
        self.start, self.end = start, end


class _Event:
    """A stand-in for torch.profiler's FunctionEvent: what ``attribute`` reads."""

    def __init__(self, name, start, end, device="cpu", id=0, linked=0, seq=-1, parent=None, shapes=(), flops=0,
                 annotation=False):  # fmt: skip
        import torch

        self.is_user_annotation = annotation
        self.name, self.time_range, self.id, self.linked_correlation_id = name, _Range(start, end), id, linked
        self.device_type = torch.autograd.DeviceType.CUDA if device == "cuda" else torch.autograd.DeviceType.CPU
        self.sequence_nr, self.thread, self.fwd_thread, self.cpu_parent = seq, 1, 1, parent
        self.input_shapes, self.flops, self.self_cpu_time_total = list(shapes), flops, end - start


def test_cuda_kernels_go_to_their_operators_phase_and_graph_kernels_by_name():
    """Kernels link to the operator that launched them (correlation ids); a backward kernel
    takes the phase of its node's forward operator (sequence numbers); a kernel of a replayed
    graph links to no operator, or to the range around the replay (torch 2.11), and is grouped
    by its name; a range's device side (``Optimizer.step#...``) is not work."""
    from benchmarks.profile_step import attribute, summarize

    labels = {"lstm": "pretrain.lstm", "softmax": "pretrain.softmax", "backward": "pretrain.backward"}
    lstm = _Event("pretrain.lstm", 0, 100, annotation=True)
    projection = _Event("aten::mm", 10, 20, id=1, seq=7, shapes=[[128, 4096], [4096, 512]], flops=2 * 128 * 4096 * 512)
    sigmoid = _Event("aten::sigmoid", 30, 40, id=2, seq=8)
    backward = _Event("pretrain.backward", 200, 400, annotation=True)
    node = _Event("autograd::engine::evaluate_function: MmBackward0", 210, 250, seq=7)
    grad_mm = _Event("aten::mm", 220, 240, id=3, parent=node, shapes=[[128, 512], [512, 4096]])
    replay = _Event("cudaGraphLaunch", 500, 501, id=4)
    step_range = _Event("Optimizer.step#Adagrad.step", 600, 700, id=5, annotation=True)
    kernels = [
        _Event("sm90_xmma_gemm_bf16bf16_bf16f32", 10, 15, "cuda", linked=1),
        _Event("vectorized_elementwise_kernel<sigmoid>", 30, 32, "cuda", linked=2),
        _Event("nvjet_hsh_128x256", 220, 230, "cuda", linked=3),
        _Event("triton_poi_fused_clamp_mul_sigmoid_tanh_0", 500, 504, "cuda", linked=99),
        _Event("nvjet_tst_64x64_splitK", 610, 620, "cuda", linked=5),
        _Event("Optimizer.step#Adagrad.step", 600, 700, "cuda", annotation=True),
    ]

    class Prof:
        def events(self):
            return [lstm, projection, sigmoid, backward, node, grad_mm, replay, step_range, *kernels]

    units = attribute(Prof(), labels, "cuda", 2)
    groups = {u["name"]: u["group"] for u in units}
    assert groups == {
        "sm90_xmma_gemm_bf16bf16_bf16f32": "LSTM projection",
        "vectorized_elementwise_kernel<sigmoid>": "LSTM element-wise",
        "nvjet_hsh_128x256": "LSTM products",  # the backward of an LSTM product
        "triton_poi_fused_clamp_mul_sigmoid_tanh_0": "graph: element-wise",
        "nvjet_tst_64x64_splitK": "graph: products",
    }
    summary = summarize(units, n_steps=1, step_ms=1.0, peak_tflops=1000.0, peak_gbs=None)
    (row,) = [g for g in summary["groups"] if g["group"] == "LSTM projection"]
    assert row["tflops"] == pytest.approx(2 * 128 * 4096 * 512 / 5e-6 / 1e12)
    assert row["of_peak_flops"] == pytest.approx(row["tflops"] / 1000.0)
