"""Every verification check fires on a deliberately broken pair; crashes, hangs and skips are
recorded and the rest of the suite still runs."""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from conftest import FIXTURE_PAIRS

import aisp
from aisp.harness import execute
from aisp.harness.discovery import resolve_targets
from aisp.harness.execute import Variant
from aisp.harness.options import RunOptions
from aisp.harness.results import exit_code
from aisp.harness.runner import run_suite
from aisp.harness.verify import CheckPlan
from aisp.report.tables import write_tables

CHECKED = "checked timed call"
EXPECTED = {
    "constant": ("verify-failed", "(drawn at random)"),
    "setup_cached": ("verify-failed", "shares storage with 'result'"),
    "aliasing": ("verify-failed", "shares storage with 'a'"),
    "mutates_input": ("verify-failed", "changed its inputs"),
    "nan_output": ("verify-failed", "NaN/Inf"),
    "wrong_shape": ("verify-failed", "shape"),
    "wrong_dtype": ("verify-failed", "dtype"),
    "low_precision": ("verify-failed", "outside tolerance"),
    "reference_less_accurate": ("verify-failed", "against the baseline's high-precision reference()"),
    "reference_accurate": ("ok", None),
    "skips_after_warmup": ("verify-failed", CHECKED),
    "caches_after_warmup": ("verify-failed", CHECKED),
    "setup_clone": ("verify-failed", CHECKED),
    "deep_cache": ("verify-failed", CHECKED),
    "cache_by_shape": ("verify-failed", CHECKED),
    "cache_by_pointer": ("verify-failed", CHECKED),
    "cache_by_seed": ("verify-failed", CHECKED),
    "import_table": ("verify-failed", CHECKED),
    "stale_attribute": ("verify-failed", CHECKED),
    "stale_global": ("verify-failed", CHECKED),
    "stale_state": ("verify-failed", CHECKED),
    "mutates_later": ("verify-failed", "changed its inputs ['workspace']"),
    "fewer_inputs": ("verify-failed", "declared input 'b'"),
    "undriven": ("verify-failed", "did not change when its declared `inputs` got new values"),
    "undeclared": ("ok-unchecked", "declares no per-call `inputs`"),
    "cold_cheat": ("ok", None),
    "cyclic_garbage": ("ok", None),
    "raises": ("error", "deliberate failure"),
    "aborts": ("error", "SIGABRT"),
    "out_of_memory": ("error", "out of memory"),
    "hangs": ("timeout", "timed out"),
    "needs_gpu": ("skipped", "CUDA"),
    "unavailable": ("ok", "optimized_unavailable: deliberately unavailable"),
    "unavailable_baseline": ("skipped", "deliberately unavailable"),
    "good": ("ok", None),
}


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    """Every fixture pair, in two suites at once (one per core); returns the results by name and each
    pair's run folder. Each pair's worker is forked from a zygote that imported torch once
    (--fork-workers: a fresh process per pair all the same; tests/test_fork_workers.py holds the
    forked workers' results to the spawned ones'), which saves CI a torch import per pair."""
    pairs = resolve_targets([], FIXTURE_PAIRS, (FIXTURE_PAIRS,))

    def run(half: list, art: Path) -> tuple[list, Path]:
        return run_suite(half, RunOptions(iterations=8, warmup=2, warmup_s=0.0, device="cpu", artifacts_dir=art,
                                            fork_workers=True))
    # The folders are made here, not in the threads: where this fixture is a worker's first use of
    # tmp_path_factory, two threads in mktemp both create the base folder and one fails (FileExistsError,
    # seen under --dist loadscope, which can schedule this module first).
    arts = [tmp_path_factory.mktemp("art"), tmp_path_factory.mktemp("art")]
    # One intra-op thread per worker: two suites of 2-thread workers (under pytest -n 2, four
    # processes on a 2-core CI machine) made a 96x96 matmul take 0.05 or 15 ms by the scheduler's whim.
    with pytest.MonkeyPatch.context() as mp, ThreadPoolExecutor(2) as pool:
        mp.setenv("OMP_NUM_THREADS", "1")
        done = list(pool.map(run, [pairs[0::2], pairs[1::2]], arts))
    results = {r["name"]: r for found, _ in done for r in found}
    return results, {r["name"]: run_dir for found, run_dir in done for r in found}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_verdict(suite, name):
    results, _ = suite
    verdict, reason = EXPECTED[name]
    result = results[name]
    # An A/A pair on a CPU is timed inconclusive, or occasionally "slower" on a busy one: it still verified.
    allowed = {"ok": (verdict, "inconclusive", "slower"), "ok-unchecked": (verdict, "slower")}.get(verdict, (verdict,))
    assert result["verdict"] in allowed, (result["verdict"], result["reason"])
    if reason:
        assert reason in result["reason"]


@pytest.mark.parametrize("name", [n for n, (v, _) in EXPECTED.items() if v == "verify-failed"])
def test_verify_failed_has_no_timing(suite, name):
    result = suite[0][name]
    assert result["speedup"] is None
    assert all(not v.get("samples_ms") for v in result["variants"])


def test_every_pair_has_artifacts(suite):
    results, run_dirs = suite
    for name in results:
        path = run_dirs[name] / f"pairs_{name}" / "results" / "benchmark_test_results.json"
        data = json.loads(path.read_text())
        assert data["schema_version"] == 1 and data["name"] == name
    folders = set(run_dirs.values())
    summaries = [json.loads((d / "summary.json").read_text()) for d in folders]
    assert sum(len(s["results"]) for s in summaries) == len(EXPECTED)
    assert all(json.loads((d / "manifest.json").read_text())["hardware_key"] for d in folders)


def test_the_report_layer_writes_the_tables(suite):
    results, run_dirs = suite
    for folder in set(run_dirs.values()):
        found = [r for name, r in results.items() if run_dirs[name] == folder]
        write_tables(folder, found)
        assert (folder / "summary.csv").read_text().count("\n") == len(found) + 1
        assert (folder / "summary.md").read_text().count("| pairs:") == len(found)
    for name in results:
        path = run_dirs[name] / f"pairs_{name}" / "results" / "benchmark_test_results.md"
        assert path.read_text().startswith(f"# pairs:{name}: ")


def test_crash_log_kept(suite):
    _, run_dirs = suite
    log = (run_dirs["raises"] / "pairs_raises" / "logs" / "pair.log").read_text()
    assert "deliberate failure in run()" in log


def test_aa_pair_is_timed_alike_on_both_sides(tmp_path):
    """The same code on both sides, as a structural check only: both sides keep the run's 20 samples
    (the checked call left out and named), and the interval holds its own estimate. Whether the
    interval holds 1 at its nominal rate and finds a 5% bias is calibrated on synthetic samples in
    tests/test_stats.py: on this shared 2-core host the noise (~30% per sample) hides any 5% bias."""
    pairs = [p for p in resolve_targets([], FIXTURE_PAIRS, (FIXTURE_PAIRS,)) if p.name == "good"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", "1")
        (result,), _ = run_suite(pairs, RunOptions(warmup=2, warmup_s=0.0, device="cpu", artifacts_dir=tmp_path))
    ratio, sides = result["speedup"], [result["baseline"], result["variants"][0]]
    assert result["verdict"] not in ("error", "verify-failed", "timeout"), result["reason"]
    assert ratio["low"] <= ratio["value"] <= ratio["high"]
    assert all(len(v["samples_ms"]) == len(v["issue_samples_ms"]) == 20 for v in sides)
    assert len({v["checked_call"] for v in sides}) == 1 and 0 <= sides[0]["checked_call"] <= 20


def test_good_pair_verified_bitwise(suite):
    good = suite[0]["good"]
    evidence = good["variants"][0]["verification"]
    assert evidence["max_abs_err"] == 0.0
    assert len(evidence["checks"]) == 3


def test_exit_code_is_worst(suite):
    assert exit_code(list(suite[0].values())) == 5


def test_pair_without_declared_inputs_passes_with_a_note(suite):
    results = suite[0]
    assert "no per-call inputs declared" in " ".join(results["undeclared"]["variants"][0]["verification"]["notes"])
    assert results["good"]["variants"][0]["verification"]["notes"] == []


def test_fresh_seed_is_drawn_at_random_and_recorded(suite):
    seeds = set()
    for name in ("good", "undeclared"):
        check = suite[0][name]["variants"][0]["verification"]["checks"][0]
        assert check.endswith("(drawn at random): matches baseline")
        seeds.add(int(check.split()[1]))
    assert len(seeds) == 2 and 1 not in seeds


def test_check_plan_is_random_and_in_range():
    plans = [CheckPlan.draw(7, 5) for _ in range(200)]
    assert all(p.fresh_seed != 7 and 0 <= p.at < 5 for p in plans)
    assert {p.at for p in plans} == set(range(5))
    assert len({p.fresh_seed for p in plans}) == len({p.refill_seed for p in plans}) == 200


def test_cold_start_checks_outputs(tmp_path):
    """--cold-start times each variant in a process of its own: there too one timed call is
    checked against the baseline's (a variant honest only when set up twice in a process fails).
    Forked workers here (CI time); tests/test_modes.py runs cold starts in spawned ones. Two cold
    processes a variant, not the default three: each of the baseline's saves its checked call's output,
    each optimized one checks a call against it, and the samples are kept as groups either way."""
    options = RunOptions(iterations=6, warmup=2, warmup_s=0.0, device="cpu", artifacts_dir=tmp_path, cold_start=True,
                         cold_runs=2, fork_workers=True)
    pairs = resolve_targets(["pairs:cold_cheat", "pairs:good"], FIXTURE_PAIRS, (FIXTURE_PAIRS,))
    results = {r["name"]: r for r in run_suite(pairs, options)[0]}
    cheat = results["cold_cheat"]
    assert cheat["verdict"] == "verify-failed" and "cold process: checked timed call" in cheat["reason"]
    good = results["good"]
    assert good["verdict"] in ("ok", "inconclusive", "slower"), good["reason"]
    assert "cold process: a timed call drawn at random matches the baseline's" in good["variants"][0]["verification"]["checks"]
    assert not list(tmp_path.rglob("cold_reference.pt"))


def _cyclic_pair() -> list:
    return [FIXTURE_PAIRS / f"{role}_cyclic_garbage.py" for role in ("baseline", "optimized")]


def test_setup_memory_is_not_offset_by_an_earlier_pass_freed_inside_it(monkeypatch):
    """Objects of the verification pass on the fresh seed are freed before the next setup's window
    opens, not inside it: two identical variants report the bytes their setup keeps, and the same."""
    monkeypatch.setattr(execute, "_memory_now", lambda device: sys.modules["common_pairs"].LIVE_BYTES[0])
    variants, _, skip = execute.run_variants(_cyclic_pair(), RunOptions(device="cpu", verify_only=True))
    block = sys.modules["common_pairs"].BLOCK_BYTES
    assert skip is None and [v.memory["setup_bytes"] for v in variants] == [block, block]


@pytest.mark.gpu
def test_identical_variants_report_equal_memory_on_gpu(tmp_path):
    options = RunOptions(iterations=5, warmup=1, device="cuda", artifacts_dir=tmp_path)
    pairs = resolve_targets(["pairs:cyclic_garbage", "pairs:good"], FIXTURE_PAIRS, (FIXTURE_PAIRS,))
    for result in run_suite(pairs, options)[0]:
        base, opt = result["baseline"]["memory"], result["variants"][0]["memory"]
        assert base["setup_bytes"] >= 0 and base["peak_bytes"] > 0, base
        assert (base["setup_bytes"], base["peak_bytes"]) == (opt["setup_bytes"], opt["peak_bytes"])


def test_memory_reports_reserved_and_nvml_beside_allocated(monkeypatch):
    """On CUDA (torch's allocator counters and NVML stubbed): peak allocated stays the headline;
    peak reserved adds setup's reserve to the call's, and NVML's used memory change over the call
    (a native allocation torch does not see) is reported beside them."""
    counters = {"allocated": 100, "reserved": 200, "used": 1000}
    stubs = {"memory_allocated": lambda d=None: counters["allocated"], "memory_reserved": lambda d=None: counters["reserved"],
             "max_memory_allocated": lambda d=None: counters["allocated"] + 50,
             "max_memory_reserved": lambda d=None: counters["reserved"] + 70,
             "reset_peak_memory_stats": lambda d=None: None, "synchronize": lambda d=None: None, "empty_cache": lambda: None,
             "mem_get_info": lambda d=None: (10**6 - counters["used"], 10**6)}
    for name, stub in stubs.items():
        monkeypatch.setattr(torch.cuda, name, stub)
    monkeypatch.setattr(execute, "nvml_memory_reader", lambda device: lambda: counters["used"])

    class NativeAlloc(aisp.Benchmark):
        def run(self) -> None:
            counters["used"] += 64

    var = Variant(Path("baseline_m.py"), bench=NativeAlloc(), memory={"setup_bytes": 10, "setup_reserved_bytes": 20})
    execute.measure_memory(var, torch.device("cuda"))
    assert (var.memory["peak_bytes"], var.memory["run_peak_bytes"]) == (60, 50)
    assert (var.memory["peak_reserved_bytes"], var.memory["run_peak_reserved_bytes"]) == (90, 70)
    assert var.memory["nvml_used_delta_bytes"] == var.memory["run_outside_bytes"] == 64  # reserved did not move
    monkeypatch.setattr(execute, "nvml_memory_reader", lambda device: None)
    execute.measure_memory(var, torch.device("cuda"))
    assert var.memory["nvml_used_delta_bytes"] is None
