"""Chapter 17's two-rank pairs on the CPU with gloo: both pairs at tiny fp32 sizes through the real
harness path (torchrun, two ranks; the fixture files are written to a temporary folder), each with
a wrong variant that verification must reject; the placement planner and the bubble arithmetic;
the copy-engine pipeline's signal protocol on fake links (its CUDA hand-off, played in one process);
the GPU-sized pairs skip without two GPUs."""

from __future__ import annotations

import contextlib

import pytest
import torch
from conftest import REPO, run_fixture_pairs
from torch import nn

from aisp.harness.benchmark import unmet_requirements
from aisp.harness.loader import import_module_at
from aisp.harness.options import RunOptions

CH17 = REPO / "ch17"
SMALL = '''"""Chapter 17's two-rank pairs at CPU sizes (fp32, two gloo ranks) and a wrong variant of each."""
import torch
import aisp
from baseline_pipeline_inference_multigpu import PipelineStage, pipeline_workload
from baseline_topology_aware_moe_multigpu import RoundRobinExperts
from ch17_ep import ep_workload, uniform_owner
from optimized_pipeline_inference_multigpu import MicroBatched
from optimized_pipeline_inference_multigpu_copyengine import CopyEnginePipeline
from optimized_topology_aware_moe_multigpu import LocalityAwareExperts

CPU = aisp.Requirements(ranks=2)
EP = ep_workload(CPU, tokens=64, dim=32, ffn=16, experts=8, top_k=2)
PIPE = pipeline_workload(CPU, width=32, blocks_per_stage=2, batch=24, micro_batches=4, dtype="fp32")

class SmallRoundRobin(RoundRobinExperts):
    workload = EP

class SmallLocal(LocalityAwareExperts):
    workload = EP

class Misplaced(SmallLocal):
    """Wrong: the planned experts' weights, but tokens sent by the round-robin table."""
    def setup(self):
        super().setup()
        self.owner = torch.tensor(uniform_owner(EP.experts, self.world), device=self.device)

class SmallWhole(PipelineStage):
    workload = PIPE

class SmallMicro(MicroBatched):
    workload = PIPE

class SmallCopyEngine(CopyEnginePipeline):
    workload = PIPE

class GeluSkippedOnOutput(SmallCopyEngine):
    """Wrong: the last block's GELU writes its input, not the activation, into the output slice."""
    def compute(self, inp, part):
        h = inp
        for linear, _ in self.blocks:
            h = torch.nn.functional.linear(h if h is inp else torch.nn.functional.gelu(h), linear.weight)
        part.copy_(h)

class SkipsLast(SmallMicro):
    """Wrong: the last micro-batch never goes through the second stage."""
    def setup(self):
        super().setup()
        stage, self.calls = self.stage, 0
        def once_less(x):
            self.calls += 1
            return x.clone() if self.rank == 1 and self.calls % self.micro_batches == 0 else stage(x)
        self.stage = once_less
'''
FIXTURES = {"baseline_topo": "SmallRoundRobin", "optimized_topo": "SmallLocal", "optimized_topo_misplaced": "Misplaced",
            "baseline_pipe": "SmallWhole", "optimized_pipe": "SmallMicro", "optimized_pipe_skipslast": "SkipsLast",
            "optimized_pipe_copyengine": "SmallCopyEngine", "optimized_pipe_nogelu": "GeluSkippedOnOutput"}


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    """Both pairs with their wrong variants, two gloo ranks each; ch17/ on the workers' PYTHONPATH. The
    workers are forked from one zygote (--fork-workers, as tests/test_distributed_ch13.py runs its
    pairs): a spawned worker imports torch, the harness and the pair's modules anew, ~7 s of CPU a
    pair; each still becomes torchrun's agent, which forks its two ranks (on a CPU build of torch)."""
    pairs = tmp_path_factory.mktemp("pairs")
    (pairs / "ch17_small.py").write_text(SMALL)
    for stem, cls in FIXTURES.items():
        (pairs / f"{stem}.py").write_text(f"from ch17_small import {cls}\n\n\ndef get_benchmark():\n    return {cls}()\n")
    options = RunOptions(iterations=2, warmup=0, warmup_s=0.0, device="cpu", artifacts_dir=tmp_path_factory.mktemp("art"),
                         fork_workers=True)
    results = run_fixture_pairs(pairs, CH17, options, ranks=2)
    assert all(r["placement"]["forked"] for r in results), [r["placement"] for r in results]
    return {r["name"]: {v["name"]: v for v in [r["baseline"], *r["variants"]]} for r in results}


def test_locality_aware_placement_matches_and_crosses_less(suite):
    pair = suite["topo"]
    opt = pair["optimized_topo"]
    assert opt["verdict"] in ("ok", "inconclusive", "slower"), opt["reason"]  # verified; CPU timing means nothing here
    assert "each of 2 ranks: matches that rank's baseline" in opt["verification"]["checks"]
    uniform, local = pair["baseline_topo"]["metrics"]["remote_share"], opt["metrics"]["remote_share"]
    assert 0.35 < uniform < 0.65 and local < 0.3, (uniform, local)


def test_tokens_sent_to_the_wrong_experts_fail(suite):
    assert suite["topo"]["optimized_topo_misplaced"]["verdict"] == "verify-failed"


def test_micro_batched_pipeline_matches_and_halves_the_bubble(suite):
    pair = suite["pipe"]
    opt = pair["optimized_pipe"]
    assert opt["verdict"] in ("ok", "inconclusive", "slower"), opt["reason"]
    assert pair["baseline_pipe"]["metrics"]["bubble_fraction"] == pytest.approx(0.5)
    assert opt["metrics"]["bubble_fraction"] == pytest.approx(1 / 5)


def test_a_skipped_micro_batch_fails(suite):
    assert suite["pipe"]["optimized_pipe_skipslast"]["verdict"] == "verify-failed"


def test_copy_engine_variant_matches_with_twice_the_micro_batches(suite):
    """On gloo its hand-off is isend/irecv; its compute (GELU in place, the last into the output
    slice) and 8 micro-batches of 3 rows must still match the whole-batch baseline on both ranks."""
    opt = suite["pipe"]["optimized_pipe_copyengine"]
    assert opt["verdict"] in ("ok", "inconclusive", "slower"), opt["reason"]
    assert "each of 2 ranks: matches that rank's baseline" in opt["verification"]["checks"]
    assert opt["metrics"]["bubble_fraction"] == pytest.approx(1 / 9)


def test_a_missing_last_gelu_fails(suite):
    assert suite["pipe"]["optimized_pipe_nogelu"]["verdict"] == "verify-failed"


def test_planner_gives_each_expert_to_its_busiest_rank_within_capacity():
    planned = import_module_at(CH17 / "ch17_ep.py").planned_owner
    counts = torch.tensor([[9, 8, 1, 0], [7, 1, 6, 5]])
    assert planned(counts) == [0, 0, 1, 1]
    assert planned(torch.tensor([[5, 5, 5, 5], [1, 1, 1, 1]])) == [0, 0, 1, 1]  # capacity caps rank 0


@pytest.mark.parametrize("name", ["topology_aware_moe_multigpu", "pipeline_inference_multigpu"])
def test_gpu_pairs_need_two_gpus(name, monkeypatch):
    requires = import_module_at(CH17 / f"baseline_{name}.py").WORKLOAD.requires
    assert requires.world_size == 2
    assert "CUDA" in unmet_requirements(requires, torch.device("cpu"))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert unmet_requirements(requires, torch.device("cuda")) == "needs 2 GPUs; 1 present"


class _Stream:
    def wait_stream(self, other) -> None:
        pass


class _FakeHandle:
    """A symmetric-memory handle over a CPU signal pad: ``wait_signal`` must find the word set (else the
    real one would spin: the test fails instead) and resets it, as the CAS 1 -> 0 does."""

    world_size = 2

    def __init__(self, rank: int, pad: torch.Tensor) -> None:
        self.rank, self.pad = rank, pad

    def wait_signal(self, src: int, channel: int, timeout_ms: int) -> None:
        slot = self.world_size * channel + src
        assert self.pad[slot] == 1, f"rank {self.rank} waits on signal {channel} from {src}, never set"
        self.pad[slot] = 0


def test_copy_engine_hand_off_signals_each_micro_batch_and_frees_the_inbox(monkeypatch):
    """Rank 0's call, then rank 1's, twice, through the real run() and CopyEngineLink with CPU pads:
    rank 1 reads each inbox slice only after its signal, its output is both stages on x, every
    signal is consumed once, and the inbox-free signal rank 1 leaves lets rank 0's next call go."""
    mod = import_module_at(CH17 / "optimized_pipeline_inference_multigpu_copyengine.py")
    monkeypatch.setattr(torch.ops.symm_mem, "stream_write_value32_", lambda pad, slot, val: pad.__setitem__(slot, val))
    monkeypatch.setattr(torch.cuda, "current_stream", _Stream)
    monkeypatch.setattr(torch.cuda, "stream", lambda stream: contextlib.nullcontext())
    torch.manual_seed(0)
    m, x = 4, torch.randn(12, 8)
    stages = [nn.Sequential(nn.Linear(8, 8, bias=False), nn.GELU(), nn.Linear(8, 8, bias=False), nn.GELU())
              .requires_grad_(False) for _ in range(2)]
    pads, inboxes = [torch.zeros(2 * (m + 1), dtype=torch.int64) for _ in range(2)], [torch.full_like(x, torch.nan) for _ in range(2)]
    ranks = []
    for r in range(2):
        bench = mod.CopyEnginePipeline()
        bench.rank, bench.micro_batches, bench.stage, bench.x, bench.inbox = r, m, stages[r], x, inboxes[r]
        bench.blocks = list(zip(bench.stage[0::2], bench.stage[1::2], strict=True))
        bench.link = mod.CopyEngineLink(_FakeHandle(r, pads[r]), inboxes[1 - r], pads[1 - r], _Stream())
        ranks.append(bench)
    pads[0][2 * m + 1] = 1  # setup: rank 1 marks its inbox free
    for _ in range(2):
        first, second = ranks[0].run(), ranks[1].run()
        torch.testing.assert_close(first, stages[0](x))
        torch.testing.assert_close(second, stages[1](stages[0](x)))
        assert pads[1].sum() == 0 and pads[0].tolist() == [0] * (2 * m + 1) + [1]
    with pytest.raises(AssertionError, match="signal 0 from 0"):
        ranks[1].run()  # nothing pushed: rank 1 must not read the inbox
