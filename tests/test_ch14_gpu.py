"""Chapter 14's kernels on a GPU against PyTorch, at ragged sizes the pairs do not use, and the
custom-op pair's graph counts with the real Triton kernels; the TMA grouped GEMM at the pair's size
beside the pointer kernel, and the split TMA variant beside the TMA one (run with -s to see the times)."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from cuda_events import timed_ms

from aisp.harness.execute import guarded_run
from aisp.harness.loader import import_module_at
from aisp.harness.verify import compare

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs Triton")]
CH14 = Path(__file__).resolve().parents[1] / "ch14"


def load(module: str):
    return import_module_at(CH14 / f"{module}.py")


def randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, device="cuda").to(torch.bfloat16)


def rel_l2(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.float() - ref.float()).norm() / ref.float().norm()).item()


@pytest.mark.parametrize("dim", [1000, 4096])
def test_fused_add_norm_gelu(dim: int) -> None:
    x, r, w, b = randn(333, dim), randn(333, dim), randn(dim), randn(dim)
    ref = F.gelu(F.layer_norm(x + r, (dim,), w, b, 1e-5), approximate="tanh")
    out = load("optimized_triton_fused_layernorm").add_norm_gelu(x, r, w, b, 1e-5)
    assert rel_l2(out, ref) < 2e-3 and (out.float() - ref.float()).abs().max() < 0.07


def test_grouped_gemm_with_uneven_and_empty_groups() -> None:
    mod = load("optimized_triton_grouped_gemm")
    rows = [1, 300, 0, 129, 128, 77]
    a, b = randn(sum(rows), 512), randn(len(rows), 512, 256) / 512**0.5
    out = torch.full((sum(rows), 256), float("nan"), device="cuda", dtype=torch.bfloat16)
    mod.grouped_mm(a, b, mod.block_table(rows, 128, a.device), out, programs=7)
    starts = [sum(rows[:g]) for g in range(len(rows))]
    ref = torch.cat([a[s:s + n] @ b[g] for g, (s, n) in enumerate(zip(starts, rows, strict=True))])
    assert rel_l2(out, ref) < 5e-3


def grouped_tma_launcher(variant: str, rows: list[int], device: torch.device) -> tuple:
    """(launch function, its table for ``rows``, its autotune configs) of a TMA variant: "tma" or
    "tma_split"."""
    tma = load("ch14_grouped_tma")
    if variant == "tma":
        return tma.grouped_mm_tma, load("optimized_triton_grouped_gemm").block_table(rows, tma.BM, device), tma.CONFIGS
    split = load("ch14_grouped_tma_split")
    return split.grouped_mm_tma_split, split.split_block_table(rows, tma.BM, device), tma.CONFIGS


@pytest.mark.parametrize("variant", ["tma", "tma_split"])
def test_grouped_gemm_tma_each_config_with_uneven_and_empty_groups(variant: str) -> None:
    """Every autotune config of a TMA kernel launched on its own, then the autotuned launch: bands
    whose blocks read the next band's rows (dropped by the store), a last band past a's end, and
    band tails of 0, 1, 64 and 65 rows (the split kernel's 64-row blocks hold 1-64)."""
    mod, ptr = load("ch14_grouped_tma"), load("optimized_triton_grouped_gemm")
    rows = [1, 300, 0, 129, 128, 64, 65, 320, 77]
    a, b = randn(sum(rows), 512), randn(len(rows), 512, 512) / 512**0.5
    starts = [sum(rows[:g]) for g in range(len(rows))]
    ref = torch.cat([a[s:s + n] @ b[g] for g, (s, n) in enumerate(zip(starts, rows, strict=True))])
    launch, table, configs = grouped_tma_launcher(variant, rows, a.device)
    tilings = [ptr.Tiling(bm=mod.BM, bn=c.kwargs["BN"], bk=c.kwargs["BK"], warps=c.num_warps, stages=c.num_stages)
               for c in configs]
    for tiling in [*tilings, None]:
        out = torch.full((sum(rows), 512), float("nan"), device="cuda", dtype=torch.bfloat16)
        launch(a, b, table, out, 7, tiling)
        assert rel_l2(out, ref) < 5e-3, tiling


def test_grouped_gemm_tma_at_full_size_matches_the_loop_and_prints_both_kernels() -> None:
    """The pair's workload on the GPU: the TMA variant's output against the torch.mm loop's and the
    pointer kernel's (the harness's comparison); printed: both kernels' times and TFLOP/s, the
    autotuned config and the first call's compile + autotune time."""
    base = load("baseline_triton_grouped_gemm")
    benches = [load(m).get_benchmark() for m in ("baseline_triton_grouped_gemm", "optimized_triton_grouped_gemm",
                                                 "optimized_triton_grouped_gemm_tma")]
    outs = []
    for i, bench in enumerate(benches):
        bench.device, bench.seed = torch.device("cuda"), 0
        bench.setup()
        start = time.perf_counter()
        outs.append(guarded_run(bench))
        if i == 2:
            tuning_s = time.perf_counter() - start
    compare(outs[0], outs[2], base.WORKLOAD)
    compare(outs[1], outs[2], base.WORKLOAD)
    times = {"pointer": timed_ms(benches[1].run), "tma": timed_ms(benches[2].run)}
    print({n: f"{t:.3f} ms, {base.WORKLOAD.flops / t / 1e9:.0f} TFLOP/s" for n, t in times.items()},
          f"best {load('ch14_grouped_tma')._grouped_gemm_tuned.best_config}, autotune {tuning_s:.1f} s")
    assert tuning_s < 60, f"compile + autotune took {tuning_s:.0f} s"


def loop_tma_and(variant: str) -> tuple[list, list, float]:
    """The pair's loop, its TMA variant and ``variant`` set up at the pair's size on the GPU and run once
    each: (benchmarks, outputs, seconds of the last one's first call: its compile and autotune)."""
    benches = [load(m).get_benchmark() for m in ("baseline_triton_grouped_gemm", "optimized_triton_grouped_gemm_tma", variant)]
    outs = []
    for bench in benches:
        bench.device, bench.seed = torch.device("cuda"), 0
        bench.setup()
        start = time.perf_counter()
        outs.append(guarded_run(bench))
    return benches, outs, time.perf_counter() - start


def beside_tma(variant: str, tuned_name: str) -> tuple[list, float]:
    """The pair's loop, its TMA variant and ``variant`` ("tma_split") at the pair's size: both
    TMA variants against the loop (the harness's comparison); printed: their times, TFLOP/s of the real
    rows, the multiplied rows' padding, the configs their autotuners (``variant``'s kernel module's
    ``tuned_name``) chose. Returns (benchmarks, seconds of the variant's first call)."""
    base, split = load("baseline_triton_grouped_gemm"), load("ch14_grouped_tma_split")
    benches, outs, first_s = loop_tma_and(f"optimized_triton_grouped_gemm_{variant}")
    compare(outs[0], outs[1], base.WORKLOAD)
    compare(outs[0], outs[2], base.WORKLOAD)
    rows = base.group_rows(base.WORKLOAD)
    padded = {"tma": 1 - sum(rows) / (128 * sum((n + 127) // 128 for n in rows)), variant: split.padded_fraction(rows, 128)}
    times = {"tma": timed_ms(benches[1].run), variant: timed_ms(benches[2].run)}
    print({n: f"{t:.3f} ms, {base.WORKLOAD.flops / t / 1e9:.0f} TFLOP/s, padding {padded[n]:.1%}" for n, t in times.items()},
          f"best tma {load('ch14_grouped_tma')._grouped_gemm_tuned.best_config},"
          f" {variant} {getattr(load(f'ch14_grouped_{variant}'), tuned_name).best_config}, first call {first_s:.1f} s")
    return benches, first_s


def test_grouped_gemm_tma_and_tma_split_at_full_size_match_the_loop_and_print_both() -> None:
    """The split TMA variant (64-row blocks for the bands' short tails, a branch per tile) beside the
    TMA variant, as beside_tma checks and prints. No assertion on the times."""
    beside_tma("tma_split", "_grouped_gemm_split_tuned")


def test_fp8_quantization_and_gemm() -> None:
    mod = load("optimized_triton_fp8_gemm")
    x, w = randn(256, 1024), randn(512, 1024) / 32
    q, s = mod.quantize_rows(x)
    q_ref, s_ref = mod.quantize_rows_reference(x)
    assert torch.equal(s, s_ref)
    assert (q.float() == q_ref.float()).float().mean() > 0.999  # Triton's fast fp32 division may differ by an ulp
    w_q, w_s = mod.quantize_rows_reference(w)
    out = mod.scaled_mm(q, s, w_q, w_s)
    ref = (q.float() * s[:, None]) @ (w_q.float() * w_s[:, None]).t()
    assert rel_l2(out, ref) < 1e-2
    assert rel_l2(out, x @ w.t()) < 0.08


needs_cupy = pytest.mark.skipif(importlib.util.find_spec("cupy") is None, reason="needs CuPy")


def nvrtc_bench(**sizes: int):
    """The NVRTC pair's optimized variant set up at ``sizes`` (none: the pair's own), its output
    buffer filled with NaN so that a pack the grid misses shows."""
    base, opt = load("baseline_runtime_compiled_kernel"), load("optimized_runtime_compiled_kernel")
    bench = opt.get_benchmark()
    bench.workload = base.gate_workload(**sizes)
    bench.setup()
    bench.out.fill_(float("nan"))
    return bench


def same_bits(out: torch.Tensor, ref: torch.Tensor) -> float:
    return (out.view(torch.int16) == ref.view(torch.int16)).float().mean().item()


@needs_cupy
@pytest.mark.parametrize(("rows", "dim"), [(333, 1000), (7, 24), (5, 8 * 257)])
def test_nvrtc_bias_swiglu_matches_eager(rows: int, dim: int) -> None:
    """Partial last blocks (125, 3 and 257 packs a row) and odd row counts."""
    bench = nvrtc_bench(rows=rows, dim=dim)
    ref = F.silu(bench.gate + bench.bias_g) * (bench.up + bench.bias_u)
    out = bench.run()
    torch.cuda.synchronize()
    compare([("out", ref)], [("out", out)], bench.workload)
    assert same_bits(out, ref) > 0.999  # only the hardware reciprocal may move an output by an ulp


@needs_cupy
def test_nvrtc_bias_swiglu_at_the_pair_size_prints_its_bandwidth() -> None:
    """The pair's 16,384 x 8,192: eager's bits but for a few, and the kernel's HBM rate (printed)."""
    bench = nvrtc_bench()
    ref = F.silu(bench.gate + bench.bias_g) * (bench.up + bench.bias_u)
    out = bench.run()
    torch.cuda.synchronize()
    compare([("out", ref)], [("out", out)], bench.workload)
    same = same_bits(out, ref)
    assert same > 0.999
    ms = timed_ms(bench.run, reps=50)
    print(f"\nbias_swiglu: {ms * 1e3:.1f} us, {bench.workload.bytes / ms / 1e9:.3f} TB/s, "
          f"grid {bench.grid}, same bits {same:.6f}")


def test_custom_op_is_one_graph_and_matches_the_broken_one() -> None:
    base, opt = load("baseline_custom_op_graph_break"), load("optimized_custom_op_graph_break")
    w = base.stack_workload(layers=3, tokens=64, dim=256)
    x = randn(w.tokens, w.dim)
    counts, outs = [], []
    for act, stack in ((base.opaque_relu_squared, base.BrokenStack), (opt.relu_squared, opt.OneGraphStack)):
        torch.manual_seed(0)
        model = base.mlp_stack(w, act, stack).cuda().to(torch.bfloat16)
        torch._dynamo.reset()
        explained = torch._dynamo.explain(model)(x)
        counts.append((explained.graph_count, explained.graph_break_count))
        with torch.no_grad():
            outs.append(torch.compile(model)(x))
    assert counts[0][1] >= w.layers and counts[1] == (1, 0)
    assert rel_l2(outs[1], outs[0]) < 1e-2


def test_optimized_stack_compiles_its_own_graph_after_the_baseline() -> None:
    """The harness's order in one process: each setup compiles (or reuses its own variant's)
    graphs; the first H200 run's optimized setup compiled nothing and ran the baseline's."""
    from torch._dynamo.utils import counters

    base, opt = load("baseline_custom_op_graph_break"), load("optimized_custom_op_graph_break")
    torch._dynamo.reset()
    compiled = []
    for bench in (base.GraphBreakingOp(), opt.TritonOp(), base.GraphBreakingOp(), opt.TritonOp()):
        bench.workload = base.stack_workload(layers=3, tokens=64, dim=256)
        bench.device, bench.seed = torch.device("cuda"), 0
        before = counters["stats"]["unique_graphs"]
        bench.setup()
        compiled.append(counters["stats"]["unique_graphs"] - before)
    assert compiled[0] >= 2 and compiled[1] == 1 and compiled[3] == 0


def test_compile_report_finds_triton_kernels() -> None:
    cr = load("compile_report")
    rep = cr.report(cr.DemoModel().cuda(), cr.demo_calls(torch.device("cuda")))
    assert rep.graph_breaks == 1 and any(k.startswith("triton_") for k in rep.kernel_names)


def test_alibi_flash_each_config_and_the_autotuned_call_match_the_baseline_at_the_pair_size() -> None:
    """flex_score_mod's ``_triton`` kernel at the pair's size (4 x 16 heads x 4,096 x 64, bf16): each
    autotune candidate (both routes of the bias) and the autotuned call pass the pair's verification
    against the baseline's SDPA with the materialized bias; without the bias (slopes 0) they fail; and
    a shape the pair does not use (3 heads, 384 tokens) matches too. Prints each config's time."""
    from aisp.harness.verify import VerificationError

    base, flash = load("baseline_flex_score_mod"), load("ch14_alibi_flash")
    bench = base.MaterializedBiasAttention()
    bench.device, bench.seed = torch.device("cuda"), 0
    bench.setup()
    ref = [("out", bench.run())]
    slopes = base.alibi_slopes(bench.workload.heads, bench.device)
    table = flash.bias_table(slopes, bench.workload.seq, bench.workload.head_dim, torch.bfloat16)
    for config in [*flash.CONFIGS, None]:
        out = flash.alibi_flash_attention(bench.q, bench.k, bench.v, slopes, table, config)
        compare(ref, [("out", out)], bench.workload)
        ms = timed_ms(lambda c=config: flash.alibi_flash_attention(bench.q, bench.k, bench.v, slopes, table, c), reps=20)
        print(f"\n{config}: {ms:.4f} ms, {bench.workload.flops / ms / 1e9:.1f} TFLOP/s")
    with pytest.raises(VerificationError):
        compare(ref, [("out", flash.alibi_flash_attention(bench.q, bench.k, bench.v, slopes * 0, None, flash.CONFIGS[1]))],
                bench.workload)
    q, k, v = randn(1, 3, 384, 64), randn(1, 3, 384, 64), randn(1, 3, 384, 64)
    small = base.alibi_slopes(3, q.device)
    bias = base.alibi_causal_bias(3, 384, q.device)[None]
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=bias)
    for config in flash.CONFIGS:
        assert rel_l2(flash.alibi_flash_attention(q, k, v, small, None, config), want) < 1e-2, config
