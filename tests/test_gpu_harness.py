"""The harness on a CUDA GPU: events, memory, telemetry, L2 flush, the verification gate, work the
events do not see, and sustained timing against triton's do_bench."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import FIXTURE_PAIRS, REPO

from aisp.harness.discovery import resolve_targets
from aisp.harness.loader import import_module_at
from aisp.harness.options import RunOptions
from aisp.harness.runner import run_suite
from aisp.judge.regression import host_bound_names
from aisp.judge.run_noise import TIME_PRIOR

pytestmark = pytest.mark.gpu


def _run(tmp_path, targets, roots=(), **kw):
    options = RunOptions(**{"iterations": 10, "warmup": 2, **kw}, device="cuda", artifacts_dir=tmp_path)
    results, _ = run_suite(resolve_targets(targets, REPO, roots), options)
    return {r["name"]: r for r in results}


def test_ch01_pairs_verified_and_faster_on_gpu(tmp_path):
    results = _run(tmp_path, ["ch01:batch_size", "ch01:preallocated_buffers"])
    for result in results.values():
        assert result["verdict"] == "ok", result["reason"]
        assert result["speedup"]["low"] > 1.0
        best = result["variants"][0]
        assert best["host_summary"]["median"] >= best["summary"]["median"] * 0.5
        assert best["memory"]["peak_bytes"] > 0
        assert result["telemetry"].get("readings", 0) > 0 or result["notes"]


def test_gpu_verification_gate_and_flush(tmp_path):
    results = _run(tmp_path, ["pairs:good", "pairs:skips_after_warmup", "pairs:setup_cached", "pairs:needs_gpu"],
                   (FIXTURE_PAIRS,), flush_l2=True)
    for name in ("good", "needs_gpu"):  # A/A pairs
        assert results[name]["verdict"] in ("ok", "inconclusive", "ok-unchecked"), (name, results[name]["reason"])
    assert results["skips_after_warmup"]["verdict"] == "verify-failed"
    assert results["setup_cached"]["verdict"] == "verify-failed"


TIMING = Path(__file__).resolve().parent / "fixtures" / "timing"


@pytest.mark.parametrize("timing", ["per-call", "sustained"])
def test_work_outside_the_timed_stream_gets_no_speedup(tmp_path, timing):
    """An unjoined side stream, a thread's stream, a third of the rows on an unjoined stream, ~30 us
    hidden in a ~30 us call (the sync tail reads only 9-11 us of it on an H200; the profiled call's
    GPU timestamps see it whole), and ~60 us on a stream that never waited for the current
    one (beside the spacer in the samples; past the end event in the calls from idle): a device-wide
    sync after the end event still waits for that work; the variant is an error, never a speedup.
    Joined to the current stream, it is timed right."""
    hidden = ["side_stream", "thread_stream", "one_third", "hidden_tail", "under_spacer"]
    results = _run(tmp_path, [f"timing:{n}" for n in (*hidden, "joined_stream")], (TIMING,), timing=timing)
    for name in hidden:
        variant = results[name]["variants"][0]
        print(name, timing, variant["reason"], variant.get("tail_summary"), variant.get("stream_leftover_us"))
        assert results[name]["verdict"] == "error" and results[name]["speedup"] is None
        assert "work outside the timed stream" in variant["reason"]
    # calls under 0.2 ms get the profiled call: ~30 us left behind, and none where all is on one stream
    assert results["hidden_tail"]["variants"][0]["stream_leftover_us"] > 20
    assert results["hidden_tail"]["baseline"]["stream_leftover_us"] <= 5
    joined = results["joined_stream"]
    assert joined["verdict"] == "ok-unchecked", joined["reason"]  # A/A, no per-call inputs declared
    assert 0.95 < joined["speedup"]["value"] < 1.05
    tail, events = joined["variants"][0]["tail_summary"]["median"], joined["variants"][0]["summary"]["median"]
    # a joined stream leaves nothing: the first sync waits no longer than the repeated one (unpaired,
    # the sync's own cost read ~10 us per call and 51 us after a sustained batch on an H200, 2026-11-28)
    assert tail < max(0.1 * events, 0.01)


def test_host_bound_tag_and_memory_figures(tmp_path):
    """200 one-kernel additions: the GPU work does not clearly exceed the host's time to issue it
    (host-bound, with its figures); an 8192^3 matmul is not. Memory: peak reserved is at least peak
    allocated, and NVML's used-memory change is reported where NVML can be read."""
    results = _run(tmp_path, ["timing:launches", "timing:same"], (TIMING,))
    launches, matmul = results["launches"]["baseline"], results["same"]["baseline"]
    print("launches", launches["host_bound"], launches["issue_summary"]["median"], launches["summary"]["median"])
    assert launches["host_bound"] is not None and launches["host_bound"]["events_over_issue"] <= 1.1
    assert matmul["host_bound"] is None and matmul["spacer_ms"] >= 0.05
    memory = matmul["memory"]
    print(memory)
    assert memory["peak_reserved_bytes"] >= memory["peak_bytes"] > 0
    assert memory["nvml_used_delta_bytes"] is None or isinstance(memory["nvml_used_delta_bytes"], int)


def test_graph_timing_replays_capturable_pairs(tmp_path):
    """--timing graph: the A/A matmul is ok near 1; 200 one-kernel additions replayed from a graph are
    no longer host-bound (one replay issues them all)."""
    results = _run(tmp_path, ["timing:same", "timing:launches"], (TIMING,), timing="graph")
    for result in results.values():
        assert result["verdict"] in ("ok", "inconclusive", "ok-unchecked"), result["reason"]  # A/A: its interval may hold 1
        assert any("timed as replays" in n for n in result["variants"][0]["verification"]["notes"])
    assert results["same"]["speedup"]["value"] == pytest.approx(1.0, abs=0.02)
    print("graph launches", results["launches"]["baseline"]["summary"], results["launches"]["baseline"]["host_bound"])
    assert results["launches"]["baseline"]["host_bound"] is None


def test_a_short_kernel_is_timed_as_device_work(tmp_path):
    """Two ~30 us spins and a small output kernel (~63 us of GPU work): the device window times them
    within 10% of the spins' calibrated length, where the window from idle adds the host's launch path
    (~25 us on an H200: +40%)."""
    spin_ms = import_module_at(TIMING / "common_timing.py").SPIN_MS
    result = _run(tmp_path, ["timing:hidden_tail"], (TIMING,))
    base = result["hidden_tail"]["baseline"]
    print("spin", base["summary"]["median"], base["issue_summary"]["median"], base["spacer_ms"])
    assert base["summary"]["median"] == pytest.approx(2 * spin_ms + 0.003, rel=0.1)  # + the output kernel


def test_timing_modes_against_do_bench(tmp_path):
    """An 8192^3 bf16 matmul: per-call timing agrees with triton.testing.do_bench taken just before
    and just after it, and sustained timing is not faster (it holds the GPU at its power-capped steady
    clock). A/A (the same matmul as both variants) over 50 iterations: within 1% of 1, half-width
    <= 2% (H200: 1.0014x [0.9973, 1.0055] per call, 0.9989x [0.9954, 1.0023] sustained). The three
    kernels of issue 27 (this matmul, a 1 GiB copy, a ~37 us elementwise kernel) against do_bench one
    after the other, with clocks recorded: tests/gpu_timing_check.py (H200, 2026-11-28: 0.977, 0.998
    and 0.982 of do_bench)."""
    do_bench = pytest.importorskip("triton.testing").do_bench
    a = torch.randn(8192, 8192, device="cuda").bfloat16()
    b = torch.randn(8192, 8192, device="cuda").bfloat16()
    figures, around = {}, {}
    for timing in ("per-call", "sustained"):
        before = do_bench(lambda: a @ b)
        result = _run(tmp_path / timing, ["timing:same"], (TIMING,), timing=timing, iterations=50)["same"]
        around[timing] = (before, do_bench(lambda: a @ b))  # the GPU's state before and after the run
        speedup = result["speedup"]
        figures[timing] = result["baseline"]["summary"]["median"]
        print(f"{timing}: {figures[timing]:.4f} ms, A/A {speedup['value']:.4f} [{speedup['low']:.4f}, "
              f"{speedup['high']:.4f}], do_bench before {before:.4f} ms, after {around[timing][1]:.4f} ms")
        assert (speedup["high"] - speedup["low"]) / 2 / speedup["value"] <= 0.02
        assert speedup["value"] == pytest.approx(1.0, abs=0.01)
    # The matmul's time follows the GPU's power state more than any timing method: do_bench read
    # 1.389 ms first thing in a process (a cool GPU, ~1.93 GHz), the harness 1.529 ms per call after
    # its warmup by time (power-capped, 1,485-1,515 MHz), on the same H200 (2026-11-28). So the
    # per-call figure is held to do_bench taken just before and just after it: within 6% of that range.
    low, high = min(around["per-call"]), max(around["per-call"])
    assert 0.94 * low <= figures["per-call"] <= 1.06 * high, (figures, around)
    assert figures["sustained"] >= 0.97 * min(around["sustained"])


def _drift(result: dict) -> float:
    """How far two processes' speedups of one pair may drift apart: 5% (the ratio prior's 3.5%, rounded
    up), or two of the time prior's sigmas for a pair with a host-bound variant, as the judge allows
    (its 40 host launches make ch01:gemm's speedup follow the host, not only the GPU)."""
    return 1 + 2 * TIME_PRIOR.sigma if host_bound_names(result) else 1.05


def test_reused_workers_give_the_isolated_runs_results_on_gpu(tmp_path):
    """--reuse-workers on the GPU: the same verdicts and speedups within each other's intervals as
    fresh processes, with the worker kept from pair to pair (cuBLAS workspaces, the CUDA context and
    loaded kernels do not retire it)."""
    targets = ["ch01:batch_size", "ch01:preallocated_buffers", "ch01:gemm", "ch07:aos_to_soa", "ch07:l2_persistence"]
    alone = _run(tmp_path / "a", targets, iterations=20)
    reused = _run(tmp_path / "b", targets, iterations=20, reuse_workers=True)
    for name, result in alone.items():
        again = reused[name]
        assert again["verdict"] == result["verdict"], (name, again["reason"], result["reason"])
        a, b = result["speedup"], again["speedup"]
        # the two intervals overlap, give or take two processes' drift; on an H200 ch01:gemm read 11.1x
        # [8.8, 14.0] isolated and 9.33x [9.18, 9.48] reused (2026-11-28), 10.3x [9.98, 10.7] and 7.86x
        # [6.85, 9.03] (2026-11-29), then 11.6x [9.61, 14.1] and 11.1x [9.83, 12.4] (2026-11-29 again)
        assert max(a["low"], b["low"]) <= _drift(result) * min(a["high"], b["high"]), (name, a, b)
    placed = sorted(r["placement"]["reused_worker"]["earlier_pairs"] for r in reused.values())
    assert placed == list(range(len(targets))), [r["notes"] for r in reused.values()]


def test_forked_workers_run_cuda_and_give_the_spawned_runs_results_on_gpu(tmp_path):
    """--fork-workers on the GPU: CUDA is first initialized in each forked child (the zygote touched
    none), Triton compiles there, and verdicts and speedup intervals agree with workers started anew."""
    targets = ["ch01:batch_size", "ch07:transpose", "ch14:triton_fused_layernorm"]
    spawned = _run(tmp_path / "a", targets, iterations=20)
    forked = _run(tmp_path / "b", targets, iterations=20, fork_workers=True)
    for name, result in spawned.items():
        again = forked[name]
        assert again["placement"]["forked"] and not result["placement"]["forked"]
        assert again["verdict"] == result["verdict"], (name, again["reason"], result["reason"])
        a, b = result["speedup"], again["speedup"]
        assert max(a["low"], b["low"]) <= _drift(result) * min(a["high"], b["high"]), (name, a, b)
        print(name, "start s", result["phases"]["start"], "->", again["phases"]["start"])


def test_persisting_l2_set_aside_left_by_setup_is_undone_before_each_call(tmp_path):
    """A variant's setup() sets 4 MiB more of persisting L2 aside (a limit of the CUDA context) and leaves
    it: its own first call runs under it, and every later call of either variant under the value the
    baseline's first call saw, with a note naming the variant that changed it."""
    result = _run(tmp_path, ["timing:l2_limit"], (TIMING,))["l2_limit"]
    assert result["verdict"] in ("ok-unchecked", "slower", "ok", "inconclusive"), result["reason"]
    base, changed = result["baseline"]["metrics"], result["variants"][0]["metrics"]
    assert base["l2_limit_first"] >= 0, "the persisting-L2 limit could not be read on this GPU"
    assert base["l2_limit_min"] == base["l2_limit_max"] == base["l2_limit_first"]
    assert changed["l2_limit_max"] >= base["l2_limit_first"] + (4 << 20) - (1 << 20)  # the driver may round it
    assert changed["l2_limit_min"] == base["l2_limit_first"]
    assert any(n.startswith("optimized_l2_limit: changed process-wide cudaLimitPersistingL2CacheSize")
               for n in result["notes"]), result["notes"]


def test_a_baseline_slowed_by_the_other_variants_setup_is_named_on_gpu(tmp_path):
    """The GPU loaded pair: the optimized setup() makes the baseline spin 10 times as long (a list
    changed in place, which the settings watch does not see); timed alone before that setup, the
    baseline's ~30 us reads far under its interleaved ~300 us. The A/A matmul stays quiet."""
    results = _run(tmp_path, ["timing:gpu_loaded", "timing:same"], (TIMING,))
    loaded, same = results["gpu_loaded"], results["same"]
    assert loaded["baseline"]["interference"]["ratio"] > 5, loaded["baseline"]["solo_samples_ms"]
    assert loaded["verdict"] == "inconclusive", loaded["reason"]
    assert any(n.startswith("baseline_gpu_loaded: ran ") for n in loaded["notes"]), loaded["notes"]
    assert same["baseline"]["solo_ms"] is not None
    assert same["baseline"]["interference"] is None, (same["baseline"]["solo_samples_ms"], same["baseline"]["summary"],
                                                      same["baseline"]["solo_clock_mhz"], same["baseline"]["timed_clock_mhz"],
                                                      same["baseline"]["throttled_samples"])
