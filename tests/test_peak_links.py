"""The GPU-GPU ceilings of ``aisp peak``: the skip below two GPUs, nccl-tests' busbw arithmetic, the
roofline's nvlink link, the all-reduce sweep's launch on two gloo ranks; on 2+ GPUs, the probes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from aisp.cli.main import app
from aisp.harness.loader import import_module_at
from aisp.kits import collectives
from aisp.kits.collectives import bus_factor, row, size_label, sizes
from aisp.peak import allreduce
from aisp.peak import probes as peak_probes
from aisp.peak.measure import measure_peaks
from aisp.peak.probes import QUICK, PeakConfig, ProbeSkipped
from aisp.report.roofline import add_roofline, annotate, peak_bandwidth

CPU = torch.device("cpu")
TINY = PeakConfig(cpu_matmul_n=256, matmul_iters=1, repeats=2, copy_bytes=8 << 20, compile=False, host_bytes=1 << 20,
                  first_touch_bytes=1 << 20)
GPU_PAIR = ("p2p_copy", "nccl_allreduce")
TWO_GPUS = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")


# --- fewer than two GPUs: one skip line per probe, nothing measured, exit code unchanged

def test_cpu_skips_both_gpu_pair_probes_with_the_count() -> None:
    peaks = measure_peaks(TINY, CPU)
    for name in GPU_PAIR:
        assert peaks["skipped"][name] == "needs 2 GPUs (found 0)"
    assert not [m for m in peaks["measurements"] if m.startswith(("p2p_copy", "allreduce_busbw"))]
    assert peaks["errors"] == {}


@pytest.mark.parametrize("probe", [peak_probes.peer_copy, peak_probes.nccl_allreduce])
def test_one_gpu_skips_before_touching_it(probe, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ProbeSkipped, match=r"^needs 2 GPUs \(found 1\)$"):
        probe(TINY, torch.device("cuda", 0))


def test_cli_prints_the_skip_and_exits_zero(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "repo" / "peaks").mkdir(parents=True)
    monkeypatch.setenv("AISP_ROOT", str(tmp_path / "repo"))
    monkeypatch.setenv("AISP_PEAK_DIR", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr("aisp.peak.measure.QUICK", TINY)  # --quick's path at TINY's sizes: the skip line does not depend on them
    shown = CliRunner().invoke(app, ["peak", "--quick"])
    assert shown.exit_code == 0, shown.output
    lines = [line for line in shown.output.splitlines() if line.split("│")[1:2] and "p2p_copy" in line]
    assert len(lines) == 1 and "skipped" in lines[0] and "needs 2 GPUs (found 0)" in lines[0]
    assert not list(tmp_path.glob("peak_*.json"))  # --quick caches nothing


# --- nccl-tests' arithmetic (doc/PERFORMANCE.md): busbw = algbw x 2(n-1)/n for all-reduce

@pytest.mark.parametrize("ranks", [2, 3, 4, 8])
def test_allreduce_busbw_is_algbw_times_two_n_minus_one_over_n(ranks: int) -> None:
    nbytes, seconds = 3 * 2**28, 4.2e-3
    r = row("all_reduce", nbytes, ranks, seconds)
    assert r.algbw_gbs == pytest.approx(nbytes / seconds / 1e9)
    assert r.busbw_gbs == pytest.approx(r.algbw_gbs * 2 * (ranks - 1) / ranks)
    assert r.time_us == pytest.approx(4200)
    assert bus_factor("all_gather", ranks) == pytest.approx((ranks - 1) / ranks)


def test_busbw_on_a_worked_example() -> None:
    # 1 GiB all-reduced by 8 ranks in 10 ms: algbw 107.37 GB/s, busbw 7/4 of it.
    r = row("all_reduce", 2**30, 8, 0.01)
    assert r.algbw_gbs == pytest.approx(107.374, abs=1e-3) and r.busbw_gbs == pytest.approx(187.905, abs=1e-3)
    assert row("all_reduce", 2**30, 2, 0.01).busbw_gbs == pytest.approx(r.algbw_gbs)  # two ranks: factor 1


def test_sweep_sizes_and_labels() -> None:
    full = sizes(PeakConfig().allreduce_min_bytes, PeakConfig().allreduce_max_bytes, 4)
    assert [size_label(n) for n in full] == ["1MiB", "4MiB", "16MiB", "64MiB", "256MiB", "1GiB"]
    assert sizes(QUICK.allreduce_min_bytes, QUICK.allreduce_max_bytes, 4)[-1] == 64 << 20
    assert size_label(12) == "12B" and size_label(3 << 10) == "3KiB" and size_label(1025) == "1025B"


def test_nccl_sweep_tool_uses_the_shared_arithmetic() -> None:
    sweep = import_module_at(Path(__file__).resolve().parent.parent / "ch04" / "nccl_sweep.py")
    assert sweep.row is collectives.row and sweep.measure is collectives.measure


# --- the roofline's nvlink link

PEAKS = {"provenance": {"hardware_key": "2x_testhw"},
         "measurements": {"matmul_fp32": {"value": 50.0, "unit": "TFLOP/s", "detail": ""},
                          "memory_copy": {"value": 4000.0, "unit": "GB/s", "detail": ""},
                          "h2d_pinned": {"value": 55.0, "unit": "GB/s", "detail": ""},
                          "p2p_copy": {"value": 400.0, "unit": "GB/s", "detail": ""},
                          "p2p_copy_bidir": {"value": 750.0, "unit": "GB/s", "detail": ""}}}


def test_nvlink_workloads_are_judged_against_the_per_direction_peer_copy() -> None:
    assert peak_bandwidth(PEAKS, "nvlink") == 400.0
    # 256 MiB one way in 1 ms: 268 GB/s = 67% of 400.
    roof = annotate({"name": "v", "summary": {"median": 1.0}}, {"bytes": 2.0**28, "link": "nvlink"}, PEAKS)
    assert roof["peak_gbps"] == 400.0 and roof["pct_of_bound"] == pytest.approx(100 * 2**28 / 1e6 / 400)
    result = {"workload": {"flops": 2.0**26, "bytes": 2.0**28, "link": "nvlink"}, "notes": [],
              "baseline": {"name": "b", "summary": {"median": 10.0}},
              "variants": [{"name": "o", "summary": {"median": 1.0}}]}
    out = add_roofline(result, PEAKS)
    assert out["variants"][0]["roofline"]["peak_gbps"] == 400.0 and out["variants"][0]["roofline"]["bound"] == "memory"


def test_nvlink_without_a_measured_peer_copy_is_a_missing_ceiling() -> None:
    single_gpu = {**PEAKS, "measurements": {k: v for k, v in PEAKS["measurements"].items()
                                            if not k.startswith("p2p")}}
    with pytest.raises(KeyError, match="no p2p_copy ceiling for link 'nvlink'.*aisp peak --refresh"):
        peak_bandwidth(single_gpu, "nvlink")
    with pytest.raises(KeyError, match="no h2d_pinned ceiling"):  # the same path as any other link
        peak_bandwidth({"measurements": {}}, "h2d")


# --- the all-reduce sweep's plumbing: torchrun, the process group, rank 0's rows back to the parent

def test_allreduce_sweep_runs_on_two_gloo_ranks() -> None:
    rows = allreduce.sweep(2, "cpu", [1024, 4096], samples=2, timeout_s=120)
    assert [(r.op, r.bytes, r.ranks) for r in rows] == [("all_reduce", 1024, 2), ("all_reduce", 4096, 2)]
    for r in rows:  # the figures mean nothing on a CPU; only their consistency is checked
        assert r.time_us > 0 and r.busbw_gbs == pytest.approx(r.algbw_gbs * bus_factor("all_reduce", 2))


def test_sweep_launch_keeps_nvlink_multicast_off_and_reports_a_failed_launch(monkeypatch) -> None:
    env = allreduce.launch_env()
    assert env["NCCL_NVLS_ENABLE"] == "0" and env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
    argv = allreduce.launch_argv(4, "cuda", [1 << 20], 3, "out.json")
    assert "--nproc-per-node=4" in argv and argv[argv.index("-m", 3) + 1] == "aisp.peak.allreduce"
    monkeypatch.setattr(allreduce, "launch_argv",
                        lambda *a: [sys.executable, "-c", "import sys; print('rank 1 broke'); sys.exit(3)"])
    with pytest.raises(RuntimeError, match="torchrun exited 3: rank 1 broke"):
        allreduce.sweep(2, "cpu", [1024], 1)


# --- on a host with 2+ GPUs: the probes for real

@pytest.mark.multigpu
@TWO_GPUS
def test_peer_copy_measures_each_direction_and_both() -> None:
    found = peak_probes.peer_copy(QUICK, torch.device("cuda", 0))
    assert set(found) == {"p2p_copy", "p2p_copy_0to1", "p2p_copy_1to0", "p2p_copy_bidir"}
    assert all(m["unit"] == "GB/s" and m["value"] > 1 for m in found.values())
    assert found["p2p_copy"]["value"] == max(found["p2p_copy_0to1"]["value"], found["p2p_copy_1to0"]["value"])
    if "no peer access" not in found["p2p_copy"]["detail"]:  # NVLink/PCIe P2P is full duplex: they overlap
        assert found["p2p_copy_bidir"]["value"] > 1.2 * found["p2p_copy"]["value"], found
    print(json.dumps(found, indent=1))


@pytest.mark.multigpu
@TWO_GPUS
def test_nccl_allreduce_sweeps_every_local_gpu() -> None:
    found = peak_probes.nccl_allreduce(QUICK, torch.device("cuda", 0))
    assert list(found) == ["allreduce_busbw", "allreduce_busbw_1MiB", "allreduce_busbw_4MiB",
                           "allreduce_busbw_16MiB", "allreduce_busbw_64MiB"]
    assert all(m["value"] > 0 and m["unit"] == "GB/s" for m in found.values())
    assert found["allreduce_busbw"]["value"] == max(m["value"] for m in found.values())
    assert f"{torch.cuda.device_count()} ranks" in found["allreduce_busbw"]["detail"]
    assert found["allreduce_busbw_64MiB"]["value"] > found["allreduce_busbw_1MiB"]["value"]
    print(json.dumps(found, indent=1))


@pytest.mark.multigpu
@TWO_GPUS
def test_cli_quick_measures_the_gpu_pair(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AISP_PEAK_DIR", str(tmp_path))
    result = CliRunner().invoke(app, ["peak", "--quick", "--json"])
    assert result.exit_code == 0, result.output
    peaks = json.loads(result.stdout)
    assert not set(GPU_PAIR) & set(peaks["skipped"]) and not set(GPU_PAIR) & set(peaks["errors"]), peaks
    assert peak_bandwidth(peaks, "nvlink") == peaks["measurements"]["p2p_copy"]["value"]
