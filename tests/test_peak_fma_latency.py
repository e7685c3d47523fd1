"""The dependent-FMA floor of ``aisp peak`` (aisp/peak/fma_latency.py, fma_latency.cu): the figure's
arithmetic on synthetic timings, the kernel's loop a chain of FFMAs each reading the last's result (its
sm_90 SASS, built on a CPU with nvcc), a CPU skips it with the reason, ``dependent_fmas`` are priced at
it (ch11:concurrent_kernels then held to one kernel's chain, not to the FFMA rate), and peaks without
the floor leave the count out beside FLOPs (the ceiling from before) or name it alone; on a GPU, the
figure is 1-20 cycles of the SM clock."""

from __future__ import annotations

import shutil
import time

import pytest
import torch
from conftest import REPO
from test_peak_simt import LOADS, _loop, function_sass, main_loop

from aisp.harness.execute import workload_dict
from aisp.harness.loader import import_module_at
from aisp.kits import native
from aisp.peak import fma_latency
from aisp.peak.measure import measure_peaks, probe_names
from aisp.peak.probes import QUICK, ProbeSkipped
from aisp.report.ceilings import MissingPeak, add_ceiling, bounds, ceiling, rows

UNROLL = 64
"""Dependent FMAs of fma_latency.cu's unrolled inner loop: the main loop holds at least that many."""
needs_tools = pytest.mark.skipif(shutil.which("nvcc") is None or native.cuobjdump() is None,
                                 reason="needs nvcc and cuobjdump")


def test_the_figure_is_the_chain_less_the_empty_launch_over_its_fmas() -> None:
    # 2^20 FMAs in 2.127 ms, the empty launch 0.006 ms: 2.121 ms / 2^20 = 2.0227 ns, 4.00 cycles at 1980 MHz
    us = fma_latency.per_fma_us(2.127, 0.006, 1 << 20)
    assert us == pytest.approx(2.121e3 / (1 << 20))
    assert fma_latency.cycles(us, 1980.0) == pytest.approx(4.005, abs=1e-3)
    for chain_ms, empty_ms, fmas in ((0.005, 0.006, 1 << 20), (1.0, 0.1, 0)):
        with pytest.raises(ValueError, match="no time per FMA"):
            fma_latency.per_fma_us(chain_ms, empty_ms, fmas)


def chain_problems(sass: str, kernel: str) -> list[str]:
    """Why ``kernel``'s main loop is not one chain of dependent FFMAs: a load in it, fewer FFMAs than
    :data:`UNROLL`, or an FFMA that does not read the one before's result (an independent chain)."""
    loop = main_loop(function_sass(sass, kernel))
    problems = [f"{op} at {addr:#06x} in the loop" for addr, op, _ in loop if LOADS.match(op)]
    ffmas = [(addr, args) for addr, op, args in loop if op == "FFMA"]
    if len(ffmas) < UNROLL:
        problems.append(f"{len(ffmas)} FFMA in the loop, fewer than its {UNROLL}")
    for (_, before), (addr, after) in zip(ffmas, ffmas[1:], strict=False):
        result = before.split(",")[0].strip()
        if result not in [a.strip().removesuffix(".reuse") for a in after.split(",")[1:]]:
            problems.append(f"the FFMA at {addr:#06x} does not read {result}: not one dependent chain")
            break
    return problems


@needs_tools
def test_the_main_loop_is_one_chain_of_dependent_ffmas(tmp_path_factory: pytest.TempPathFactory) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AISP_NATIVE_CACHE", str(tmp_path_factory.mktemp("native")))
        sass = fma_latency.LIBRARY.sass("90")
    assert chain_problems(sass, "ffma_dependent") == []
    assert any(op.startswith("STG") for _, op, _ in function_sass(sass, "ffma_dependent"))  # the result is kept


def test_the_chain_check_fires_on_independent_chains_or_a_load() -> None:
    assert chain_problems(_loop(*["FFMA R6, R6.reuse, R2, R3"] * UNROLL), "k_fma") == []
    two_chains = _loop(*["FFMA R6, R6, R2, R3", "FFMA R7, R7, R2, R3"] * (UNROLL // 2))  # simt_fma.cu's shape
    assert chain_problems(two_chains, "k_fma") == ["the FFMA at 0x0020 does not read R6: not one dependent chain"]
    with_load = _loop("LDG.E R2, desc[UR4][R8.64]", *["FFMA R6, R6, R2, R3"] * 8)
    assert chain_problems(with_load, "k_fma") == ["LDG.E at 0x0010 in the loop", "8 FFMA in the loop, fewer than its 64"]


def test_a_cpu_skips_it_with_the_reason() -> None:
    with pytest.raises(ProbeSkipped, match="no GPU"):
        fma_latency.fma_dependent(torch.device("cpu"), 3)
    assert "fma_dependent" in probe_names()
    peaks = measure_peaks(QUICK, torch.device("cpu"), only=["fma_dependent"])
    assert "no GPU" in peaks["skipped"]["fma_dependent"] and peaks["latency"] == {} and peaks["errors"] == {}


FLOOR_US = 0.002
"""A synthetic dependent-FMA floor: 2 ns, about 4 cycles of an H200's 1.98 GHz SM clock."""


def synthetic_peaks(fma_floor: float | None = FLOOR_US) -> dict:
    """The SIMT FFMA rate at 62.8 TFLOP/s (the H200's), HBM 4,000 GB/s, and the dependent-FMA floor."""
    latency = {} if fma_floor is None else {"fma_dependent": {"value": fma_floor, "unit": "us"}}
    return {"measurements": {"simt_fp32": {"value": 62.8}, "matmul_fp32": {"value": 51.2},
                             "memory_copy": {"value": 4000.0}},
            "latency": latency, "provenance": {"hardware_key": "h200"}}


def ch11_workload(pair: str) -> dict:
    return workload_dict(import_module_at(REPO / "ch11" / f"baseline_{pair}.py").WORKLOAD)


def test_dependent_fmas_are_priced_at_the_floor() -> None:
    found = ceiling({"name": "optimized_x", "summary": {"median": 0.08}}, {"latency": {"dependent_fmas": 20_000}},
                    synthetic_peaks())
    assert found["kind"] == "latency" and found["value"] == pytest.approx(20_000 * FLOOR_US)  # 40 us of 80
    assert found["percent"] == pytest.approx(50) and "20000 dependent_fmas x 0.002 us" in found["detail"]


def test_concurrent_kernels_is_held_to_one_kernels_chain_the_tightest_bound() -> None:
    """1.31 GFLOP at the FFMA rate is 20.9 us; one thread's 20,000 dependent FMAs at 2 ns are 40 us, the
    longer, so the ceiling; a GPU whose FMA chain ran at 0.5 ns would leave the compute bound tighter."""
    workload = ch11_workload("concurrent_kernels")
    kinds = {b.kind: b.seconds for b in bounds(workload, synthetic_peaks())}
    assert kinds["compute"] == pytest.approx(2 * 16 * 8 * 256 * 20_000 / 62.8e12)
    assert kinds["latency"] == pytest.approx(20_000 * FLOOR_US * 1e-6)
    best = ceiling({"name": "optimized_concurrent_kernels", "summary": {"median": 0.231}}, workload, synthetic_peaks())
    assert best["kind"] == "latency" and best["time_ms"] == pytest.approx(0.040)
    assert best["percent"] == pytest.approx(100 * 0.040 / 0.231)
    assert ceiling({"summary": {"median": 0.231}}, workload, synthetic_peaks(0.0005))["kind"] == "compute"


def _run_result(workload: dict, median_ms: float) -> dict:
    timed = {"name": "optimized_x", "summary": {"median": median_ms}}
    return {"target": "ch11:x", "baseline": {"name": "baseline_x", "summary": {"median": 2 * median_ms}},
            "variants": [timed], "best": "optimized_x", "workload": workload}


def test_peaks_without_the_floor_keep_the_pairs_other_bounds_and_say_so() -> None:
    """peaks/peak_h200.json holds no fma_dependent yet: the three ch11 pairs keep the compute or memory
    ceiling they had before declaring dependent_fmas, and the report's row names the floor to measure."""
    lacking = synthetic_peaks(None)
    for pair, kind in (("concurrent_kernels", "compute"), ("legacy_default_stream", "compute"),
                       ("stream_priority", "memory")):
        workload = ch11_workload(pair)
        before = {**workload, "latency": None}
        found = ceiling({"summary": {"median": 1.0}}, workload, lacking)
        assert found["kind"] == kind and found["unpriced"] == ["dependent_fmas"]
        assert found["time_ms"] == ceiling({"summary": {"median": 1.0}}, before, lacking)["time_ms"]
        [row] = rows([_run_result(workload, 10.0)], lacking)  # below the mark: the note, then the missing floor
        assert (row.kind, row.percent) == (kind, pytest.approx(10 * found["time_ms"]))
        assert row.reason.startswith(workload["ceiling_note"])
        assert "ceiling without its dependent_fmas: the peaks hold no fma_dependent floor" in row.reason
    assert "unpriced" not in ceiling({"summary": {"median": 1.0}}, ch11_workload("concurrent_kernels"), synthetic_peaks())


def test_dependent_fmas_alone_without_the_floor_name_it() -> None:
    alone = {"latency": {"dependent_fmas": 1000}}
    with pytest.raises(MissingPeak, match="no fma_dependent latency floor"):
        bounds(alone, synthetic_peaks(None))
    out = add_ceiling(_run_result(alone, 1.0), synthetic_peaks(None))
    assert "no fma_dependent latency floor" in out["no_ceiling"]
    [row] = rows([_run_result(alone, 1.0)], synthetic_peaks(None))
    assert row.kind == "none" and "fma_dependent" in row.reason


@pytest.mark.gpu
def test_the_floor_is_1_to_20_cycles_of_the_sm_clock_on_a_gpu() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    device = torch.device("cuda", 0)
    found = fma_latency.fma_dependent(device, 5)
    lib = fma_latency.LIBRARY.load(device, fma_latency.SIGNATURES)
    out = torch.empty(32, device=device)
    # the SM clock read while a ~0.5 s chain runs (NVML's reading is an average over its last sample period)
    native.check(lib.fma_dependent_run(native.ptr(out), (1 << 28) // UNROLL, 0.9999, 1e-4, native.stream(device)),
                 "fma_dependent_run")
    time.sleep(0.3)
    clock = fma_latency.sm_clock_mhz(device)
    torch.cuda.synchronize(device)
    if clock is None:
        pytest.skip("no SM clock reading (pynvml)")
    cycles = fma_latency.cycles(found["value"], clock)
    print(f"fma_dependent {found['value'] * 1e3:.3f} ns, {cycles:.2f} cycles at {clock:.0f} MHz ({found['detail']})")
    assert 1 <= cycles <= 20
