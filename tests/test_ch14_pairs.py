"""Chapter 14 pairs on a CPU: every file documents itself, CUDA-only pairs skip with their reason,
the compile path and the FlexAttention score_mod match their baselines, the NVRTC source
compiles, and the custom-op pair's graph counts are what its header claims."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest
import torch
import torch.nn.functional as F

from aisp.harness.benchmark import unmet_requirements
from aisp.harness.discovery import pairs_in
from aisp.harness.execute import guarded_run
from aisp.harness.loader import import_module_at
from aisp.harness.verify import VerificationError, compare
from aisp.kits.gpt import GPTConfig

CH14 = Path(__file__).resolve().parents[1] / "ch14"
HAS_TRITON = importlib.util.find_spec("triton") is not None
PAIRS = ["compile_modes", "custom_op_graph_break", "flex_score_mod", "runtime_compiled_kernel",
         "triton_fp8_gemm", "triton_fused_layernorm", "triton_grouped_gemm"]


def load(module: str) -> ModuleType:
    return import_module_at(CH14 / f"{module}.py")


def pair_modules() -> list[Path]:
    return sorted(CH14.glob("baseline_*.py")) + sorted(CH14.glob("optimized_*.py"))


def test_discovery_finds_the_seven_pairs_three_compile_modes_three_grouped_gemms_three_flex() -> None:
    pairs = {p.name: p for p in pairs_in(CH14)}
    assert sorted(pairs) == PAIRS
    modes = sorted(p.stem for p in CH14.glob("optimized_compile_modes_*.py"))
    assert modes == [f"optimized_compile_modes_{m}" for m in ("default", "max_autotune", "reduce_overhead")]
    grouped = sorted(p.stem for p in pairs["triton_grouped_gemm"].optimized)
    assert grouped == ["optimized_triton_grouped_gemm", "optimized_triton_grouped_gemm_tma",
                       "optimized_triton_grouped_gemm_tma_split"]
    assert [p.stem for p in pairs["flex_score_mod"].optimized] == ["optimized_flex_score_mod",
                                                                   "optimized_flex_score_mod_autotuned",
                                                                   "optimized_flex_score_mod_triton"]


@pytest.mark.parametrize("path", pair_modules(), ids=lambda p: p.stem)
def test_pair_file_documents_itself(path: Path) -> None:
    text = path.read_text()
    doc = ast.get_docstring(ast.parse(text)) or ""
    for line in ("Baseline", "Optimized", "Expect:", "Run:"):
        assert line in doc, f"{path.name} docstring lacks '{line}'"
    if path.stem.startswith("baseline_"):
        assert "Tolerance:" in doc, f"{path.name} does not justify its tolerance"
    assert len(text.splitlines()) < 150


@pytest.mark.skipif(not HAS_TRITON, reason="the Triton pairs import triton")
@pytest.mark.parametrize("name", PAIRS)
def test_gpu_pairs_skip_with_reason_on_cpu(name: str) -> None:
    reason = unmet_requirements(load(f"baseline_{name}").WORKLOAD.requires, torch.device("cpu"))
    assert reason and "CUDA" in reason


def test_requirements_name_what_each_pair_needs() -> None:
    assert load("baseline_triton_fp8_gemm").WORKLOAD.requires.min_compute_capability == (9, 0)
    nvrtc = load("baseline_runtime_compiled_kernel").WORKLOAD.requires
    assert "cupy" in nvrtc.packages and nvrtc.min_compute_capability == (8, 0)


def _tiny_block(module: str, seed: int) -> object:
    bench = load(module).get_benchmark()
    bench.device, bench.seed = torch.device("cpu"), seed
    bench.workload = dataclasses.replace(bench.workload, model=GPTConfig(seq=16, dim=64, heads=2, layers=2), batch=2)
    bench.setup()
    return bench


@pytest.mark.skipif(shutil.which("g++") is None, reason="Inductor on a CPU needs a C++ compiler")
def test_compiled_blocks_match_eager_and_report_compile_time() -> None:
    """The default mode (the one that also runs on a CPU) against eager, two seeds."""
    workload = load("baseline_compile_modes").WORKLOAD
    refs = {}
    for seed in (0, 1):
        refs[seed] = guarded_run(_tiny_block("baseline_compile_modes", seed))
        compiled = _tiny_block("optimized_compile_modes_default", seed)
        compare(refs[seed], guarded_run(compiled), workload)
    assert compiled.metrics()["compile_s"] > 0
    with pytest.raises(VerificationError):
        compare(refs[0], refs[1], workload)


def test_flex_score_mod_matches_the_materialized_bias() -> None:
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    base, opt = load("baseline_flex_score_mod"), load("optimized_flex_score_mod")
    heads, seq = 4, 256
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, heads, seq, 32, generator=gen).to(torch.bfloat16) for _ in range(3))
    bias = base.alibi_causal_bias(heads, seq, torch.device("cpu")).to(torch.bfloat16)[None]
    ref = [("out", F.scaled_dot_product_attention(q, k, v, attn_mask=bias))]
    mask = create_block_mask(opt.causal, None, None, seq, seq, device="cpu")
    score_mod = opt.alibi_score_mod(base.alibi_slopes(heads, torch.device("cpu")))
    compare(ref, [("out", flex_attention(q, k, v, score_mod=score_mod, block_mask=mask))], base.WORKLOAD)
    with pytest.raises(VerificationError):  # without the bias the answer differs
        compare(ref, [("out", flex_attention(q, k, v, block_mask=mask))], base.WORKLOAD)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_nvrtc_source_compiles_for_sm90(tmp_path: Path) -> None:
    source = tmp_path / "bias_swiglu.cu"
    opt = load("optimized_runtime_compiled_kernel")
    source.write_text(opt.SOURCE)
    subprocess.run(["nvcc", "-arch=sm_90", *opt.OPTIONS, "-c", str(source), "-o", str(tmp_path / "k.o")],
                   check=True, capture_output=True)


@pytest.mark.skipif(not HAS_TRITON, reason="needs Triton")
def test_grouped_block_table_covers_every_row_once() -> None:
    rows = load("baseline_triton_grouped_gemm").group_rows(load("baseline_triton_grouped_gemm").WORKLOAD)
    group, start, end = load("optimized_triton_grouped_gemm").block_table(rows, 128, torch.device("cpu"))
    covered = torch.cat([torch.arange(s, min(s + 128, e)) for s, e in zip(start.tolist(), end.tolist(), strict=True)])
    assert torch.equal(covered, torch.arange(sum(rows)))
    assert torch.equal(torch.bincount(group, minlength=len(rows)),
                       torch.tensor([(n + 127) // 128 for n in rows]))


@pytest.mark.skipif(not HAS_TRITON, reason="needs Triton")
@pytest.mark.parametrize("routing", ["pair", "tails"])
def test_split_block_table_covers_every_row_once_with_64_row_tails(routing: str) -> None:
    """Each block multiplies rows [start, start + height): with its band's rows before ``end`` they
    cover every row exactly once; a block is 64 rows high exactly where it holds 1-64 rows; the
    padded share (padded_fraction) is the bands' rounded-up rows counted band by band, below the
    128-row table's."""
    base, split = load("baseline_triton_grouped_gemm"), load("ch14_grouped_tma_split")
    rows = base.group_rows(base.WORKLOAD) if routing == "pair" else [128, 0, 129, 64, 65, 320, 1, 193, 0, 37]
    group, start, end, height = split.split_block_table(rows, 128, torch.device("cpu"))
    covered = torch.cat([torch.arange(s, min(s + h, e))
                         for s, e, h in zip(start.tolist(), end.tolist(), height.tolist(), strict=True)])
    assert torch.equal(covered, torch.arange(sum(rows)))
    assert torch.equal(height == 64, end - start <= 64) and set(height.tolist()) <= {64, 128}
    assert torch.equal(torch.bincount(group, minlength=len(rows)), torch.tensor([(n + 127) // 128 for n in rows]))
    multiplied = sum(n // 128 * 128 + (64 if 0 < n % 128 <= 64 else 128 * (n % 128 > 0)) for n in rows)
    assert split.padded_fraction(rows, 128) == pytest.approx(1 - sum(rows) / multiplied)
    assert split.padded_fraction(rows, 128) < 1 - sum(rows) / (128 * sum((n + 127) // 128 for n in rows))


@pytest.mark.skipif(not HAS_TRITON, reason="needs Triton")
def test_disabled_launcher_breaks_the_graph_and_triton_op_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    """Traced on a CPU: the kernels are replaced by torch math (no Triton driver here)."""
    base, opt = load("baseline_custom_op_graph_break"), load("optimized_custom_op_graph_break")
    monkeypatch.setattr(base, "launch_relu_squared", lambda x: torch.relu(x) ** 2)
    opt.relu_squared.register_kernel("cpu")(lambda x: torch.relu(x) ** 2)
    w = dataclasses.replace(base.WORKLOAD, layers=3, tokens=4, dim=16)
    x = torch.randn(w.tokens, w.dim)
    counts = []
    for act in (base.opaque_relu_squared, opt.relu_squared):
        torch._dynamo.reset()
        out = torch._dynamo.explain(base.mlp_stack(w, act))(x)
        counts.append((out.graph_count, out.graph_break_count))
    assert counts[0][1] >= w.layers and counts[0][0] > w.layers
    assert counts[1] == (1, 0)


@pytest.mark.skipif(not HAS_TRITON, reason="needs Triton")
def test_each_variant_keeps_its_own_graphs_when_set_up_in_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness's order in one process (baseline, optimized, baseline, optimized): the
    optimized stack compiles its one graph and runs no opaque launch; the baseline stays broken.
    With both stacks plain nn.Sequential (the first H200 run) the optimized model was served the
    baseline's broken graphs and compiled nothing."""
    base, opt = load("baseline_custom_op_graph_break"), load("optimized_custom_op_graph_break")
    opaque_calls = []
    monkeypatch.setattr(base, "launch_relu_squared", lambda x: opaque_calls.append(1) or torch.relu(x) ** 2)
    opt.relu_squared.register_kernel("cpu")(lambda x: torch.relu(x) ** 2)
    graphs = []

    def counting_backend(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]):
        graphs.append(gm)
        return gm.forward

    w = dataclasses.replace(base.WORKLOAD, layers=3, tokens=4, dim=16)
    x = torch.randn(w.tokens, w.dim)
    torch._dynamo.reset()
    seen = []
    for _ in range(2):
        for bench in (base.GraphBreakingOp(), opt.TritonOp()):
            stack = base.mlp_stack(w, bench.activation(), bench.stack)
            model = torch.compile(stack, backend=counting_backend, dynamic=False)
            graphs.clear(), opaque_calls.clear()
            with torch.no_grad():
                torch.testing.assert_close(model(x), stack(x))
            seen.append((len(graphs), len(opaque_calls)))
    assert seen[1] == (1, 0) and seen[3] == (0, 0)  # one graph, compiled once, reused by the second setup
    assert seen[0][0] >= 2 and seen[0][1] == seen[2][1] == 2 * w.layers  # before/after the break; compiled + eager


@pytest.mark.skipif(shutil.which("g++") is None, reason="Inductor on a CPU needs a C++ compiler")
def test_autotuned_score_mod_variant_computes_as_its_parent_on_a_cpu() -> None:
    """On a CPU both compile flex_attention in the default mode, without kernel_options."""
    outs = []
    for module in ("optimized_flex_score_mod", "optimized_flex_score_mod_autotuned"):
        bench = load(module).get_benchmark()
        bench.device, bench.seed = torch.device("cpu"), 0
        bench.workload = dataclasses.replace(bench.workload, batch=1, heads=2, seq=256, head_dim=32)
        bench.setup()
        outs.append(guarded_run(bench))
        assert bench.metrics()["compile_s"] > 0
    assert torch.equal(outs[0][0][1], outs[1][0][1])


def test_autotuned_score_mod_variant_compiles_with_max_autotune_on_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a GPU (torch.compile recorded, the eager kernel run on CPU tensors): max-autotune and
    the two kernel_options, which hold for the causal mask (and not for a sliding window's)."""
    from flex_autotune import AUTOTUNE, CompileRecorder, blocks_are_contiguous, rows_guaranteed_safe
    from torch.nn.attention.flex_attention import create_block_mask

    from aisp.kits import attention

    recorder, passed = CompileRecorder(), []
    module = load("optimized_flex_score_mod_autotuned")
    monkeypatch.setattr(torch, "compile", recorder)
    monkeypatch.setattr(attention, "flex_attention", lambda *args, **kwargs: passed.append(kwargs))
    bench = module.get_benchmark()
    bench.device = torch.device("cuda")
    bench.q = bench.k = bench.v = bench.score_mod = bench.block_mask = None
    bench.compile()
    assert recorder.calls == [AUTOTUNE]
    assert passed[0]["kernel_options"] == {"ROWS_GUARANTEED_SAFE": True, "BLOCKS_ARE_CONTIGUOUS": True}
    causal = create_block_mask(load("optimized_flex_score_mod").causal, None, None, 2048, 2048, device="cpu")
    assert rows_guaranteed_safe(causal) and blocks_are_contiguous(causal)
    window = create_block_mask(lambda b, h, q, kv: (kv <= q) & (q - kv < 1024), None, None, 2048, 2048, device="cpu")
    assert not rows_guaranteed_safe(window) and not blocks_are_contiguous(window)
