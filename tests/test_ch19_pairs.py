"""Chapter 19 pairs: discovery, CPU verification of the fp8 training, delayed scaling, cast-transpose,
MoE and optimizer pairs (the fp8 arithmetic runs on a CPU through torch's CPU ``_scaled_mm``), refilled
inputs, scratch poisoning, wrong answers rejected, delayed-scaling state, and the pair headers."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from types import ModuleType

import pytest
import resident_floor as floor
import torch
from refill_check import check_refilled_pair, check_two_seeds

import aisp
from aisp.harness.benchmark import unmet_requirements
from aisp.harness.execute import guarded_run as guarded
from aisp.harness.loader import import_module_at
from aisp.harness.verify import VerificationError, compare, poison_scratch, refill, tensor_attributes

CH19 = Path(__file__).resolve().parents[1] / "ch19"
PAIRS = ["fp8_cast_transpose", "fp8_delayed_scaling", "fp8_linear_training", "fp8_moe", "low_precision_optimizer",
         "w4a16_gemm"]
SMALL = {
    "fp8_linear_training": dict(tokens=128, d_in=64, d_out=64),
    "fp8_delayed_scaling": dict(rows=128, cols=256),
    "fp8_cast_transpose": dict(rows=128, cols=256),
    "fp8_moe": dict(tokens=256, dim=128, ffn=256, experts=4),
    "low_precision_optimizer": dict(dim=64, layers=2, tokens=32),
    "w4a16_gemm": dict(tokens=4, d_in=512, d_out=256),
}
"""Per pair, sizes that keep a CPU run to seconds (same code, smaller shapes)."""
CPU_PAIRS = [p for p in PAIRS if p != "w4a16_gemm"]
"""w4a16's optimized side is a Triton kernel: tested under the interpreter in test_ch19_triton.py."""
VARIANTS = {"fp8_cast_transpose": ["persistent"], "fp8_delayed_scaling": ["persistent"], "fp8_moe": ["triton", "fused_combine", "fused_passes", "device_schedule"],
            "low_precision_optimizer": ["in_backward"], "w4a16_gemm": ["prmt", "stream", "tiled", "swept"]}
"""Optimized variants beside optimized_<pair>.py (each measured against the same baseline)."""
CPU_OPTIMIZED = [(p, f"optimized_{p}") for p in CPU_PAIRS] + [
    (p, f"optimized_{p}_{v}") for p in CPU_PAIRS for v in VARIANTS.get(p, [])]
"""Every optimized file whose pair runs on a CPU (the variants' kernels run their CPU path there)."""


def load(module: str) -> ModuleType:
    return import_module_at(CH19 / f"{module}.py")


def build(module: str, seed: int) -> aisp.Benchmark:
    bench = load(module).get_benchmark()
    bench.device, bench.seed = torch.device("cpu"), seed
    pair = next(p for p in sorted(PAIRS, key=len, reverse=True) if module.split("_", 1)[1].startswith(p))
    bench.workload = dataclasses.replace(bench.workload, **SMALL[pair])
    return bench


def test_discovery_finds_the_chapter_pairs() -> None:
    found = sorted(p.stem.removeprefix("optimized_") for p in CH19.glob("optimized_*.py"))
    assert found == sorted(PAIRS + [f"{p}_{v}" for p, vs in VARIANTS.items() for v in vs])
    assert all((CH19 / f"baseline_{p}.py").exists() for p in PAIRS)


@pytest.mark.parametrize(("pair", "optimized"), CPU_OPTIMIZED, ids=[o for _, o in CPU_OPTIMIZED])
def test_cpu_pair_matches_and_rejects_another_seeds_answer(pair: str, optimized: str) -> None:
    check_two_seeds(build, f"baseline_{pair}", optimized)


@pytest.mark.parametrize(("pair", "optimized"), CPU_OPTIMIZED, ids=[o for _, o in CPU_OPTIMIZED])
def test_cpu_pair_matches_on_refilled_inputs(pair: str, optimized: str) -> None:
    check_refilled_pair(build(f"baseline_{pair}", 0), build(optimized, 0), build(f"baseline_{pair}", 0).workload)


@pytest.mark.parametrize(("pair", "optimized"), CPU_OPTIMIZED, ids=[o for _, o in CPU_OPTIMIZED])
def test_cpu_optimized_survives_scratch_poisoning(pair: str, optimized: str) -> None:
    bench = build(optimized, 0)
    bench.setup()
    ref = guarded(bench)
    poison_scratch(bench, set(tensor_attributes(bench)))
    compare(ref, guarded(bench), bench.workload)


def test_fp8_linear_is_not_the_bf16_answer_with_a_wrong_layout() -> None:
    """A transposed weight (the layout mistake _scaled_mm invites) must fail the declared tolerance."""
    base, opt = build("baseline_fp8_linear_training", 0), build("optimized_fp8_linear_training", 0)
    base.setup()
    opt.setup()
    opt.w = opt.w.detach().t().contiguous().requires_grad_()
    with pytest.raises(VerificationError):
        compare(guarded(base), guarded(opt), base.workload)


def test_delayed_scaling_records_each_cast_in_its_history() -> None:
    bench = build("optimized_fp8_delayed_scaling", 0)
    bench.setup()
    assert sorted(bench.history) == ["x"] and bench.history["x"].numel() == bench.workload.history
    with torch.no_grad():
        bench.x.mul_(2)
    slot = bench.quant.calls % bench.quant.length
    before = bench.history["x"].clone()
    scale = float(guarded(bench)[2][1])
    assert scale == pytest.approx(float(before.max()) / 448, rel=1e-6), "scaled by the history, not this x"
    assert bench.history["x"][slot] == pytest.approx(2 * float(before.max()), rel=1e-6)


def refilled_delayed_check(seed: int, refill_seed: int, pinned: bool) -> None:
    """The harness's refilled check of fp8_delayed_scaling at the test size: both variants set up and
    run once (the history then holds x's amax), x refilled in both, then compared. ``pinned``
    False: x as it was drawn before its amax was fixed (plain normal draws)."""
    base, opt = build("baseline_fp8_delayed_scaling", seed), build("optimized_fp8_delayed_scaling", seed)
    for bench in (base, opt):
        bench.setup()
        if not pinned:
            with torch.no_grad():
                bench.x.copy_(torch.randn(bench.x.shape, generator=bench.generator()).bfloat16())
            bench.prepare()
        guarded(bench)
        refill(bench, refill_seed)
    compare(guarded(base), guarded(opt), base.workload)


@pytest.mark.parametrize(("seed", "refill_seed"), [(44, 5), (60, 8)])
def test_delayed_scaling_refilled_check_holds_where_the_drawn_amax_failed_it(seed: int, refill_seed: int) -> None:
    """With x's own amax, seed 44 (refill 5) had a history 1.30x the refilled tensor's amax and seed
    60 (refill 8) 0.78x: the scale or the codes then differ by more than rel L2 0.25, on correct
    code. With x's amax pinned, the same refills pass."""
    with pytest.raises(VerificationError, match="relative L2"):
        refilled_delayed_check(seed, refill_seed, pinned=False)
    refilled_delayed_check(seed, refill_seed, pinned=True)


@pytest.mark.parametrize(("ratio", "passes"), [(0.75, False), (0.82, True), (1.2, True), (1.33, False)])
def test_delayed_scaling_tolerance_holds_a_history_within_its_window(ratio: float, passes: bool) -> None:
    """The window lag_false_alarm assumes: a history amax from 0.8x to 1.25x the tensor's passes rel
    L2 0.25; a scale off by a quarter or more (a stale or wrong history) fails."""
    base, opt = build("baseline_fp8_delayed_scaling", 0), build("optimized_fp8_delayed_scaling", 0)
    base.setup()
    opt.setup()
    opt.history["x"].mul_(ratio)
    if passes:
        compare(guarded(base), guarded(opt), base.workload)
    else:
        with pytest.raises(VerificationError, match="relative L2"):
            compare(guarded(base), guarded(opt), base.workload)


def test_pinned_amax_makes_a_refill_failure_rare_at_full_size() -> None:
    """amax_cdf against sampled maxima; at the pair's size the pinned amax leaves a refilled call
    failing about 3e-8 of runs, where x's drawn amax at its 1% quantile (5.52) failed > 1e-4."""
    mod = load("baseline_fp8_delayed_scaling")
    maxima = torch.randn(2000, 4096, generator=torch.Generator().manual_seed(0)).abs().amax(1)
    for m in (3.6, 3.9, 4.2, 4.6):
        assert float((maxima <= m).float().mean()) == pytest.approx(mod.amax_cdf(m, 4096), abs=0.03)
    w = mod.WORKLOAD
    n, r = w.rows * w.cols, w.max_rel_l2
    pin = mod.pinned_amax(n, r)
    assert pin == float(torch.tensor(pin).bfloat16()) and 6 < pin < 7
    assert mod.lag_false_alarm(pin, n, r) < 1e-7
    assert mod.lag_false_alarm(5.52, n, r) > 1e-4


@pytest.mark.parametrize("optimized", ["optimized_low_precision_optimizer", "optimized_low_precision_optimizer_in_backward"])
def test_optimizer_step_that_skips_its_update_is_caught(optimized: str) -> None:
    """With lr = 0 the weights never move, so the second step's loss and the predictions differ from the
    baseline's: an update skipped (in backward, too) is caught."""
    ref, lazy = build("baseline_low_precision_optimizer", 0), build(optimized, 0)
    lazy.workload = dataclasses.replace(lazy.workload, lr=0.0)
    ref.setup()
    lazy.setup()
    with pytest.raises(VerificationError):
        compare(guarded(ref), guarded(lazy), ref.workload)


def test_optimizer_pair_headlines_memory_and_the_others_time() -> None:
    heads = {p: load(f"baseline_{p}").WORKLOAD.headline for p in PAIRS}
    assert heads == {p: "memory" if p == "low_precision_optimizer" else "time" for p in PAIRS}


@pytest.mark.parametrize("pair", PAIRS)
def test_gpu_pairs_skip_on_cpu_with_reason(pair: str) -> None:
    reason = unmet_requirements(load(f"baseline_{pair}").WORKLOAD.requires, torch.device("cpu"))
    assert reason and "CUDA" in reason


@pytest.mark.parametrize("path", sorted(CH19.glob("*line*_*.py")) + sorted(CH19.glob("optimized_*.py")),
                         ids=lambda p: p.stem)
def test_pair_file_documents_itself(path: Path) -> None:
    tree = ast.parse(path.read_text())
    doc = ast.get_docstring(tree) or ""
    for line in ("Baseline", "Optimized", "Expect", "Run:"):
        assert line in doc, f"{path.name} docstring lacks '{line}'"
    if path.stem.startswith("baseline_"):
        assert "Tolerance:" in doc or "Headline" in doc, f"{path.name} does not justify its tolerance"
    assert len(path.read_text().splitlines()) < 150
    assert "get_benchmark" in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


def test_moe_routes_every_token_to_top_k_experts_in_expert_order() -> None:
    moe = load("baseline_fp8_moe")
    x, router = torch.randn(64, 32), torch.randn(4, 32)
    token, gate, counts = moe.route(x, router, 2)
    assert sum(counts) == 128 and torch.equal(token.bincount(minlength=64), torch.full((64,), 2))
    top2 = (x @ router.t()).softmax(-1).topk(2, dim=-1).values.sum(-1)
    assert torch.allclose(torch.zeros(64).index_add_(0, token, gate), top2)
    experts = (x @ router.t()).topk(2, dim=-1).indices.flatten()
    assert torch.equal(experts[torch.argsort(experts, stable=True)],
                       torch.repeat_interleave(torch.arange(4), torch.tensor(counts)))


def test_moe_expert_gemms_get_16_aligned_groups_and_scale_pointers(monkeypatch: pytest.MonkeyPatch) -> None:
    """cuBLASLt rejected a row-wise scale slice starting at row 1033 (not 16-byte aligned) on the H200:
    every fp8 GEMM must see a group of 16k rows whose operand and scale pointers are 16-byte aligned."""
    bench = build("optimized_fp8_moe", 0)
    bench.setup()
    counts = route_counts(bench)
    assert any(c % 16 for c in counts), "sizes chosen so that some group needs padding"
    seen, real = [], torch._scaled_mm

    def checked(a: torch.Tensor, b: torch.Tensor, **kw: torch.Tensor) -> torch.Tensor:
        seen.append((a.shape[0], a.data_ptr() % 16, kw["scale_a"].data_ptr() % 16, kw["scale_b"].data_ptr() % 16))
        return real(a, b, **kw)

    monkeypatch.setattr(torch, "_scaled_mm", checked)
    guarded(bench)
    groups = load("optimized_fp8_moe").padded_layout(torch.zeros(sum(counts), dtype=torch.long),
                                                      torch.zeros(sum(counts)), counts)[2]
    assert sum(groups) == sum(counts) + 16 * len(counts) and len(seen) == 2 * sum(1 for g in groups if g)
    assert all(rows % 16 == 0 and a == s == w == 0 for rows, a, s, w in seen), seen


def route_counts(bench: aisp.Benchmark) -> list[int]:
    return load("baseline_fp8_moe").route(bench.x, bench.router, bench.workload.top_k)[2]


def test_the_optimizers_declared_resident_bytes_are_what_its_floor_tensors_hold() -> None:
    """low_precision_optimizer's floor, from the optimized variant set up and run at the real sizes: its
    fp32 master weights, its bf16 moments, the fp32 inputs and run()'s output."""
    bench = load("optimized_low_precision_optimizer").get_benchmark()
    out = floor.run_on_meta(bench)
    assert {t.dtype for t in bench.master} == {torch.float32} and {t.dtype for t in bench.moments} == {torch.bfloat16}
    counted = floor.held_bytes([*bench.master, *bench.moments, bench.x, bench.target, *out])
    assert bench.workload.resident_bytes == counted
    baseline = load("baseline_low_precision_optimizer").ResidualMLP(bench.workload, None, torch.device("meta"))
    assert floor.held_bytes(baseline.parameters()) == floor.held_bytes(bench.master), "the baseline keeps its weights in fp32 too"


def test_the_optimizers_resident_bytes_are_below_its_stored_peaks() -> None:
    workload = load("baseline_low_precision_optimizer").WORKLOAD
    peaks = floor.stored_peaks(CH19, "low_precision_optimizer")
    assert set(peaks) == {"baseline_peak_bytes", "optimized_peak_bytes"}
    assert all(floor.capacity_percent(workload, peak) < 100 for peak in peaks.values()), peaks


def test_the_optimizers_resident_bytes_are_below_the_book_runs_peaks() -> None:
    """The whole-book run's optimized side failed verification and measured no peak: the baseline's."""
    peaks = floor.book_run_memory("ch19:low_precision_optimizer")
    if not peaks:
        pytest.skip("the whole-book run of 2026-11-28 is not on this machine")
    workload = load("baseline_low_precision_optimizer").WORKLOAD
    assert all(floor.capacity_percent(workload, peak) < 100 for peak in peaks.values()), peaks


def test_the_optimizers_setup_bytes_are_its_counted_state() -> None:
    """Its ceiling_note's figures: the whole-book run measured, to the byte, what the optimized variant
    holds after setup at the real sizes: bf16 weights and gradients, fp32 master and snapshot, bf16
    moments and the fp32 inputs."""
    measured = floor.book_run_memory("ch19:low_precision_optimizer", "setup_bytes")
    if not measured:
        pytest.skip("the whole-book run of 2026-11-28 is not on this machine")
    bench = floor.set_up_on_meta(load("optimized_low_precision_optimizer").get_benchmark())
    grads = [p.grad for p in bench.params]
    counted = floor.held_bytes([*bench.params, *grads, *bench.master, *bench.start, *bench.moments, bench.x, bench.target])
    assert floor.setup_held_bytes(bench) == counted == measured["optimized_low_precision_optimizer"]


def test_the_in_backward_optimizer_holds_no_gradient_and_no_snapshot_beside_its_masters() -> None:
    """The update-in-backward variant leaves no .grad on its masters after a call (each gradient was
    applied and dropped in backward), keeps no bf16 weight copies, and holds its start snapshot apart
    from the masters (on a GPU in pinned host memory): the masters move, the snapshot does not."""
    bench = build("optimized_low_precision_optimizer_in_backward", 0)
    bench.setup()
    before = [s.clone() for s in bench.start]
    bench.run()
    assert all(m.grad is None for m in bench.master)
    assert not any(isinstance(v, torch.nn.Module) for v in vars(bench).values())
    assert all(torch.equal(s, b) for s, b in zip(bench.start, before, strict=True))
    assert not any(torch.equal(m.detach(), s) for m, s in zip(bench.master, bench.start, strict=True))
    assert all(s.data_ptr() != m.data_ptr() for m, s in zip(bench.master, bench.start, strict=True))


def test_the_in_backward_optimizers_setup_holds_only_the_floor_state() -> None:
    """What the update-in-backward variant keeps on the device after setup, counted at the real sizes: its
    fp32 masters, bf16 moments and the fp32 inputs, nothing else (2,164,260,864 bytes: the setup_bytes an
    H200 run measured on 2026-12-01, ch19 README). The snapshot is on the host there (pinned), a copy of
    the masters here on the meta device, so it is taken out of the count."""
    bench = floor.set_up_on_meta(load("optimized_low_precision_optimizer_in_backward").get_benchmark())
    counted = floor.held_bytes([*bench.master, *bench.moments, bench.x, bench.target])
    assert floor.setup_held_bytes(bench) - floor.held_bytes(bench.start) == counted == 2_164_260_864
