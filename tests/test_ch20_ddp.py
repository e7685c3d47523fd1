"""Chapter 20's two-rank case study (``ddp_training_e2e_multigpu``) on the CPU with gloo: the baseline
and every stage at a tiny GPT through the real harness path (torchrun, two ranks, per-rank
verification with refilled inputs; fixture files in a temporary folder), plus a wrong variant (no
gradient all-reduce) that verification must reject; the stages are in order, document themselves
and stay short; the GPU-sized pair skips without two GPUs."""

from __future__ import annotations

import pytest
import torch
from conftest import REPO, run_fixture_pairs

from aisp.harness.benchmark import unmet_requirements
from aisp.harness.discovery import pairs_in
from aisp.harness.loader import import_module_at
from aisp.harness.options import RunOptions

CH20 = REPO / "ch20"
NAME = "ddp_training_e2e_multigpu"
STAGES = ["s1_ddp", "s2_bf16_autocast", "s3_bucket_view", "s4_fused_adamw"]
CLASSES = {"s1_ddp": "DDPFp32", "s2_bf16_autocast": "DDPBf16", "s3_bucket_view": "BucketView",
           "s4_fused_adamw": "FusedAdamW"}
OWN_FILES = sorted([*CH20.glob(f"*{NAME}*.py"), CH20 / "ch20_ddp.py"])
SMALL = f'''"""The case study at CPU sizes (two gloo ranks) and a wrong variant."""
import aisp
from aisp.kits.gpt import GPTConfig
from ch20_ddp import ddp_workload
from baseline_{NAME} import Baseline
{"".join(f"from optimized_{NAME}_{s} import {c}{chr(10)}" for s, c in CLASSES.items())}
TINY = ddp_workload(aisp.Requirements(ranks=2), model=GPTConfig(vocab=128, seq=16, dim=32, heads=4, layers=2), batch=4)

class SmallBaseline(Baseline):
    workload = TINY
{"".join(f"{chr(10)}class Small{c}({c}):{chr(10)}    workload = TINY{chr(10)}" for c in CLASSES.values())}
class NoAllReduce(SmallDDPBf16):
    """Wrong: each rank trains on its slice alone (no DDP), so its gradients are its slice's."""
    def setup(self):
        super().setup()
        self.net = self.net.module  # DDP's hooks gone: backward leaves each rank its own gradients
'''
FIXTURES = {"baseline_ddp": "SmallBaseline", **{f"optimized_ddp_{s}": f"Small{c}" for s, c in CLASSES.items()},
            "optimized_ddp_wrong_noallreduce": "NoAllReduce"}


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> dict[str, dict]:
    """Every stage and the wrong variant on two gloo ranks; ch20/ on the workers' PYTHONPATH."""
    pairs = tmp_path_factory.mktemp("pairs")
    (pairs / "ch20_ddp_small.py").write_text(SMALL)
    for stem, cls in FIXTURES.items():
        (pairs / f"{stem}.py").write_text(f"from ch20_ddp_small import {cls}\n\n\ndef get_benchmark():\n    return {cls}()\n")
    options = RunOptions(iterations=2, warmup=0, warmup_s=0.0, device="cpu", artifacts_dir=tmp_path_factory.mktemp("art"))
    (result,) = run_fixture_pairs(pairs, CH20, options, ranks=2)
    assert result["baseline"], result["reason"]
    return {v["name"]: v for v in [result["baseline"], *result["variants"]]}


@pytest.mark.parametrize("stage", STAGES)
def test_stage_matches_the_baseline_on_every_rank(pair, stage: str) -> None:
    variant = pair[f"optimized_ddp_{stage}"]
    assert variant["verdict"] in ("ok", "inconclusive", "slower"), variant["reason"]  # verified; CPU timing means nothing here
    assert "each of 2 ranks: matches that rank's baseline" in variant["verification"]["checks"]
    print(stage, "rel L2", variant["verification"].get("rel_l2_err"))


def test_gradients_without_the_all_reduce_fail(pair) -> None:
    wrong = pair["optimized_ddp_wrong_noallreduce"]
    assert wrong["verdict"] == "verify-failed", wrong["reason"]
    print("no all-reduce:", wrong["reason"])


def test_stages_are_variants_of_one_baseline_in_order() -> None:
    pairs = {p.name: p for p in pairs_in(CH20)}
    assert [o.stem for o in pairs[NAME].optimized] == [f"optimized_{NAME}_{s}" for s in STAGES]


@pytest.mark.parametrize("path", OWN_FILES, ids=lambda p: p.name)
def test_files_document_themselves_and_stay_short(path) -> None:
    text = path.read_text()
    assert len(text.splitlines()) < 150
    doc = import_module_at(path).__doc__
    if path.stem.startswith(("baseline_", "optimized_")):
        assert "Expect (estimate, not yet measured" in doc or "Expect (measured" in doc
        assert f"aisp bench run -t ch20:{NAME}" in doc and "Baseline" in doc
    if path.stem.startswith("optimized_"):
        assert "(ch" in doc.splitlines()[0] + doc.splitlines()[1]  # the chapter the technique comes from


def test_the_pair_needs_two_gpus(monkeypatch) -> None:
    requires = import_module_at(CH20 / f"baseline_{NAME}.py").WORKLOAD.requires
    assert requires.world_size == 2
    assert "CUDA" in unmet_requirements(requires, torch.device("cpu"))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert unmet_requirements(requires, torch.device("cuda")) == "needs 2 GPUs; 1 present"


def test_digest_positions_stay_inside_a_169m_gradient() -> None:
    """A float32 linspace over 169M parameters rounds its last positions past the end (the GPU's
    device-side assert); the int64 positions end exactly at the last element."""
    from ch20_ddp import DIGEST, digest_positions

    total = 169_012_345
    assert torch.linspace(0, total - 1, DIGEST).long().max() > total - 1  # the bug this guards
    picks = digest_positions(total, torch.device("cpu"))
    assert picks.min() == 0 and picks.max() == total - 1 and len(picks) == DIGEST
