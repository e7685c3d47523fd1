"""Chapter 20 on a GPU: every stage of both case studies verifies against its baseline at the
H200 size (bf16 / fp8 outputs, the pair's tolerance; the harness does the timing), the graphed
stages replay (no eager decode forward during run()), the fp8 stage's decode goes through the
Triton kernel, the training stages report MFU, and kernel_check runs its example on the GPU."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from conftest import built_on_cuda, verify_stages_on_cuda

from aisp.harness.loader import import_module_at

CH20 = Path(__file__).resolve().parents[1] / "ch20"
pytestmark = pytest.mark.gpu
LLM = ["optimized_llm_inference_e2e_s1_kv_cache", "optimized_llm_inference_e2e_s2_cuda_graph",
       "optimized_llm_inference_e2e_s3_fp8_weights", "optimized_llm_inference_e2e_s4_continuous_batching"]
GPT = ["optimized_gpt_training_e2e_s1_bf16_autocast", "optimized_gpt_training_e2e_s2_fused_adamw_sdpa",
       "optimized_gpt_training_e2e_s3_compile"]


def built(module: str, seed: int = 0):
    return built_on_cuda(CH20 / f"{module}.py", seed)


@pytest.mark.parametrize(("baseline", "stages"), [("baseline_llm_inference_e2e", LLM), ("baseline_gpt_training_e2e", GPT)])
def test_every_stage_verifies_at_full_size(baseline: str, stages: list[str]) -> None:
    verify_stages_on_cuda(CH20, baseline, stages)


def test_graphed_stages_run_no_eager_decode_forward() -> None:
    for module in LLM[1:]:
        bench = built(module)
        calls, forward = [], bench.model.forward
        bench.model.forward = lambda tokens, *a, f=forward, n=calls, **k: n.append(tokens.shape[1]) or f(tokens, *a, **k)
        bench.run()
        assert 1 not in calls, f"{module}: an eager decode step ran"


def test_fp8_stage_decodes_through_the_triton_kernel(monkeypatch) -> None:
    import aisp.kits.fp8 as fp8

    bench = built(LLM[2])
    rows, real = [], fp8.fp8_linear
    monkeypatch.setattr(fp8, "fp8_linear", lambda x, *a: rows.append(x.shape[0]) or real(x, *a))
    torch.cuda.synchronize()
    bench.step._step()  # an eager step calls the kernel once per linear layer
    assert rows and max(rows) <= 16


def test_training_stages_report_mfu() -> None:
    for module in ("baseline_gpt_training_e2e", GPT[-1]):
        bench = built(module)
        for _ in range(3):
            bench.run()
        mfu = bench.metrics()["mfu"]
        assert 0.0 < mfu < 1.0, f"{module}: MFU {mfu}"


def test_kernel_check_example_on_the_gpu(capsys) -> None:
    sys.path.insert(0, str(CH20))
    kc = import_module_at(CH20 / "kernel_check.py")
    code = kc.main(["kernel_check_examples:softmax_two_pass", "--reference", "kernel_check_examples:softmax_reference",
                    "--shapes", "RxC", "--dims", "R=4096", "C=4096", "--random", "2", "--dtypes", "float32", "bf16",
                    "--device", "cuda"])
    assert code == 0, capsys.readouterr().out
