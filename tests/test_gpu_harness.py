"""The harness on a CUDA GPU: events, memory, telemetry, L2 flush and the verification gate."""

from __future__ import annotations

import pytest
from conftest import FIXTURE_PAIRS, REPO

from aisp.harness.discovery import resolve_targets
from aisp.harness.options import RunOptions
from aisp.harness.runner import run_suite

pytestmark = pytest.mark.gpu


def _run(tmp_path, targets, roots=(), **kw):
    options = RunOptions(iterations=10, warmup=2, device="cuda", artifacts_dir=tmp_path, **kw)
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
    assert results["good"]["verdict"] == "ok"
    assert results["needs_gpu"]["verdict"] == "ok"
    assert results["skips_after_warmup"]["verdict"] == "verify-failed"
    assert results["setup_cached"]["verdict"] == "verify-failed"
