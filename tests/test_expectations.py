"""Regression verdicts against stored expectations, with synthetic results."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np

from aisp.harness.results import assemble, exit_code
from aisp.judge import expectations

ENV = {"hardware_key": "h100", "gpu_name": "NVIDIA H100", "gpu_count": 1, "driver": "580", "cuda": "13.0",
       "torch": "2.11", "git_commit": "abc"}


def _result(tmp_path, name, base_ms, opt_ms, noise=0.01, seed=0):
    rng = np.random.default_rng(seed)
    raw = [{"name": f"baseline_{name}", "verdict": "pending", "samples_ms": list(base_ms * (1 + rng.normal(0, noise, 30))),
            "host_samples_ms": [], "memory": {"peak_bytes": 100}},
           {"name": f"optimized_{name}", "verdict": "pending", "samples_ms": list(opt_ms * (1 + rng.normal(0, noise, 30))),
            "host_samples_ms": [], "memory": {"peak_bytes": 50}}]
    pair = {"target": f"chX:{name}", "group": "chX", "name": name, "files": [str(tmp_path / f"baseline_{name}.py")]}
    return assemble(pair, {"headline": "time"}, raw)


def test_missing_entry_is_new(tmp_path):
    judged = expectations.judge(_result(tmp_path, "a", 10, 5), ENV)
    assert judged["expectation"]["status"] == "new" and judged["verdict"] == "ok"


def test_noise_inside_threshold_is_ok(tmp_path):
    expectations.update([_result(tmp_path, "a", 10, 5, seed=1)], ENV)
    judged = expectations.judge(_result(tmp_path, "a", 10, 5.05, seed=2), ENV)
    assert judged["expectation"]["status"] == "ok" and judged["verdict"] == "ok"


def test_clear_slowdown_is_regressed_with_its_exit_code(tmp_path):
    expectations.update([_result(tmp_path, "a", 10, 5, seed=1)], ENV)
    judged = expectations.judge(_result(tmp_path, "a", 10, 8, seed=2), ENV)
    assert judged["verdict"] == "regressed" and "regressed" in judged["reason"]
    assert exit_code([judged]) == 3


def test_calibrated_noise_floor_absorbs_a_drop_the_intervals_alone_would_flag(tmp_path):
    expectations.update([_result(tmp_path, "a", 10, 5, seed=1)], ENV)
    path = expectations.path_for(_result(tmp_path, "a", 10, 5), "h100")
    expectations.store_noise(path, "a", {"speedup_rel": 0.25}, ENV)
    judged = expectations.judge(_result(tmp_path, "a", 10, 6, seed=2), ENV)
    assert judged["expectation"]["status"] == "ok", judged["expectation"]["detail"]


def test_environment_change_is_not_a_regression(tmp_path):
    expectations.update([_result(tmp_path, "a", 10, 5, seed=1)], ENV)
    judged = expectations.judge(_result(tmp_path, "a", 10, 8, seed=2), {**ENV, "torch": "2.12"})
    assert judged["expectation"]["status"] == "environment-changed" and judged["verdict"] == "ok"
    assert "torch: 2.11 -> 2.12" in judged["expectation"]["detail"]


def test_new_hardware_key_has_no_comparison(tmp_path):
    expectations.update([_result(tmp_path, "a", 10, 5, seed=1)], ENV)
    judged = expectations.judge(_result(tmp_path, "a", 10, 8), {**ENV, "hardware_key": "b200"})
    assert judged["expectation"]["status"] == "new"


def test_update_keeps_entries_not_remeasured(tmp_path):
    expectations.update([_result(tmp_path, "a", 10, 5), _result(tmp_path, "b", 10, 2)], ENV)
    expectations.update([_result(tmp_path, "a", 10, 4)], ENV)
    doc = json.loads((tmp_path / "expectations_h100.json").read_text())
    assert set(doc["entries"]) == {"a", "b"}
    assert doc["entries"]["a"]["optimized_ms"] < 4.5 and doc["entries"]["b"]["optimized_ms"] < 2.5
    assert doc["entries"]["a"]["provenance"]["commit"] == "abc" and doc["schema_version"] == 1


def test_failed_pairs_are_not_stored_or_compared(tmp_path):
    bad = {**_result(tmp_path, "a", 10, 5), "verdict": "verify-failed"}
    assert expectations.update([bad], ENV) == []
    assert expectations.judge(bad, ENV)["expectation"]["status"] == "not-compared"


def test_below_bar_lists_weak_entries(tmp_path):
    chapter = tmp_path / "ch99"
    chapter.mkdir()
    expectations.update([_result(chapter, "fast", 10, 2), _result(chapter, "meh", 10, 9.9)], ENV)
    rows = expectations.below_bar(tmp_path, "h100", 1.05)
    assert [r["target"] for r in rows] == ["ch99:meh"]


UPDATER = """
import sys
from pathlib import Path
from aisp.judge import expectations
path = Path(sys.argv[1])
i = 0
while True:
    i += 1
    expectations.store_noise(path, f"pair{i % 50}", {"speedup_rel": 0.01, "pad": "x" * 20000}, {"hardware_key": "h100"})
"""


def test_killed_mid_update_leaves_a_whole_file(tmp_path):
    path = tmp_path / "expectations_h100.json"
    expectations.store_noise(path, "first", {"speedup_rel": 0.02}, {"hardware_key": "h100"})
    for delay in (2.5, 2.9, 3.3):
        proc = subprocess.Popen([sys.executable, "-c", UPDATER, str(path)], start_new_session=True)
        time.sleep(delay)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        doc = json.loads(path.read_text())
        assert "first" in doc["entries"]
