"""Chapter 20's MoE-layer and vision-pipeline case studies on a GPU: every stage verifies against its
baseline at the H200 size (the pair's tolerance; the harness does the timing; the errors are printed),
the grouped stage never syncs the host, and the GPU-decode stages decode with nvJPEG (or skip with
the reason where torchvision is missing)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import built_on_cuda, verify_stages_on_cuda

CH20 = Path(__file__).resolve().parents[1] / "ch20"
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]
MOE = ["optimized_moe_layer_e2e_s1_sorted_routing", "optimized_moe_layer_e2e_s2_grouped_gemm"]
VISION = ["optimized_vision_pipeline_e2e_s1_uint8_pinned", "optimized_vision_pipeline_e2e_s2_gpu_decode",
          "optimized_vision_pipeline_e2e_s3_channels_last"]


def built(module: str, seed: int = 0):
    return built_on_cuda(CH20 / f"{module}.py", seed)


@pytest.mark.parametrize(("baseline", "stages"), [("baseline_moe_layer_e2e", MOE),
                                                  ("baseline_vision_pipeline_e2e", VISION)])
def test_every_stage_verifies_at_full_size(baseline: str, stages: list[str]) -> None:
    verify_stages_on_cuda(CH20, baseline, stages)


def test_grouped_stage_never_waits_for_the_gpu() -> None:
    bench = built(MOE[1])
    bench.run()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        bench.run()
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()


def test_gpu_decode_matches_pil_pixels() -> None:
    base, gpu = built("optimized_vision_pipeline_e2e_s1_uint8_pinned"), built(VISION[1])
    with torch.no_grad():
        diff = (base.images() - gpu.images()).abs()
    print("max |normalized pixel difference|", float(diff.max()), "mean", float(diff.mean()))
    assert float(diff.mean()) < 0.05  # normalized units: ~2.5/255 of a pixel on average
