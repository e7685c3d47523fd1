"""Chapter 13 pairs: every variant matches its baseline on small CPU workloads, leaves its
inputs alone, survives scratch poisoning, and fails verification when given another seed's
answer; every pair file documents itself and CUDA-only pairs say why they skip."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
import resident_floor as floor
import torch
from conftest import variant_modules
from gpu_memory import run_peak_bytes
from refill_check import check_refilled_pair
from triton_cpu import verify_pair_interpreted

import aisp
from aisp.harness.benchmark import unmet_requirements
from aisp.harness.execute import guarded_run as guarded
from aisp.harness.loader import import_module_at
from aisp.harness.verify import VerificationError, compare, poison_scratch, tensor_attributes

CH13 = Path(__file__).resolve().parents[1] / "ch13"


def load(module: str) -> ModuleType:
    """Import a ch13 module by name, evicting same-named modules of other chapters first."""
    return import_module_at(CH13 / f"{module}.py")


def pair_files() -> list[tuple[str, str]]:
    """(baseline, optimized) module names of the single-GPU pairs, matching the longest baseline
    name (as discovery does). The ``*_multigpu`` pairs have their own tests."""
    return [p for p in variant_modules(CH13) if "multigpu" not in p[1]]


def tiny_gpt() -> object:
    return load("ch13_gpt").GPTConfig(vocab=128, seq=32, dim=32, heads=2, layers=2)


SMALL = {
    "training_standard": lambda: dict(model=tiny_gpt(), batch=2),
    "activation_checkpointing": lambda: dict(model=tiny_gpt(), batch=2),
    "precisionmixed": lambda: dict(model=tiny_gpt(), batch=2),
    "memory_profiling": lambda: dict(model=tiny_gpt(), batch=2, lengths=(32, 24, 16)),
    "dataloader_default": lambda: dict(samples=48, batch=16, image=20, crop=16, classes=10, workers=1, prefetch=2),
    "attention_standard": lambda: dict(batch=2, heads=2, seq=64, head_dim=32),
    "long_context_attention": lambda: dict(batch=1, heads=2, seq=2048 + 256, head_dim=32),
    "sliding_window_attention": lambda: dict(batch=1, heads=2, seq=256, head_dim=32, span=48),
    "kv_cache_naive": lambda: dict(batch=2, heads=2, head_dim=16, prompt=12, steps=6),
    "matmul_pytorch": lambda: dict(m=64, n=48, k=128),
    "precisionfp8": lambda: dict(tokens=64, d_in=128, d_out=32),
    "quantization": lambda: dict(dim=256, hidden=1024),
    "arithmetic_intensity": lambda: dict(numel=4096),
    "regional_compile": lambda: dict(model=tiny_gpt(), batch=2, seq=16, backend="eager"),
}
"""Per pair, workload sizes that keep a CPU run to seconds (same code, smaller shapes)."""

CPU_UNRUNNABLE = {
    "optimized_autograd_standard": "captures a CUDA graph",
    "optimized_training_standard_graph": "captures a CUDA graph (its capture logic: test_graphed_training_captures_"
                                         "a_restored_run_after_warmup_on_a_cpu)",
    "optimized_bandwidth_naive": "a Triton kernel (needs a GPU)",
    "optimized_precisionfp8_te": "Transformer Engine",
    "baseline_precisionfp8_te": "pairs with Transformer Engine only",
    "optimized_matmul_pytorch": "torch.mm(out_dtype=...) is CUDA-only",
    "optimized_quantization": "a Triton kernel (verified under TRITON_INTERPRET=1 in test_ch13_quantization.py)",
    "optimized_attention_standard_cudnn": "cuDNN attention (skipped on a CPU: test_cudnn_variants_skip_on_a_cpu)",
    "optimized_long_context_attention_cudnn": "cuDNN attention (skipped on a CPU: test_cudnn_variants_skip_on_a_cpu)",
    "optimized_sliding_window_attention_triton": "a Triton kernel (verified under TRITON_INTERPRET=1: "
                                                 "test_triton_window_variant_verifies_under_the_interpreter)",
    "optimized_sliding_window_attention_hostdesc": "a Triton kernel (verified under TRITON_INTERPRET=1: "
                                                   "test_triton_window_variant_verifies_under_the_interpreter)",
    "optimized_sliding_window_attention_cudnn": "cuDNN's graph API (skipped on a CPU: test_cudnn_variants_skip_on_a_cpu; "
                                                "GPU: tests/test_kits_cudnn_sdpa.py)",
}
"""Variants whose code cannot run on a CPU, with why."""


def pair_name(baseline: str) -> str:
    return baseline.removeprefix("baseline_")


def build(module: str, seed: int) -> aisp.Benchmark:
    bench = load(module).get_benchmark()
    bench.device, bench.seed = torch.device("cpu"), seed
    name = pair_name(pair_of(module))
    if name in SMALL:
        bench.workload = dataclasses.replace(bench.workload, **SMALL[name]())
    return bench


def pair_of(module: str) -> str:
    return next(b for b, o in pair_files() if module in (b, o))


CPU_PAIRS = [(b, o) for b, o in pair_files() if o not in CPU_UNRUNNABLE and b not in CPU_UNRUNNABLE]


@pytest.mark.parametrize(("baseline", "optimized"), CPU_PAIRS)
def test_cpu_pair_matches_keeps_inputs_and_rejects_a_wrong_answer(baseline: str, optimized: str) -> None:
    workload = build(baseline, 0).workload
    refs = {}
    for seed in (0, 1):
        base = build(baseline, seed)
        base.setup()
        refs[seed] = guarded(base)
        base.teardown()
        opt = build(optimized, seed)
        opt.setup()
        compare(refs[seed], guarded(opt), workload)
        opt.teardown()
    with pytest.raises(VerificationError):
        compare(refs[0], refs[1], workload)


@pytest.mark.parametrize(("baseline", "optimized"), CPU_PAIRS)
def test_cpu_variant_survives_scratch_poisoning(baseline: str, optimized: str) -> None:
    bench = build(optimized, 0)
    bench.setup()
    ref = guarded(bench)
    poison_scratch(bench, set(tensor_attributes(bench)))
    compare(ref, guarded(bench), build(baseline, 0).workload)
    bench.teardown()


UNDECLARED = {
    "dataloader_default": "its images are made inside the DataLoader's worker processes",
}
"""Pairs that declare no per-call inputs, and why (their answers computed ahead are not checked;
each states its reason in the workload, so its result reads ``ok-unchecked`` with it)."""


@pytest.mark.parametrize(("baseline", "optimized"), CPU_PAIRS)
def test_cpu_pair_matches_on_refilled_inputs(baseline: str, optimized: str) -> None:
    if pair_name(baseline) in UNDECLARED:
        bench = build(baseline, 0)
        assert not bench.inputs and bench.workload.no_inputs_reason
        return
    check_refilled_pair(build(baseline, 0), build(optimized, 0), build(baseline, 0).workload)


def test_a_training_step_that_skips_its_update_is_caught() -> None:
    """The second step's loss and the logits show the first update: lr=0 must fail."""
    ref = build("baseline_precisionmixed", 0)
    ref.setup()
    lazy = build("optimized_precisionmixed", 0)
    lazy.workload = dataclasses.replace(lazy.workload, lr=0.0)
    lazy.setup()
    with pytest.raises(VerificationError):
        compare(guarded(ref), guarded(lazy), ref.workload)


GPU_ONLY = [(b, o) for b, o in pair_files() if load(b).WORKLOAD.requires.cuda]


@pytest.mark.parametrize(("baseline", "optimized"), GPU_ONLY)
def test_gpu_pair_skips_with_reason_on_cpu(baseline: str, optimized: str) -> None:
    reason = unmet_requirements(load(baseline).WORKLOAD.requires, torch.device("cpu"))
    assert reason and "CUDA" in reason


def test_only_the_input_pipeline_pair_runs_on_a_cpu() -> None:
    assert [b for b, _ in pair_files() if not load(b).WORKLOAD.requires.cuda] == ["baseline_dataloader_default"]


@pytest.mark.parametrize("name", ["activation_checkpointing", "memory_profiling"])
def test_memory_goal_pairs_headline_memory(name: str) -> None:
    assert load(f"baseline_{name}").WORKLOAD.headline == "memory"


def test_te_pair_requires_transformer_engine() -> None:
    assert "transformer_engine" in load("baseline_precisionfp8_te").WORKLOAD.requires.packages


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text())) or ""


@pytest.mark.parametrize("path", [CH13 / f"{m}.py" for m in sorted({m for p in pair_files() for m in p})],
                         ids=lambda p: p.stem)
def test_pair_file_documents_itself(path: Path) -> None:
    tree = ast.parse(path.read_text())
    doc = ast.get_docstring(tree) or ""
    for line in ("Baseline", "Optimized", "Expect:", "Run:"):
        assert line in doc, f"{path.name} docstring lacks '{line}'"
    if path.stem.startswith("baseline_"):
        assert "Tolerance:" in doc, f"{path.name} does not justify its tolerance"
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "get_benchmark" in names


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["activation_checkpointing", "memory_profiling"])
def test_memory_goal_pairs_lower_peak_on_gpu(name: str) -> None:
    peaks = [run_peak_bytes(load(f"{side}_{name}").get_benchmark()) for side in ("baseline", "optimized")]
    assert peaks[1] < peaks[0] / 1.5, f"peak run memory {peaks}"


@pytest.mark.gpu
@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs Triton")
def test_tiled_transpose_handles_ragged_shapes_on_gpu() -> None:
    x = torch.randn(1000, 333, device="cuda")
    assert torch.equal(load("optimized_bandwidth_naive").transpose(x), x.t().contiguous())


@pytest.mark.parametrize("module", ["optimized_attention_standard_cudnn", "optimized_long_context_attention_cudnn",
                                    "optimized_sliding_window_attention_cudnn"])
def test_cudnn_variants_skip_on_a_cpu(module: str) -> None:
    """Where cuDNN attention cannot run, setup raises Unavailable with the reason (a skip, not an error)."""
    bench = build(module, 0)
    with pytest.raises(aisp.Unavailable, match="cuDNN attention needs a CUDA GPU"):
        bench.setup()


RESIDENT = {
    "activation_checkpointing": lambda bench, out: [*bench.params, bench.idx, bench.targets, *out],
    "memory_profiling": lambda bench, out: [*bench.model.parameters(), *bench.idx, *bench.targets, out[0], *out[1]],
}
"""Per memory-headline pair, the tensors its declared ``resident_bytes`` counts, picked from a variant
set up and run at the real sizes: the fp32 parameters, the token inputs and run()'s output (the losses
and logits; for memory_profiling, the losses and every gradient)."""


@pytest.mark.parametrize("name", sorted(RESIDENT))
def test_the_declared_resident_bytes_are_what_the_floor_tensors_hold(name: str) -> None:
    bench = load(f"baseline_{name}").get_benchmark()
    bench.autocast = None  # no autocast on the meta device; run() returns fp32 logits either way
    out = floor.run_on_meta(bench)
    assert bench.workload.resident_bytes == floor.held_bytes(RESIDENT[name](bench, out))


@pytest.mark.parametrize("name", sorted(RESIDENT))
def test_the_resident_bytes_are_below_the_stored_peaks(name: str) -> None:
    workload = load(f"baseline_{name}").WORKLOAD
    peaks = floor.stored_peaks(CH13, name)
    assert set(peaks) == {"baseline_peak_bytes", "optimized_peak_bytes"}
    assert all(floor.capacity_percent(workload, peak) < 100 for peak in peaks.values()), peaks


@pytest.mark.parametrize("name", sorted(RESIDENT))
def test_the_resident_bytes_are_below_the_book_runs_peaks(name: str) -> None:
    peaks = floor.book_run_memory(f"ch13:{name}")
    if not peaks:
        pytest.skip("the whole-book run of 2026-11-28 is not on this machine")
    workload = load(f"baseline_{name}").WORKLOAD
    assert len(peaks) == 2 and all(floor.capacity_percent(workload, peak) < 100 for peak in peaks.values()), peaks


@pytest.mark.parametrize("side", ["baseline", "optimized"])
def test_activation_checkpointings_setup_bytes_are_the_weights_snapshot_and_tokens(side: str) -> None:
    """Its ceiling_note's figures: the whole-book run measured, to the byte, the fp32 weights, their
    start snapshot and the token inputs that the variant holds after setup at the real sizes."""
    measured = floor.book_run_memory("ch13:activation_checkpointing", "setup_bytes")
    if not measured:
        pytest.skip("the whole-book run of 2026-11-28 is not on this machine")
    bench = floor.set_up_on_meta(load(f"{side}_activation_checkpointing").get_benchmark())
    assert floor.setup_held_bytes(bench) == measured[f"{side}_activation_checkpointing"]
    assert floor.held_bytes([*bench.params, *bench.start, bench.idx, bench.targets]) == floor.setup_held_bytes(bench)


def test_autotuned_window_variant_computes_as_its_parent_on_a_cpu() -> None:
    from flex_autotune import outputs

    parent, autotuned = outputs(build, "optimized_sliding_window_attention", "optimized_sliding_window_attention_autotuned")
    assert torch.equal(parent, autotuned)


FP32_QKV = """
def fp32(make):
    return lambda bench: tuple(t.float() for t in make(bench))
parent = sys.modules.get("optimized_sliding_window_attention_triton")  # _hostdesc's setup is _triton's
for mod in {id(m): m for m in (*mods.values(), parent) if hasattr(m, "make_qkv")}.values():
    mod.make_qkv = fp32(mod.make_qkv)  # bf16 through tensor descriptors comes out garbled in the Triton 3.6 interpreter
"""


WINDOW_TRITON = ("triton", "hostdesc")
"""The window's variants on ``aisp.kits.sparse_flash``: descriptors made by each program, or on the host."""


@pytest.mark.parametrize("suffix", WINDOW_TRITON)
def test_triton_window_variant_verifies_under_the_interpreter(suffix: str) -> None:
    """aisp.kits.sparse_flash at the pair's CPU size (its own 128 x 64 tiles: partial tiles at both window
    edges), q, k, v in fp32 on both sides."""
    verify_pair_interpreted(CH13, "baseline_sliding_window_attention", f"optimized_sliding_window_attention_{suffix}",
                            SMALL["sliding_window_attention"](), FP32_QKV)


@pytest.mark.gpu
@pytest.mark.parametrize("suffix", WINDOW_TRITON)
def test_triton_window_variant_verifies_at_full_size_on_gpu(suffix: str) -> None:
    """The kit kernel at the pair's H200 size against the pair's baseline, twice (the lists are reused)."""
    pair = "sliding_window_attention"
    outs = []
    for module in (f"baseline_{pair}", f"optimized_{pair}_{suffix}"):
        bench = load(module).get_benchmark()
        bench.device = torch.device("cuda")
        bench.setup()
        outs += [guarded(bench), guarded(bench)]
        bench.teardown()
    workload = load(f"baseline_{pair}").WORKLOAD
    for other in outs[1:]:
        compare(outs[0], other, workload)


def test_autotuned_window_variant_compiles_with_max_autotune_on_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a GPU: the device is only read. No kernel_options: the window's mask has neither
    property (the left-edge tile comes first and is empty for the last rows; partial tiles apart)."""
    from flex_autotune import AUTOTUNE, CompileRecorder, blocks_are_contiguous, rows_guaranteed_safe
    from torch.nn.attention.flex_attention import create_block_mask

    recorder = CompileRecorder()
    monkeypatch.setattr(torch, "compile", recorder)
    bench = load("optimized_sliding_window_attention_autotuned").get_benchmark()
    for device in ("cuda", "cpu"):
        bench.device = torch.device(device)
        bench.flex()
    assert recorder.calls == [AUTOTUNE, {}]  # on a CPU: the parent's default torch.compile
    span = load("baseline_sliding_window_attention").WORKLOAD.span
    rule = load("baseline_sliding_window_attention").in_window
    mask = create_block_mask(lambda b, h, q, kv: rule(q, kv, span), None, None, 2048, 2048, device="cpu")
    assert not rows_guaranteed_safe(mask) and not blocks_are_contiguous(mask)


def _kv_on_gpu(module: str, seed: int) -> aisp.Benchmark:
    bench = load(module).get_benchmark()
    bench.device, bench.seed = torch.device("cuda"), seed
    bench.workload = dataclasses.replace(bench.workload, batch=2, heads=4, head_dim=128, prompt=96, steps=24)
    return bench


@pytest.mark.gpu
@pytest.mark.parametrize("module", ["optimized_kv_cache_naive_graph"])
def test_graphed_kv_cache_matches_the_baseline_and_follows_refilled_inputs_on_gpu(module: str) -> None:
    """The captured graph (cuDNN SDPA at 24 lengths) replays to the baseline's answer, reads the inputs at their addresses after an in-place
    refill, and survives its scratch being poisoned."""
    base, opt = _kv_on_gpu("baseline_kv_cache_naive", 0), _kv_on_gpu(module, 0)
    check_refilled_pair(base, opt, base.workload)
    opt = _kv_on_gpu(module, 1)
    opt.setup()
    assert opt.graph is not None
    base = _kv_on_gpu("baseline_kv_cache_naive", 1)
    base.setup()
    poison_scratch(opt, set(tensor_attributes(opt)))
    compare(guarded(base), guarded(opt), base.workload)


@pytest.mark.gpu
def test_graphed_compiled_training_matches_the_baseline_after_refill_and_poison_on_gpu() -> None:
    """At the pair's H200 size: the captured compiled step (Inductor kernels, cuBLAS, cuDNN attention
    backward in one graph) replays to the eager baseline's losses and logits, on refilled inputs and
    with its scratch (weights, grads' owners, output buffers) poisoned between replays."""
    def on_gpu(module: str) -> aisp.Benchmark:
        bench = load(module).get_benchmark()
        bench.device = torch.device("cuda")
        return bench

    base, opt = on_gpu("baseline_training_standard"), on_gpu("optimized_training_standard_graph")
    check_refilled_pair(base, opt, base.workload)
    base, opt = on_gpu("baseline_training_standard"), on_gpu("optimized_training_standard_graph")
    base.setup()
    opt.setup()
    poison_scratch(opt, set(tensor_attributes(opt)))
    compare(guarded(base), guarded(opt), base.workload)
    compare(guarded(base), guarded(opt), base.workload)

class _FakeGraph:
    """A CUDAGraph stand-in on a CPU: ``torch.cuda.graph(g)`` runs its body eagerly once (the capture);
    ``replay()`` counts."""

    def __init__(self) -> None:
        self.replays = 0

    def replay(self) -> None:
        self.replays += 1


def test_graphed_training_captures_a_restored_run_after_warmup_on_a_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The captured body is a whole run() from the start snapshot (the warmup calls moved the weights),
    so what replay() returns is the baseline's answer; run() only replays."""
    import contextlib

    monkeypatch.setattr(torch, "compile", lambda model: model)
    monkeypatch.setattr(torch.cuda, "Stream", lambda device: type("S", (), {"wait_stream": lambda s, o: None})())
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device: type("S", (), {"wait_stream": lambda s, o: None})())
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device: None)
    monkeypatch.setattr(torch.cuda, "CUDAGraph", _FakeGraph)
    monkeypatch.setattr(torch.cuda, "graph", lambda g: contextlib.nullcontext())
    base, opt = build("baseline_training_standard", 0), build("optimized_training_standard_graph", 0)
    base.setup()
    opt.setup()
    want = guarded(base)
    compare(want, guarded(opt), base.workload)
    assert opt.graph.replays == 1
    assert not torch.equal(opt.params[0], opt.start[0]), "the captured run took no update"
    with pytest.raises(VerificationError):  # the check can fail: a run from the warmed-up weights differs
        compare(want, _unrestored_run(opt), base.workload)


def _unrestored_run(bench: aisp.Benchmark) -> tuple[torch.Tensor, torch.Tensor]:
    """run() without its restore of the start weights."""
    losses, logits = [], None
    for s in range(bench.workload.steps):
        loss, logits = bench.step(bench.idx[s], bench.targets[s])
        losses.append(loss)
    return torch.stack(losses), logits.float()
