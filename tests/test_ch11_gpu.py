"""Chapter 11 on a CUDA GPU: the CUDA C++ entry points match PyTorch references, every pair's
optimized variant matches its baseline on refilled inputs, every multi-stream variant has joined
its side streams when the caller's stream is done, and the overlap figures are sane."""

from __future__ import annotations

import math
from pathlib import Path
from types import ModuleType

import pytest
import torch
from refill_check import check_refilled_pair
from test_ch11_pairs import variant_files

import aisp
from aisp.harness.loader import import_module_at
from aisp.kits import native

pytestmark = pytest.mark.gpu
CH11 = Path(__file__).resolve().parents[1] / "ch11"
SIDE_STREAMS = {"optimized_bidirectional_copy": "d2h_stream", "optimized_concurrent_kernels": "streams",
                "optimized_event_dependencies": ("producer", "consumer"),
                "optimized_stream_priority": "chain_stream", "optimized_stream_priority_pdl": "chain_stream",
                "optimized_stream_priority_green": ("chain_stream", "bulk_stream"),
                "optimized_stream_priority_green_unrolled": ("chain_stream", "bulk_stream")}
"""Each multi-stream Python variant and the attributes holding its side streams."""


def load(module: str) -> ModuleType:
    return import_module_at(CH11 / f"{module}.py")


def build(module: str, seed: int = 0) -> aisp.Benchmark:
    bench = load(module).get_benchmark()
    bench.device, bench.seed = torch.device("cuda"), seed
    return bench


def test_small_kernel_matches_its_closed_form() -> None:
    common = load("ch11_common")
    lib = common.load_kernels(torch.device("cuda"))
    x = torch.randn(3000, device="cuda")
    out = torch.empty_like(x)
    common.small_kernel(lib, x, out, 20_000, torch.cuda.current_stream())
    torch.testing.assert_close(out.double(), common.fma_chain_reference(x, 20_000), atol=2e-3, rtol=0)


@pytest.mark.parametrize(("n", "iters", "threads"), [(3000, 20_000, 256), (2048, 15_000, 128), (4100, 64, 128),
                                                     (100, 63, 32), (33, 0, 1024), (1, 129, 64)])
def test_unrolled_kernel_matches_the_plain_one_bit_for_bit(n: int, iters: int, threads: int) -> None:
    """small_kernel_unrolled (64 FMAs a trip, then the rest; any block size; a tail block) gives the plain
    loop's output exactly: the same FMAs in the same order. The output is poisoned first."""
    common = load("ch11_common")
    lib = common.load_kernels(torch.device("cuda"))
    stream = torch.cuda.current_stream()
    x = torch.randn(n, device="cuda")
    want, got = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
    common.small_kernel(lib, x, want, iters, stream)
    common.small_kernel_unrolled(lib, x, got, iters, stream, threads=threads)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    if iters:
        torch.testing.assert_close(got.double(), common.fma_chain_reference(x, iters), atol=2e-3, rtol=0)


def test_unrolled_kernel_rejects_a_bad_block_size() -> None:
    common = load("ch11_common")
    lib = common.load_kernels(torch.device("cuda"))
    x = torch.randn(256, device="cuda")
    for threads in (0, 48, 2048):
        with pytest.raises(RuntimeError):
            common.small_kernel_unrolled(lib, x, torch.empty_like(x), 10, torch.cuda.current_stream(), threads=threads)


@pytest.mark.parametrize("unrolled", [False, True])
def test_pdl_chain_keeps_its_order(unrolled: bool) -> None:
    """Kernels launched with PDL, each reading the one before's output, on a busy stream: the chain
    equals one chain of all their FMAs (a kernel that read before its predecessor finished would not)."""
    common = load("ch11_common")
    lib = common.load_kernels(torch.device("cuda"))
    stream = torch.cuda.Stream()
    x = torch.randn(2048, device="cuda")
    bufs = [torch.empty_like(x), torch.empty_like(x)]
    src, steps, iters = x, 24, 3_000
    with torch.cuda.stream(stream):
        torch.cuda._sleep(1_000_000)  # the launches queue up behind it, so PDL has kernels to overlap
        for i in range(steps):
            if unrolled:
                common.small_kernel_unrolled(lib, src, bufs[i % 2], iters, stream, pdl=True, threads=128)
            else:
                common.small_kernel(lib, src, bufs[i % 2], iters, stream, pdl=True)
            src = bufs[i % 2]
    stream.synchronize()
    torch.testing.assert_close(src.double(), common.fma_chain_reference(x, steps * iters), atol=2e-3, rtol=0)


@pytest.mark.parametrize("module", ["baseline_legacy_default_stream", "optimized_legacy_default_stream",
                                    "optimized_legacy_default_stream_per_thread",
                                    "optimized_legacy_default_stream_pdl"])
def test_legacy_run_computes_every_job(module: str) -> None:
    bench = build(module)
    bench.setup()
    out = bench.run().clone()
    ref = load("ch11_common").fma_chain_reference(bench.x, bench.workload.iters)
    torch.testing.assert_close(out.double(), ref, atol=2e-3, rtol=0)


@pytest.mark.parametrize("module", ["baseline_stream_ordered_allocator", "optimized_stream_ordered_allocator"])
def test_alloc_run_matches_torch(module: str) -> None:
    bench = build(module)
    bench.setup()
    out = bench.run().clone()
    torch.testing.assert_close(out, (2 * bench.x + 1) ** 2 - bench.x, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("module", ["optimized_concurrent_kernels_batched", "optimized_concurrent_kernels_batched_unrolled"])
def test_batched_kernels_match_the_sixteen_launches_bit_for_bit(module: str) -> None:
    """concurrent_kernels' one 128-block launch (plain or unrolled loop) gives each element the baseline's
    chain exactly, and the closed form; scratch is poisoned first so an element left unwritten shows."""
    base, batched = build("baseline_concurrent_kernels"), build(module)
    base.setup()
    batched.setup()
    torch.testing.assert_close(batched.x, base.x, rtol=0, atol=0)
    batched.out.fill_(float("nan"))
    want, got = base.run().clone(), batched.run().clone()
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    ref = load("ch11_common").fma_chain_reference(batched.x, batched.workload.iters)
    torch.testing.assert_close(got.double(), ref, atol=2e-3, rtol=0)


@pytest.mark.parametrize(("baseline", "optimized"), variant_files())
def test_pair_matches_on_refilled_inputs(baseline: str, optimized: str) -> None:
    check_refilled_pair(build(baseline), build(optimized), load(baseline).WORKLOAD)


def side_streams(bench: aisp.Benchmark, names: str | tuple[str, ...]) -> list[torch.cuda.Stream]:
    found = []
    for name in (names,) if isinstance(names, str) else names:
        value = getattr(bench, name)
        found += value if isinstance(value, list) else [value]
    return found


@pytest.mark.parametrize("module", sorted(SIDE_STREAMS))
def test_side_streams_are_joined_to_the_callers_stream(module: str) -> None:
    bench = build(module)
    bench.setup()
    torch.cuda.synchronize()
    bench.run()
    done = torch.cuda.Event()
    done.record()
    done.synchronize()
    assert all(s.query() for s in side_streams(bench, SIDE_STREAMS[module]))


def test_high_priority_stream_is_higher_than_the_default() -> None:
    low, high = build("baseline_stream_priority"), build("optimized_stream_priority")
    low.setup()
    high.setup()
    assert high.chain_stream.priority < low.chain_stream.priority == 0


@pytest.mark.parametrize("module", ["optimized_bidirectional_copy", "optimized_stream_priority",
                                    "optimized_stream_priority_green", "optimized_stream_priority_green_unrolled"])
def test_overlap_metrics_are_sane(module: str) -> None:
    bench = build(module)
    bench.setup()
    bench.run()
    got = bench.metrics()
    assert got["max_of_parts_ms"] < got["sum_of_parts_ms"]
    assert got["measured_ms"] > 0 and not math.isnan(got["overlap_share"])


def test_stream_priority_reports_the_chain_latency() -> None:
    bench = build("optimized_stream_priority")
    bench.setup()
    bench.run()
    got = bench.metrics()
    assert 0 < got["chain_latency_ms"] <= got["measured_ms"] * 1.5
    assert got["chain_alone_ms"] > 0 and got["bulk_alone_ms"] > 0


def test_green_partition_splits_the_sms_and_keeps_its_streams() -> None:
    """The chain's green context gets at least the SMs asked for, the bulk's the rest (disjoint: the
    two add up to at most the GPU's); a second setup returns the same streams; the chain's span inside
    a call is read from its own context's events."""
    bench = build("optimized_stream_priority_green")
    bench.setup()
    chain_sms, bulk_sms = bench.sms
    total = torch.cuda.get_device_properties(bench.device).multi_processor_count
    assert chain_sms >= bench.chain_sms and bulk_sms > 0 and chain_sms + bulk_sms <= total
    again = build("optimized_stream_priority_green")
    again.setup()
    assert again.chain_stream.cuda_stream == bench.chain_stream.cuda_stream
    assert again.bulk_stream.cuda_stream == bench.bulk_stream.cuda_stream
    bench.run()
    torch.cuda.synchronize()
    assert 0 < bench.chain_latency_ms() < 100


@pytest.mark.parametrize("module", ["optimized_stream_priority_green", "optimized_stream_priority_green_unrolled"])
def test_green_chain_matches_the_closed_form(module: str) -> None:
    """The chain on the green stream (PDL launches on a stream of another context; plain or unrolled
    loop, 8 blocks of 256 or 16 of 128) gives the baseline's chain bit for bit and the 64-kernel chain's
    closed form, and the bulk the baseline's passes."""
    base = build("baseline_stream_priority")
    base.setup()
    _, want = base.run()
    want = want.clone()
    bench = build(module)
    bench.setup()
    bulk, chain = bench.run()
    torch.cuda.synchronize()
    w = bench.workload
    torch.testing.assert_close(bench.h0, base.h0, rtol=0, atol=0)
    torch.testing.assert_close(chain, want, rtol=0, atol=0)
    ref = load("ch11_common").fma_chain_reference(bench.h0, w.chain_steps * w.chain_iters)
    torch.testing.assert_close(chain.double(), ref, atol=2e-3, rtol=0)
    expected = bench.bulk_in.clone()
    for _ in range(w.bulk_passes):
        expected = expected * 0.9
    torch.testing.assert_close(bulk, expected, rtol=0, atol=0)


def test_native_requirements_hold_here() -> None:
    assert native.unavailable() is None
