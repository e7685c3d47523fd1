"""Chapter 13's multi-GPU pairs and tools on the CPU with gloo: the pairs at small fp32 sizes on
three ranks through the real harness path (tests/fixtures/distributed_ch13/; each pair's worker
forked from a zygote, so a forked worker is shown to run a multi-rank pair), with a wrong variant of
each that verification must reject; the context-parallelism tool and the FSDP
example under torchrun."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch
from conftest import REPO, run_fixture_pairs

from aisp.harness.benchmark import unmet_requirements
from aisp.harness.options import RunOptions

CH13 = REPO / "ch13"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "distributed_ch13"
PAIRS = ("context_parallel_multigpu", "expert_parallel_multigpu")


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    """Both pairs at CPU sizes, three ranks each; ch13/ on the workers' PYTHONPATH. The workers are
    forked from a zygote (--fork-workers): each becomes torchrun's agent as a spawned one does."""
    options = RunOptions(iterations=4, warmup=1, warmup_s=0.0, device="cpu", artifacts_dir=tmp_path_factory.mktemp("art"),
                         fork_workers=True)
    results = run_fixture_pairs(FIXTURES, CH13, options, ranks=3)
    assert all(r["placement"]["forked"] for r in results), [r["placement"] for r in results]
    return {r["name"]: {v["name"]: v for v in r["variants"]} for r in results}


def test_ring_attention_matches_allgather_on_every_rank(suite):
    ring = suite["context_parallel"]["optimized_context_parallel"]
    # A correct variant on a busy 2-core CPU (the suite runs on two processes) is sometimes timed
    # "slower": what this test is about is that it verified.
    assert ring["verdict"] in ("ok", "inconclusive", "slower"), ring["reason"]
    assert "each of 3 ranks: matches that rank's baseline" in ring["verification"]["checks"]
    assert ring["verification"]["max_abs_err"] < 1e-5


def test_attention_over_one_block_fails(suite):
    local = suite["context_parallel"]["optimized_context_parallel_localonly"]
    assert local["verdict"] == "verify-failed"
    # Ranks that fail alike share one reason (no "rank r:" prefix): the verdict is what must agree.
    reason = local["reason"]
    assert "seed" in reason and ("rank" not in reason or all(f"rank {r}:" in reason for r in range(3))), reason


def test_preallocated_dispatch_equals_lists_exactly(suite):
    fixed = suite["expert_parallel"]["optimized_expert_parallel"]
    # Verified; its timing on a shared 2-core CI machine may come out either way (it once read "slower").
    assert fixed["verdict"] in ("ok", "inconclusive", "slower"), fixed["reason"]
    assert fixed["verification"]["max_abs_err"] == 0.0


def test_tokens_that_never_leave_their_rank_fail(suite):
    assert suite["expert_parallel"]["optimized_expert_parallel_nodispatch"]["verdict"] == "verify-failed"


def _ch13(module: str) -> ModuleType:
    """Import a ch13 module with ch13/ on sys.path only for the import (other chapters reuse names)."""
    sys.path.insert(0, str(CH13))
    try:
        return importlib.import_module(module)
    finally:
        sys.path.remove(str(CH13))


@pytest.mark.parametrize("name", PAIRS)
def test_chapter_pairs_need_two_gpus(name, monkeypatch):
    requires = _ch13(f"baseline_{name}").WORKLOAD.requires
    assert requires.world_size == 2
    assert "CUDA" in unmet_requirements(requires, torch.device("cpu"))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert unmet_requirements(requires, torch.device("cuda")) == "needs 2 GPUs; 1 present"


def _torchrun(ranks: int, script: str, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}",
           str(CH13 / script), "--device", "cpu", *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)


def test_context_parallelism_tool(tmp_path):
    out = tmp_path / "rows.json"
    proc = _torchrun(3, "context_parallelism.py", "--dtype", "fp32", "--heads", "2", "--head-dim", "16",
                     "--seq-per-rank", "32", "96", "--iterations", "3", "--warmup", "1", "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads(out.read_text())
    assert [r["seq"] for r in rows] == [96, 288]
    assert all(r["match"] and r["allgather_ms"] > 0 and r["ring_ms"] > 0 for r in rows)
    assert "all-gather ms" in proc.stdout


def test_fsdp_example_halves_training_state(tmp_path):
    out = tmp_path / "fsdp.json"
    proc = _torchrun(2, "fsdp_example.py", "--preset", "tiny", "--steps", "4", "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out.read_text())
    ddp, fsdp = doc["runs"]
    assert doc["losses_agree"] and len(ddp["losses"]) == 4, proc.stdout
    assert max(fsdp["state_bytes"]) < 0.6 * min(ddp["state_bytes"]), proc.stdout


def test_fsdp_report_flags_diverging_losses(capsys):
    example = _ch13("fsdp_example")
    run = {"mode": "DDP", "step_ms": 1.0, "state_bytes": [1], "peak_bytes": None, "losses": [2.0, 1.0]}
    assert example.report([run, {**run, "mode": "FSDP2"}], 1e-4)
    assert not example.report([run, {**run, "mode": "FSDP2", "losses": [2.0, 1.1]}], 1e-4)
    assert "DIFFER" in capsys.readouterr().out
