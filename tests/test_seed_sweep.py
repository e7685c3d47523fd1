"""tests/seed_sweep.py, the many-seed verification of issue 27 (run on 2 x H200 for ch13 context
parallel and ch20 DDP), on the CPU: two gloo ranks, chapter 13's small context-parallel fixture, a
correct variant that passes every seed and a wrong one (local attention only) that fails every seed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "distributed_ch13"


def test_every_seed_passes_for_the_right_variant_and_fails_for_the_wrong_one(tmp_path):
    out = tmp_path / "sweep.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "ch13")]), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
           str(REPO / "tests" / "seed_sweep.py"), "--root", str(FIXTURES), "-t", "distributed_ch13:context_parallel",
           "--count", "2", "--seeds-from", "7", "--device", "cpu", "--out", str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode != 0, "a wrong variant must fail the sweep"
    summary = json.loads(out.read_text())
    assert summary["seeds"] == 2 and summary["passed"] is False
    assert [r["seed"] for r in summary["records"]] == [7, 8]
    for record in summary["records"]:
        assert record["outcome"]["optimized_context_parallel"] == "ok"
        wrong = record["outcome"]["optimized_context_parallel_localonly"]
        assert wrong.startswith("verify-failed") and "rank 0" in wrong and "rank 1" in wrong
