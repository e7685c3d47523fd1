"""Chapter 20's two-rank case study on two GPUs: the baseline and every stage through the harness
(torchrun, NCCL) at the H200 size: each stage verifies on both ranks, reports MFU, and prints its
time, speedup, relative L2 error and MFU (the figures the README's table wants)."""

from __future__ import annotations

import pytest
import torch
from conftest import REPO

pytestmark = pytest.mark.multigpu


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_every_stage_verifies_on_two_gpus_and_reports_mfu(tmp_path) -> None:
    from aisp.harness.discovery import resolve_targets
    from aisp.harness.options import RunOptions
    from aisp.harness.runner import run_suite

    options = RunOptions(iterations=10, warmup=2, artifacts_dir=tmp_path)
    (result,) = run_suite(resolve_targets(["ch20:ddp_training_e2e_multigpu"], REPO), options)[0]
    base = result["baseline"]
    assert base is not None, result["reason"]
    print(f"\n{base['name']}: metrics {base['metrics']}")
    assert base["metrics"]["mfu"] > 0
    for stage in result["variants"]:
        assert stage["verdict"] in ("ok", "inconclusive", "slower"), (stage["name"], stage["reason"])
        assert "each of 2 ranks: matches that rank's baseline" in stage["verification"]["checks"]
        assert stage["metrics"]["mfu"] > 0
        print(stage["name"], stage["verdict"], "speedup", stage.get("speedup"), "rel L2",
              stage["verification"].get("rel_l2_err"), "metrics", stage["metrics"])
