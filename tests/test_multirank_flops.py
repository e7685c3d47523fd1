"""A multi-GPU pair declares one ``run()``'s FLOPs summed over all its ranks (``Workload.flops``): its
ceiling is world x one GPU's peak. Where the work is matmuls and attention that PyTorch's
``FlopCounterMode`` counts, this is checked: each pair's chapter accounting at CPU sizes, one call
of a variant that does no rank's work twice, on two gloo ranks under torchrun (this file's
``__main__``, in ranks forked from torchrun's agent), the ranks' counts summed. A per-rank
declaration reads about 1/world of that sum; a fixture declaring one rank's FLOPs shows the check
fires. Bytes cannot be counted this way (the ch02 and ch04 NVLink pairs), and pairs that declare no
FLOPs are not listed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import REPO

import aisp

WORLD = 2
LOW, HIGH = 0.75, 1.5
"""Declared / counted over the ranks: a summed declaration lands near 1 (the counter counts masked
attention in full and a replicated LM head twice; the first layer's input gradient, which autograd
does not compute, neither counts nor, since 2026-11-29, ch04's declarations); one rank's lands near
1 / WORLD = 0.5."""
GLOO = aisp.Requirements(ranks=WORLD)
Case = Callable[[Callable[[str, str], Any]], tuple[type, aisp.Workload]]


def _ch04_step(load: Callable[[str, str], Any], module: str, cls: str) -> tuple[type, aisp.Workload]:
    step = load("ch04", "ch04_common").step_workload(GLOO, batch=16, width=32, layers=2, autocast=False)
    return getattr(load("ch04", module), cls), step


def _ch04_tensor_parallel(load: Callable[[str, str], Any]) -> tuple[type, aisp.Workload]:
    mod = load("ch04", "baseline_tensor_parallel_multigpu")
    return mod.BlockingTensorParallel, mod.tp_workload(GLOO, tokens_per_rank=8, hidden=16, ffn=32, dtype="fp32")


def _ch04_pipeline(load: Callable[[str, str], Any]) -> tuple[type, aisp.Workload]:
    work = load("ch04", "ch04_pipeline").pp_workload(GLOO, width=16, layers_per_stage=2, micro_batches=4,
                                                     micro_batch=3, dtype="fp32")
    return load("ch04", "baseline_pipeline_parallel_multigpu").Baseline, work


def _ch13_context_parallel(load: Callable[[str, str], Any]) -> tuple[type, aisp.Workload]:
    work = load("ch13", "context_parallel_common").cp_workload(requires=GLOO, batch=2, heads=3, seq_per_rank=48,
                                                                head_dim=16, world=WORLD, dtype="fp32")
    return load("ch13", "baseline_context_parallel_multigpu").AllGatherAttention, work


def _ch15_disagg(load: Callable[[str, str], Any]) -> tuple[type, aisp.Workload]:
    from aisp.kits.llm import LLMConfig, StreamConfig

    base = load("ch15", "baseline_disagg_prefill_decode_multigpu")
    stream = StreamConfig(requests=6, prompt_mean=16, output_mean=6, spread=0.6, max_prompt=40, max_output=12, vocab=256)
    tiny = LLMConfig(vocab=256, dim=64, layers=2, heads=4, kv_heads=2, ffn=128)
    small = load("ch15", "ch15_disagg").DisaggWorkload(model=tiny, stream=stream, slots=2, group=2, prefill_budget=64)
    return base.Colocated, base.disagg_workload(small, GLOO, "fp32")


def _ch16_tp_decode(load: Callable[[str, str], Any]) -> tuple[type, aisp.Workload]:
    from aisp.kits.llm import LLMConfig

    tiny = LLMConfig(vocab=256, dim=64, layers=2, heads=4, kv_heads=2, ffn=128)
    small = load("ch16", "ch16_decode").DecodeWorkload(model=tiny, batch=2, prompt=12, steps=6)
    work = load("ch16", "baseline_tp_decode_multigpu").tp_workload(small, GLOO, "fp32")
    return load("ch16", "optimized_tp_decode_multigpu").TensorParallelDecode, work  # the baseline is a replica


def _ch17_pipeline(load: Callable[[str, str], Any]) -> tuple[type, aisp.Workload]:
    mod = load("ch17", "baseline_pipeline_inference_multigpu")
    return mod.PipelineStage, mod.pipeline_workload(GLOO, width=32, blocks_per_stage=2, batch=24, micro_batches=4,
                                                    dtype="fp32")


def _ch17_experts(load: Callable[[str, str], Any]) -> tuple[type, aisp.Workload]:
    work = load("ch17", "ch17_ep").ep_workload(GLOO, tokens=64, dim=32, ffn=16, experts=8, top_k=2)
    return load("ch17", "baseline_topology_aware_moe_multigpu").RoundRobinExperts, work


def _ch20_ddp(load: Callable[[str, str], Any]) -> tuple[type, aisp.Workload]:
    from aisp.kits.gpt import GPTConfig

    work = load("ch20", "ch20_ddp").ddp_workload(GLOO, model=GPTConfig(vocab=128, seq=16, dim=32, heads=4, layers=2),
                                                 batch=4)
    return load("ch20", "optimized_ddp_training_e2e_multigpu_s1_ddp").DDPFp32, work


def _per_rank_fixture(load: Callable[[str, str], Any]) -> tuple[type, aisp.Workload]:
    """Wrong on purpose: the tensor-parallel MLP declaring one rank's FLOPs (as it did before)."""
    cls, work = _ch04_tensor_parallel(load)
    return cls, replace(work, flops=work.flops / WORLD)


CASES: dict[str, Case] = {
    "ch04:dataparallel_multigpu": lambda load: _ch04_step(load, "optimized_dataparallel_multigpu", "Optimized"),
    "ch04:ddp_overlap_multigpu": lambda load: _ch04_step(load, "baseline_ddp_overlap_multigpu", "Baseline"),
    "ch04:tensor_parallel_multigpu": _ch04_tensor_parallel,
    "ch04:pipeline_parallel_multigpu": _ch04_pipeline,
    "ch13:context_parallel_multigpu": _ch13_context_parallel,
    "ch15:disagg_prefill_decode_multigpu": _ch15_disagg,
    "ch16:tp_decode_multigpu": _ch16_tp_decode,
    "ch17:pipeline_inference_multigpu": _ch17_pipeline,
    "ch17:topology_aware_moe_multigpu": _ch17_experts,
    "ch20:ddp_training_e2e_multigpu": _ch20_ddp,
    "fixture:per_rank": _per_rank_fixture,
}
"""Each pair's case: (a variant that does no rank's work twice, its chapter's accounting at CPU sizes)."""


def summed(declared: float, counted: float) -> bool:
    """Whether a declaration reads as the ranks' sum of ``counted`` (see LOW, HIGH)."""
    return LOW <= declared / counted <= HIGH


@pytest.fixture(scope="module")
def counts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, float]]:
    """Every case counted on two gloo ranks (one torchrun launch): declared and counted FLOPs. The ranks
    are forked from torchrun's agent, which runs this file in each (--start-method fork --run-path):
    started afresh, each rank imported torch again (~4 s of CPU a rank); what is counted is the same.
    This folder is on their path for conftest, as it is on a script's. OMP_NUM_THREADS is given as
    torchrun gives it to ranks it starts afresh (1 where unset): it sets it after importing torch, too
    late for a forked rank, and two ranks of two threads each on two cores took 2.7x the CPU."""
    out = tmp_path_factory.mktemp("flops") / "counts.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={WORLD}",
           "--start-method", "fork", "--run-path", __file__, str(out)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(Path(__file__).parent)]),
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize("target", [t for t in CASES if not t.startswith("fixture:")])
def test_a_multi_gpu_pair_declares_its_ranks_summed_flops(counts: dict[str, dict[str, float]], target: str) -> None:
    found = counts[target]
    assert found["counted"] > found["rank0"] > 0, found  # both ranks computed
    assert summed(found["declared"], found["counted"]), \
        f"{target} declares {found['declared']:.4g} FLOP; its {WORLD} ranks computed {found['counted']:.4g}"


def test_a_per_rank_declaration_is_caught(counts: dict[str, dict[str, float]]) -> None:
    found = counts["fixture:per_rank"]
    assert not summed(found["declared"], found["counted"])
    assert found["declared"] / found["counted"] == pytest.approx(1 / WORLD, rel=0.25)


def grouped_mm_flops(a_shape: torch.Size, b_shape: torch.Size, *args: Any, out_shape: torch.Size, **kwargs: Any) -> int:
    """``torch._grouped_mm`` (the MoE kit's expert GEMMs), which FlopCounterMode does not count: every
    output element is a dot product over the shared dimension, 2 FLOPs a term."""
    return 2 * out_shape.numel() * a_shape[-1]


def count_case(case: Case) -> tuple[float, float]:
    """(declared FLOPs, this rank's counted FLOPs of one ``run()``) of one case on this rank."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    from aisp.harness.loader import import_module_at

    cls, workload = case(lambda chapter, module: import_module_at(REPO / chapter / f"{module}.py"))
    bench = cls()
    bench.device, bench.seed, bench.workload = torch.device("cpu"), 0, workload
    bench.setup()
    grouped = {torch.ops.aten._grouped_mm: grouped_mm_flops} if hasattr(torch.ops.aten, "_grouped_mm") else {}
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False, custom_mapping=grouped) as counter:
        bench.run()  # the MATH backend: CPU SDPA kernels go uncounted
    bench.teardown()
    return workload.flops, float(counter.get_total_flops())


def count_all(out: Path) -> None:
    """Rank 0 writes each case's declared FLOPs, the ranks' summed count and its own."""
    from aisp.kits.multirank import script_init, world_and_rank

    script_init("cpu")
    found = {}
    for target, case in CASES.items():
        declared, mine = count_case(case)
        total = torch.tensor([mine], dtype=torch.float64)
        torch.distributed.all_reduce(total)
        found[target] = {"declared": declared, "counted": total.item(), "rank0": mine}
    if world_and_rank()[1] == 0:
        out.write_text(json.dumps(found))
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    count_all(Path(sys.argv[1]))
