"""Chapter 11 pairs on the CPU: every variant documents itself, shares its baseline's workload and
skips with a reason (streams need a GPU); the overlap figures are computed as the README says."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
import torch
from conftest import variant_modules

import aisp
from aisp.harness.benchmark import unmet_requirements
from aisp.harness.discovery import pairs_in
from aisp.harness.loader import import_module_at

CH11 = Path(__file__).resolve().parents[1] / "ch11"
PAIRS = ("bidirectional_copy", "concurrent_kernels", "event_dependencies", "legacy_default_stream",
         "stream_ordered_allocator", "stream_priority")


def load(module: str) -> ModuleType:
    return import_module_at(CH11 / f"{module}.py")


def variant_files() -> list[tuple[str, str]]:
    """(baseline module, optimized module) for every optimized file in ch11."""
    return variant_modules(CH11)


def test_the_harness_discovers_the_six_pairs() -> None:
    assert sorted(p.name for p in pairs_in(CH11)) == sorted(PAIRS)


@pytest.mark.parametrize(("baseline", "optimized"), variant_files())
def test_variant_shares_its_baselines_workload_and_skips_on_cpu(baseline: str, optimized: str) -> None:
    bench = load(optimized).get_benchmark()
    assert isinstance(bench, aisp.Benchmark)
    assert bench.workload is load(baseline).WORKLOAD
    assert bench.inputs == load(baseline).get_benchmark().inputs and bench.inputs
    reason = unmet_requirements(bench.workload.requires, torch.device("cpu"))
    assert reason and "CUDA" in reason


@pytest.mark.parametrize("module", sorted({m for p in variant_files() for m in p}))
def test_pair_file_documents_itself(module: str) -> None:
    doc = load(module).__doc__ or ""
    for line in ("Baseline", "Optimized", "Expect:", "Run:"):
        assert line in doc, f"{module} docstring lacks '{line}'"
    assert len((CH11 / f"{module}.py").read_text().splitlines()) < 150


def common() -> ModuleType:
    return load("ch11_common")


@pytest.mark.parametrize(("sum_ms", "max_ms", "measured", "share"),
                         [(10.0, 6.0, 10.0, 0.0), (10.0, 6.0, 6.0, 1.0), (10.0, 6.0, 8.0, 0.5),
                          (16.0, 2.0, 3.0, 13 / 14)])
def test_overlap_share_places_a_call_between_serial_and_ideal(sum_ms, max_ms, measured, share) -> None:
    assert common().overlap_share(sum_ms, max_ms, measured) == pytest.approx(share)


def test_overlap_share_of_a_single_part_is_undefined() -> None:
    assert math.isnan(common().overlap_share(5.0, 5.0, 5.0))


def test_overlap_times_each_part_alone_and_the_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    mod = common()
    recorded = {"h2d": 2.4, "d2h": 2.6, "whole": 2.9}
    monkeypatch.setattr(mod, "milliseconds", lambda fn, device: recorded[fn()])
    got = mod.overlap({"h2d": lambda: "h2d", "d2h": lambda: "d2h"}, lambda: "whole", torch.device("cpu"))
    assert got["h2d_ms"] == 2.4 and got["d2h_ms"] == 2.6
    assert got["sum_of_parts_ms"] == pytest.approx(5.0) and got["max_of_parts_ms"] == 2.6
    assert got["measured_ms"] == 2.9 and got["overlap_share"] == pytest.approx(2.1 / 2.4)


def test_fma_chain_reference_converges_to_one() -> None:
    x = torch.tensor([0.0, 1.0, 3.0])
    ref = common().fma_chain_reference(x, 0)
    assert torch.equal(ref, x.double())
    far = common().fma_chain_reference(x, 200_000)
    assert torch.allclose(far, torch.ones(3, dtype=torch.float64), atol=1e-3)


def test_fma_chain_reference_matches_the_loop_in_float32() -> None:
    x = torch.randn(64, generator=torch.Generator().manual_seed(0))
    v = x.clone()
    for _ in range(2000):
        v = torch.addcmul(torch.full_like(v, 1e-4), v, torch.full_like(v, 0.9999))
    torch.testing.assert_close(v.double(), common().fma_chain_reference(x, 2000), atol=1e-5, rtol=0)


def test_stream_pairs_use_their_stated_priorities() -> None:
    assert load("baseline_stream_priority").EqualPriority.priority == 0
    assert load("optimized_stream_priority").HighPriority.priority < 0
    pdl = load("optimized_stream_priority_pdl").get_benchmark()
    assert pdl.priority < 0 and pdl.pdl and not load("optimized_stream_priority").get_benchmark().pdl
    green = load("optimized_stream_priority_green").get_benchmark()
    assert green.priority == pdl.priority and green.pdl
    # sm_90's green-context partitions: at least 8 SMs, a multiple of 8, and room left for the bulk
    assert green.chain_sms >= 8 and green.chain_sms % 8 == 0 and green.chain_sms < H200_SMS // 2


def test_green_variant_keeps_the_pdl_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    """The green variant launches the same 64 dependent kernels as the PDL variant, each with PDL."""
    mod = load("baseline_stream_priority")
    launched: list[bool] = []
    monkeypatch.setattr(mod, "small_kernel", lambda lib, src, dst, iters, stream, pdl: launched.append(pdl))
    bench = load("optimized_stream_priority_green").get_benchmark()
    bench.lib, bench.h0, bench.chain_bufs = None, torch.zeros(4), [torch.zeros(4), torch.zeros(4)]
    bench.chain(None)
    assert launched == [True] * mod.WORKLOAD.chain_steps


def test_native_variants_differ_only_in_mode() -> None:
    modes = {load(m).get_benchmark().mode for m in ("baseline_legacy_default_stream", "optimized_legacy_default_stream",
                                                    "optimized_legacy_default_stream_per_thread",
                                                    "optimized_legacy_default_stream_pdl")}
    assert modes == {0, 1, 2, 3}
    assert {load(m).get_benchmark().mode for m in ("baseline_stream_ordered_allocator",
                                                   "optimized_stream_ordered_allocator")} == {0, 1}


H200_SMS = 132


def test_dependent_fmas_are_the_longest_chain_of_kernels_times_their_fmas() -> None:
    """Recounted from each workload's fields: concurrent_kernels' 16 independent kernels fit the GPU at
    once (one block an SM), so its chain is one kernel's; a legacy_default_stream job's kernels run in
    its stream's order, the 3 jobs side by side; stream_priority's chain kernels each read the one
    before's output. Each kernel's thread runs its ``iters`` dependent FMAs."""
    kernels = load("baseline_concurrent_kernels").WORKLOAD
    assert kernels.kernels * kernels.blocks <= H200_SMS
    assert kernels.latency.dependent_fmas == kernels.iters == 20_000
    legacy = load("baseline_legacy_default_stream").WORKLOAD
    assert legacy.latency.dependent_fmas == legacy.steps * legacy.iters == 32 * 10_000
    priority = load("baseline_stream_priority").WORKLOAD
    assert priority.latency.dependent_fmas == priority.chain_steps * priority.chain_iters == 64 * 15_000
    for w in (kernels, legacy, priority):
        assert w.flops > 0  # the FLOPs stay declared: the ceiling is the tightest bound


def test_each_chain_kernel_reads_the_one_befores_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """stream_priority's chain is one dependent chain: kernel i's input is kernel i - 1's output."""
    mod = load("baseline_stream_priority")
    launched: list[tuple[torch.Tensor, torch.Tensor]] = []
    monkeypatch.setattr(mod, "small_kernel", lambda lib, src, dst, iters, stream, pdl: launched.append((src, dst)))
    bench = mod.get_benchmark()
    bench.lib, bench.h0, bench.chain_bufs = None, torch.zeros(4), [torch.zeros(4), torch.zeros(4)]
    bench.chain(None)
    assert len(launched) == mod.WORKLOAD.chain_steps and launched[0][0] is bench.h0
    assert all(src is before_dst for (_, before_dst), (src, _) in zip(launched, launched[1:], strict=False))


def test_batched_launch_covers_the_sixteen_kernels_elements(monkeypatch: pytest.MonkeyPatch) -> None:
    """concurrent_kernels' batched variant: one launch over x and out whole, whose elements are exactly
    those of the baseline's 16 row launches (same input and output addresses), in one round of blocks."""
    base_mod, batched_mod = load("baseline_concurrent_kernels"), load("optimized_concurrent_kernels_batched")
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: None)
    spans: dict[str, list[tuple[int, int, int]]] = {"baseline": [], "batched": []}

    def recorder(key: str) -> Callable[..., None]:
        return lambda lib, src, dst, iters, stream: spans[key].append((src.data_ptr(), dst.data_ptr(), src.numel()))

    monkeypatch.setattr(base_mod, "small_kernel", recorder("baseline"))
    monkeypatch.setattr(batched_mod, "small_kernel", recorder("batched"))
    w = base_mod.WORKLOAD
    x = torch.randn(w.kernels, w.blocks * base_mod.THREADS)
    out = torch.empty_like(x)
    for mod in (base_mod, batched_mod):
        bench = mod.get_benchmark()
        bench.lib, bench.x, bench.out = None, x, out
        assert bench.run() is out
    ((src, dst, n),) = spans["batched"]
    assert (src, dst, n) == (x.data_ptr(), out.data_ptr(), x.numel())
    size = x.element_size()
    covered = sorted((s, d, m) for s, d, m in spans["baseline"])
    assert len(covered) == w.kernels
    assert all(s - src == d - dst == k * m * size for k, (s, d, m) in enumerate(covered))
    assert sum(m for _, _, m in covered) == n
    assert n // base_mod.THREADS == w.kernels * w.blocks <= H200_SMS  # one block an SM: one round


def test_unrolled_loops_a_is_the_plain_loops_constant() -> None:
    """ch11_kernels.cu's kABits, the unrolled loop's a, is 0.9999f's bits (the plain loop's immediate), so
    both loops run the same FMAs; threadIdx.x < 1024 never sets the bit OR-ed in."""
    import re
    import struct

    source = (CH11 / "ch11_kernels.cu").read_text()
    bits = int(re.search(r"kABits = (0x[0-9a-f]+)u;", source).group(1), 16)
    assert bits == struct.unpack("<I", struct.pack("<f", 0.9999))[0]
    assert "kABits | (threadIdx.x & 0x80000000u)" in source


def test_green_unrolled_variant_is_the_green_chain_in_blocks_of_128(monkeypatch: pytest.MonkeyPatch) -> None:
    """The green-unrolled variant launches the green variant's 64 dependent PDL kernels (each reading the
    one before's output) through small_kernel_unrolled, 16 blocks of 128: one an SM of its 16."""
    mod = load("optimized_stream_priority_green_unrolled")
    launched: list[tuple[torch.Tensor, torch.Tensor, int, bool, int]] = []

    def record(lib, src, dst, iters, stream, pdl, threads) -> None:  # noqa: ANN001
        launched.append((src, dst, iters, pdl, threads))

    monkeypatch.setattr(mod, "small_kernel_unrolled", record)
    bench = mod.get_benchmark()
    w = bench.workload
    bench.lib, bench.h0 = None, torch.zeros(w.chain_blocks * common().THREADS)
    bench.chain_bufs = [torch.zeros_like(bench.h0), torch.zeros_like(bench.h0)]
    assert bench.chain(None) is launched[-1][1]
    assert len(launched) == w.chain_steps and launched[0][0] is bench.h0
    assert all(src is before[1] for before, (src, *_) in zip(launched, launched[1:], strict=False))
    assert {(iters, pdl, threads) for _, _, iters, pdl, threads in launched} == {(w.chain_iters, True, 128)}
    green = load("optimized_stream_priority_green").get_benchmark()
    assert bench.priority == green.priority and bench.chain_sms == green.chain_sms  # the same partition
    assert bench.h0.numel() // bench.chain_threads == bench.chain_sms and bench.chain_threads % 32 == 0


def test_batched_unrolled_variant_is_one_launch_over_the_whole_tensor(monkeypatch: pytest.MonkeyPatch) -> None:
    """concurrent_kernels' batched-unrolled variant: one small_kernel_unrolled launch over x and out
    whole, no PDL, blocks of 256 (128 blocks, one an SM, as the batched variant)."""
    mod = load("optimized_concurrent_kernels_batched_unrolled")
    launched: list[tuple[int, int, int, int, bool, int]] = []

    def record(lib, src, dst, iters, stream, pdl, threads) -> None:  # noqa: ANN001
        launched.append((src.data_ptr(), dst.data_ptr(), src.numel(), iters, pdl, threads))

    monkeypatch.setattr(mod, "small_kernel_unrolled", record)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: None)
    bench = mod.get_benchmark()
    w = bench.workload
    bench.lib, bench.x = None, torch.randn(w.kernels, w.blocks * common().THREADS)
    bench.out = torch.empty_like(bench.x)
    assert bench.run() is bench.out
    assert launched == [(bench.x.data_ptr(), bench.out.data_ptr(), bench.x.numel(), w.iters, False, 256)]
