"""Chapter 16 on a GPU: each pair verifies at its H200 size (the harness does the timing), the fp8
attention kernel matches SDPA over the dequantized cache at the pair's shapes, the pipelined
scheduler keeps the GPU busier, and the draft's acceptance rate is what the README says."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from aisp.harness.execute import guarded_run
from aisp.harness.loader import import_module_at
from aisp.harness.verify import compare

CH16 = Path(__file__).resolve().parents[1] / "ch16"
PAIRS = ["decode_cuda_graph", "speculative_decoding", "fp8_kv_cache", "fp8_weight_decode", "gpu_sampling",
         "async_scheduling", "block_sparse_attention"]
pytestmark = pytest.mark.gpu


def load(module: str):
    return import_module_at(CH16 / f"{module}.py")


def cuda_bench(module: str):
    bench = load(module).get_benchmark()
    bench.device = torch.device("cuda")
    bench.setup()
    return bench


@pytest.mark.parametrize("name", PAIRS)
def test_pair_verifies_at_full_size(name: str) -> None:
    outs = []
    for module in (f"baseline_{name}", f"optimized_{name}"):
        bench = cuda_bench(module)
        outs.append(guarded_run(bench))
        outs.append(guarded_run(bench))  # a second call (graph replays, reset scheduler) gives the same
        bench.teardown()
    compare(outs[0], outs[1], load(f"baseline_{name}").WORKLOAD)
    compare(outs[0], outs[2], load(f"baseline_{name}").WORKLOAD)
    compare(outs[2], outs[3], load(f"baseline_{name}").WORKLOAD)


def test_fp8_attention_matches_sdpa_on_the_dequantized_cache() -> None:
    sys.path.insert(0, str(CH16))
    from ch16_fp8_kv import fp8_decode_attention, quantize_heads

    gen = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(8, 8, 4, 128, generator=gen, device="cuda").bfloat16()
    k, v = (torch.randn(8, 8, 8192, 128, generator=gen, device="cuda").bfloat16() for _ in range(2))
    (k8, ks), (v8, vs) = quantize_heads(k), quantize_heads(v)
    e4m3 = torch.float8_e4m3fn
    ref = F.scaled_dot_product_attention(q.float(), k8.view(e4m3).float() * ks[:, None, None],
                                         v8.view(e4m3).float() * vs[:, None, None])
    out = fp8_decode_attention(q, k8.view(e4m3), v8.view(e4m3), ks, vs, 16)
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=1e-3)


def test_pipelined_scheduler_keeps_the_gpu_busier() -> None:
    busy = {side: cuda_bench(f"{side}_async_scheduling").metrics()["gpu_busy"] for side in ("baseline", "optimized")}
    assert 0 < busy["baseline"] < busy["optimized"] <= 1.05, busy


def test_draft_acceptance_rate() -> None:
    stats = cuda_bench("optimized_speculative_decoding").metrics()
    assert 0.3 < stats["acceptance_rate"] < 0.9 and stats["tokens_per_target_pass"] > 1.8, stats
