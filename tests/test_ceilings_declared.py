"""The twelve pairs that had no ceiling (issue 30) now declare one, or say why none can be measured
(ch05:packed_shards, page-cache bytes since aisp peak measures that rate: tests/test_host_ceilings.py).

Each pair's workload is loaded on the CPU through the loader (a file that imports a package this
machine lacks is read from its source, as tests/test_ceiling_notes.py does); a bound of each kind
is recomputed from a synthetic peaks document and compared with the lower bound worked out by
hand from the pair's sizes; the data-dependent counts (passes of the WHILE loop, levels of the
refinement) are held against the references both variants run."""

from __future__ import annotations

import ast
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
import resident_floor
import torch
from conftest import REPO
from test_ch12_pairs import simpson_levels

from aisp.harness.execute import workload_dict
from aisp.harness.loader import import_module_at, load_benchmark
from aisp.report.ceilings import bounds, ceiling

DECLARED = ("ch04:gradient_bucketing_multigpu", "ch04:gradient_compression_multigpu", "ch04:zero_sharding_multigpu",
            "ch05:async_checkpoint", "ch12:conditional_while", "ch12:device_graph_launch",
            "ch12:dynamic_parallelism", "ch13:expert_parallel_multigpu", "ch15:kv_transfer_multigpu")
NO_CEILING = {
    "ch05:gpu_jpeg_decode": "nvJPEG's decode: aisp peak measures no JPEG decode rate",
    "ch13:regional_compile": "host-side compile (Dynamo, AOTAutograd, Inductor): no compile rate in aisp peak",
}
"""Pairs left without a ceiling on purpose, and why: their work has no measured peak (README, Ceilings)."""


def baseline_path(target: str) -> Path:
    chapter, pair = target.split(":")
    return REPO / chapter / f"baseline_{pair}.py"


def workload_of(target: str) -> dict[str, Any] | None:
    """The pair's workload as a run's result holds it; None where its import needs a missing package."""
    try:
        return workload_dict(load_benchmark(baseline_path(target)).workload)
    except ModuleNotFoundError as missing:
        if importlib.util.find_spec(missing.name or "") is not None:
            raise
        return None


def source_declares_a_bound(path: Path) -> bool:
    """Whether the source passes ``flops=``, ``bytes=`` or ``latency=`` to anything."""
    return any(isinstance(node, ast.keyword) and node.arg in ("flops", "bytes", "latency")
               for node in ast.walk(ast.parse(path.read_text())))


def declares_a_bound(workload: dict[str, Any]) -> bool:
    return float(workload.get("flops") or 0) > 0 or float(workload.get("bytes") or 0) > 0 \
        or any((workload.get("latency") or {}).values())


def synthetic_peaks(gpus: int = 1) -> dict[str, Any]:
    """Round figures: matmul 50 TFLOP/s (fp32) and 500 (bf16), HBM 4,000 GB/s, peer copy 400 GB/s, and
    latency floors of 5 us a launch, 4 a graph launch, 0.5 a node, 10 a tail launch from the GPU, 3 a graph
    launch from the GPU and 4.5 a pass of a WHILE node."""
    measured = {"matmul_fp32": 50.0, "matmul_bf16": 500.0, "memory_copy": 4000.0, "p2p_copy": 400.0}
    floors = {"launch_eager": 5.0, "launch_graph": 4.0, "launch_graph_node": 0.5, "launch_device_tail": 10.0,
              "launch_device_graph": 3.0, "graph_while_iteration": 4.5}
    return {"measurements": {k: {"value": v} for k, v in measured.items()},
            "latency": {k: {"value": v} for k, v in floors.items()},
            "provenance": {"hardware_key": "h200" if gpus == 1 else f"{gpus}x_h200"}}


def ceiling_ms(workload: dict[str, Any], peaks: dict[str, Any]) -> float:
    found = ceiling({"summary": {"median": 1.0}}, workload, peaks)
    assert found is not None, "no ceiling computed"
    return found["time_ms"]


@pytest.mark.parametrize("target", DECLARED)
def test_the_pair_declares_a_bound(target):
    workload = workload_of(target)
    if workload is None:
        assert source_declares_a_bound(baseline_path(target)), f"{target}: no flops=, bytes= or latency= in its source"
        return
    assert declares_a_bound(workload), f"{target} declares no FLOPs, bytes or latency counts"


@pytest.mark.parametrize("target", sorted(NO_CEILING))
def test_a_pair_without_a_ceiling_says_why(target):
    workload = workload_of(target)
    if workload is None:
        assert not source_declares_a_bound(baseline_path(target))
        return
    assert not declares_a_bound(workload), f"{target} declares a bound: move it to DECLARED"
    assert workload["ceiling_note"].startswith("no ceiling: "), f"{target}: its ceiling_note must give the reason"


@pytest.mark.parametrize("target", DECLARED)
def test_the_committed_peaks_price_every_declared_bound(target):
    """A count the peaks of the pair's GPUs lack would leave it without a ceiling (the 2-GPU peaks
    have no latency floors yet: the multi-GPU pairs declare bytes only)."""
    workload = workload_of(target)
    if workload is None:
        pytest.skip(f"{target} cannot be imported here")
    gpus = max(workload["requires"]["gpus"], workload["requires"]["ranks"], 1)
    peaks = json.loads((REPO / "peaks" / ("peak_h200.json" if gpus == 1 else f"peak_{gpus}x_h200.json")).read_text())
    assert bounds(workload, peaks), f"{target}: no bound priced by the committed peaks"


def test_an_all_reduce_is_priced_at_its_senders_bytes_over_both_gpus():
    """gradient_bucketing: 12 layers of 12 d^2 + 13 d fp32 values (d = 768), all-reduced over 2 ranks:
    2(N-1) x S bytes sent in all, at 2 x the peer-copy rate."""
    values = 12 * (12 * 768**2 + 13 * 768)
    assert values == 85_054_464
    expected_ms = 2 * 4 * values / (2 * 400e9) * 1e3
    assert ceiling_ms(workload_of("ch04:gradient_bucketing_multigpu"), synthetic_peaks(2)) == pytest.approx(expected_ms)


def test_a_one_way_send_is_its_bytes_over_the_senders_links():
    """kv_transfer: 16 requests x 2,048 tokens x 8 KiB live on the sender and cross once: held to one GPU's
    peer copy (nvlink_one_way), while the same bytes over plain nvlink are held to both GPUs' at once."""
    expected_ms = 16 * 2048 * 8192 / 400e9 * 1e3
    workload = workload_of("ch15:kv_transfer_multigpu")
    assert ceiling_ms(workload, synthetic_peaks(2)) == pytest.approx(expected_ms)
    assert ceiling_ms({**workload, "link": "nvlink"}, synthetic_peaks(2)) == pytest.approx(expected_ms / 2)


def test_the_training_steps_are_priced_at_the_fp32_peak():
    """async_checkpoint: 20 steps x 11 GEMMs (4 forward, 4 weight gradients, 3 input gradients) of
    2 x 4,096 x 2,048^2 FLOP; the checkpoint's disk write has no peak and is not priced."""
    expected_ms = 20 * 11 * 2 * 4096 * 2048**2 / 50e12 * 1e3
    found = ceiling({"summary": {"median": 1.0}}, workload_of("ch05:async_checkpoint"), synthetic_peaks())
    assert found["kind"] == "compute" and found["time_ms"] == pytest.approx(expected_ms)


@pytest.mark.parametrize(("target", "expected_us"), [
    ("ch12:conditional_while", 4.0 + 37 * 4.5 + (1 + 37) * 0.5),  # a graph launch; reset; 37 passes, 2 kernels each
    ("ch12:device_graph_launch", 4.0 + 64 * (3.0 + 2 * 0.5)),     # a graph launch; per request a path graph from the GPU
    ("ch12:dynamic_parallelism", 5.0 + 16 * 10.0),                # one host launch; 16 levels tail-launched on the GPU
])
def test_the_latency_chains_are_priced_at_their_floors(target, expected_us):
    found = ceiling({"summary": {"median": 1.0}}, workload_of(target), synthetic_peaks())
    assert found["kind"] == "latency" and found["time_ms"] * 1e3 == pytest.approx(expected_us)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_while_loop_runs_at_least_the_passes_its_ceiling_counts(seed):
    mod = import_module_at(REPO / "ch12" / "baseline_conditional_while.py")
    w = mod.WORKLOAD
    x = torch.randn(w.n, generator=torch.Generator().manual_seed(seed))
    assert mod.cos_fixed_point_reference(x, w.tol, w.max_iters)[1] >= mod.PASSES


@pytest.mark.parametrize("seed", [0, 1])
def test_the_refinement_runs_at_least_the_levels_its_ceiling_counts(seed):
    mod = import_module_at(REPO / "ch12" / "baseline_dynamic_parallelism.py")
    w = mod.WORKLOAD
    gen = torch.Generator().manual_seed(seed)
    u, v = torch.randn(w.cells, generator=gen), torch.randn(w.cells, generator=gen)
    assert len(simpson_levels(u, v, w.tol, w.max_levels)[1]) >= mod.LEVELS


def test_the_expert_exchange_counts_the_remote_tokens_there_and_back():
    """expert_parallel: half of each rank's 512 tokens are remote on average at 2 ranks; each crosses
    as 4,096 bf16 values twice."""
    expected_ms = 2 * (2 * 512 / 2) * 4096 * 2 / (2 * 400e9) * 1e3
    assert ceiling_ms(workload_of("ch13:expert_parallel_multigpu"), synthetic_peaks(2)) == pytest.approx(expected_ms)


def test_the_expert_exchange_counts_two_all_to_alls_once_their_floor_is_measured():
    """expert_parallel declares the 2 all-to-alls any design needs (dispatch, combine): left out while the
    peaks lack alltoall_latency (the NVLink bytes above bound it), then 2 x the floor, the tighter here."""
    workload = workload_of("ch13:expert_parallel_multigpu")
    assert workload["latency"]["all_to_alls"] == 2
    peaks = synthetic_peaks(2)
    without = ceiling({"summary": {"median": 1.0}}, workload, peaks)
    assert without["kind"] == "memory" and without["unpriced"] == ["all_to_alls"]
    peaks["latency"]["alltoall_latency"] = {"value": 20.0}
    priced = ceiling({"summary": {"median": 1.0}}, workload, peaks)
    assert priced["kind"] == "latency" and priced["time_ms"] == pytest.approx(2 * 20.0e-3)
    assert "unpriced" not in priced


# --- Capacity ceilings, session 43 (cap43b): ch04:pipeline_parallel_multigpu, ch15:paged_kv_cache. The
# declarations are recomputed in tests/test_ch04_pairs.py and tests/test_ch15_pairs.py; here each is
# held below what both variants' peaks measured in the committed whole-book H200 run (books/).


@pytest.mark.parametrize("target", ["ch04:pipeline_parallel_multigpu", "ch15:paged_kv_cache"])
def test_resident_bytes_stay_below_every_variants_measured_peak(target):
    peaks = resident_floor.book_run_memory(target)
    if peaks is None:
        pytest.skip(f"{target}: no peaks in {resident_floor.BOOK_RUN} (a multi-GPU pair on one GPU)")
    resident = workload_of(target)["resident_bytes"]
    assert len(peaks) == 2 and all(resident < peak for peak in peaks.values()), (resident, peaks)
