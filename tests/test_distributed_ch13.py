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
from triton_cpu import compile_sm90, cuobjdump, resource_usage, run_interpreted

from aisp.harness.benchmark import unmet_requirements
from aisp.harness.options import RunOptions
from aisp.harness.verify import compare, detach_copy

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


def test_ring_on_its_own_group_matches_allgather_on_every_rank(suite):
    """The priority variant: its group made in setup (twice: two seeds) and the blocks sent on it."""
    ring = suite["context_parallel"]["optimized_context_parallel_priority"]
    assert ring["verdict"] in ("ok", "inconclusive", "slower"), ring["reason"]
    assert "each of 3 ranks: matches that rank's baseline" in ring["verification"]["checks"]
    assert ring["verification"]["max_abs_err"] < 1e-5


def test_pulled_variant_falls_back_to_the_ring_on_gloo(suite):
    """The pulled variant on gloo (no symmetric memory, three ranks): the ring with the merge, verified
    on every rank (two seeds, a refilled call), as the other rings."""
    ring = suite["context_parallel"]["optimized_context_parallel_pulled"]
    assert ring["verdict"] in ("ok", "inconclusive", "slower"), ring["reason"]
    assert "each of 3 ranks: matches that rank's baseline" in ring["verification"]["checks"]
    assert ring["verification"]["max_abs_err"] < 1e-5


def test_pulled_variant_shares_the_pair_and_documents_its_estimate():
    pulled, base = _ch13("optimized_context_parallel_multigpu_pulled"), _ch13("baseline_context_parallel_multigpu")
    bench = pulled.get_benchmark()
    assert bench.workload is base.WORKLOAD and bench.inputs == ("q", "k", "v")
    assert "inbox" in bench.scratch  # written by every call's pull
    doc = pulled.__doc__
    for part in ("Baseline", "Optimized", "Expect:", "Estimated before:", "Tolerance:",
                 "aisp bench run -t ch13:context_parallel_multigpu"):
        assert part in doc, part
    assert len(Path(pulled.__file__).read_text().splitlines()) < 150


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


MERGE_CASES = """
import torch
from context_parallel_common import merge
from context_parallel_merge import fused_merge
torch.manual_seed(0)
cases = [((2, 3, 37, 16), torch.float32, False), ((1, 2, 70, 128), torch.bfloat16, False), ((1, 3, 40, 32), torch.float32, True)]
for shape, dtype, transposed in cases:  # 37 and 70 rows a head: the last program's rows are masked
    if transposed:  # FlashAttention's layout: a [B, S, H, D] tensor seen as [B, H, S, D]
        a, b = (torch.randn(shape[0], shape[2], shape[1], shape[3]).transpose(1, 2) for _ in range(2))
    else:
        a, b = (torch.randn(shape, dtype=dtype) for _ in range(2))
    lse_a, lse_b = torch.randn(shape[:3]) * 3, torch.randn(shape[:3]) * 3
    want_out, want_lse = merge(a.clone(), lse_a.clone(), b, lse_b)
    exact = a.double() + torch.sigmoid(lse_b.double() - lse_a.double()).unsqueeze(-1) * (b.double() - a.double())
    into, into_lse = a.clone(), lse_a.clone()
    out, lse = fused_merge(into, into_lse, b, lse_b)
    assert out is into and lse is into_lse, "merged in place over the running result"
    assert torch.allclose(lse, torch.logaddexp(lse_a, lse_b), atol=1e-5, rtol=1e-6)
    # the interpreter truncates fp32 -> bf16 (a GPU rounds to nearest): within 2 bf16 ulps of the exact value
    step = 2.0 ** -7 if dtype == torch.bfloat16 else 1e-6
    err = (out.double() - exact).abs() / exact.abs().clamp_min(1.0)
    assert err.max() <= 2 * step, (shape, dtype, err.max().item())
    assert (out.double() - want_out.double()).abs().max() <= 4 * step * exact.abs().max()
print("interpreted ok")
"""


def test_fused_merge_matches_the_merge_under_the_interpreter():
    """context_parallel_merge's kernel against the five-op merge and an fp64 one: ragged rows, bf16,
    FlashAttention's strided layout; in place over the running output and LSE."""
    run_interpreted(f"import sys\nsys.path.insert(0, {str(CH13)!r})\n" + MERGE_CASES, timeout=300)


def test_merge_kernel_compiles_for_sm90_with_wide_accesses_and_no_spills():
    """As the pair launches it (bf16 outputs of contiguous [B, H, S, 128], fp32 LSE): 16-byte loads and
    stores of the outputs, no local memory."""
    strides = ("o_b", "o_h", "o_s", "k_b", "k_h", "k_s", "l_b", "l_h", "l_s", "m_b", "m_h", "m_s")  # the kernel's order
    sig = {"out_ptr": "*bf16", "blk_ptr": "*bf16", "lse_ptr": "*fp32", "blk_lse_ptr": "*fp32",
           "rows": "i32", "heads": "i32", "seq": "i32", **dict.fromkeys(strides, "i32")}
    kernel = compile_sm90("ch13/context_parallel_merge:_merge_rows", sig, {"ROWS": 32, "DIM": 128}, {"num_warps": 4},
                          divisible=("rows", "seq", *(s for s in strides if s not in ("l_s", "m_s"))))
    usage = resource_usage(kernel)
    assert usage.get("LOCAL", 0) == 0 and usage.get("STACK", 0) == 0 and usage["REG"] <= 128, usage
    sass = cuobjdump(kernel, "-sass")
    assert "LDG.E.128" in sass and "STG.E.128" in sass


@pytest.mark.gpu
def test_fused_merge_of_two_cudnn_blocks_matches_one_attention_on_gpu():
    """The pair's size on one GPU: the two halves' attention (the kernel SDPA picks: cuDNN on an H200)
    merged by the kernel equals one attention over the whole sequence (the baseline's math), at the
    pair's tolerance, and equals the five-op merge to a bf16 rounding."""
    common, fused = _ch13("context_parallel_common"), _ch13("context_parallel_merge")
    gen = torch.Generator(device="cuda").manual_seed(3)
    q, k0, v0, k1, v1 = (torch.randn(1, 32, 4096, 128, device="cuda", dtype=torch.bfloat16, generator=gen)
                         for _ in range(5))
    first, second = common.block_attention(q, k0, v0), common.block_attention(q, k1, v1)
    want = common.merge(first[0].clone(), first[1].clone(), *second)[0]
    out = fused.fused_merge(first[0].clone(), first[1].clone(), *second)[0]
    whole = torch.nn.functional.scaled_dot_product_attention(q, torch.cat([k0, k1], 2), torch.cat([v0, v1], 2))
    compare(detach_copy(whole), detach_copy(out), _ch13("baseline_context_parallel_multigpu").WORKLOAD)
    assert (out.float() - want.float()).abs().max() <= 2.0 ** -6 * want.float().abs().max()


def test_priority_group_carries_the_ring_and_is_destroyed(tmp_path):
    """Two gloo ranks: priority_group() is a new group of both ranks; the ring on it with the merge
    kernel's fallback equals the all-gather; destroyed before the default group, both ranks exit 0
    (kept in a module cache past it, a rank aborted at exit under load)."""
    script = tmp_path / "group.py"
    script.write_text(f"""import sys
sys.path.insert(0, {str(CH13)!r})
import torch, torch.distributed as dist
from context_parallel_common import allgather_attention, priority_group, ring_attention, ring_buffers
from context_parallel_merge import fused_merge
dist.init_process_group("gloo")
group = priority_group()
assert group is not dist.group.WORLD and dist.get_world_size(group) == 2
torch.manual_seed(dist.get_rank())
q, k, v = (torch.randn(1, 2, 24, 16) for _ in range(3))
ring = ring_attention(q, k, v, ring_buffers(k, v), group=group, merge_block=fused_merge)
assert torch.allclose(ring, allgather_attention(q, k, v), atol=1e-5), (ring - allgather_attention(q, k, v)).abs().max()
dist.destroy_process_group(group)
dist.barrier()
dist.destroy_process_group()
print("ok")
""")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", str(script)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


PULLED_ON_GPUS = """
import json, sys
sys.path.insert(0, {ch13!r})
import torch
import torch.distributed as dist
from baseline_context_parallel_multigpu import AllGatherAttention
from optimized_context_parallel_multigpu_priority import PriorityRingAttention
from optimized_context_parallel_multigpu_pulled import PulledRingAttention
from aisp.harness.execute import guarded_run
from aisp.harness.verify import compare, poison_scratch, refill, tensor_attributes
from aisp.kits.multirank import script_init

device = script_init("cuda")
benches = [AllGatherAttention(), PriorityRingAttention(), PulledRingAttention()]
known = []
for bench in benches:
    bench.device, bench.seed = device, 0
    bench.setup()
    known.append(set(tensor_attributes(bench)))
base, prio, pulled = benches
assert pulled.link is not None, "the pulled path (symmetric memory) on NCCL"
report = {{}}
for round in ("first", "refilled"):
    if round == "refilled":  # as the harness's checked call: scratch poisoned, inputs refilled in place
        for bench, names in zip(benches, known):
            poison_scratch(bench, names)
            refill(bench, seed=4242)
    want, ring, got = (guarded_run(b) for b in benches)
    compare(want, got, base.workload)  # raises outside the pair's tolerance
    gap = (got[0][1].float() - ring[0][1].float()).abs().max().item()
    top = ring[0][1].float().abs().max().item()
    report[round] = {{"vs_priority": gap, "top": top, "out": got[0][1].float().norm().item()}}
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
    pulled.run()
    torch.cuda.synchronize(device)
names = [e.name for e in prof.events()]
report["nccl"] = [n for n in names if n.startswith(("ncclDevKernel", "ncclKernel"))]  # send/recv kernels
report["memcpy"] = [n for n in names if "memcpy" in n.lower()]
json.dump(report, open({out!r} + f"/rank{{dist.get_rank()}}.json", "w"))
for bench in benches:
    bench.teardown()
dist.barrier()
dist.destroy_process_group()
"""


@pytest.mark.gpu
@pytest.mark.multigpu
def test_pulled_variant_matches_the_baseline_on_two_gpus(tmp_path):
    """The pair's size on two GPUs (NCCL, symmetric memory): the pulled variant against the all-gather
    baseline on each rank at the pair's tolerance, again after poisoned scratch and refilled inputs
    (the peer then pulls the refilled K/V), equal to the _priority ring to a bf16 rounding (the same
    blocks and merge); its call launches no NCCL kernel and moves the K/V with one memcpy."""
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    script = tmp_path / "pulled.py"
    script.write_text(PULLED_ON_GPUS.format(ch13=str(CH13), out=str(tmp_path)))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", str(script)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for r in range(2):
        report = json.loads((tmp_path / f"rank{r}.json").read_text())
        for round in ("first", "refilled"):
            assert report[round]["vs_priority"] <= 2.0 ** -7 * report[round]["top"], (r, report)
        assert report["first"]["out"] != report["refilled"]["out"], (r, report)  # the refill drove it
        assert not report["nccl"] and report["memcpy"], (r, report)


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
