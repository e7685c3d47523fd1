"""Chapter 4 on the CPU: discovery, headers and skips; cpu_reduction verified; the multi-rank pairs'
logic at small sizes on two gloo ranks (this file, run under torchrun, checks each pair as the
harness does: outputs per rank, inputs unchanged, scratch poisoned and inputs refilled); the
dataparallel pair through the real harness path; nccl_sweep.py's arithmetic and a gloo run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest
import torch
from conftest import REPO, rank_hints
from refill_check import check_refilled_pair

import aisp
from aisp.harness.benchmark import unmet_requirements
from aisp.harness.discovery import pairs_in
from aisp.harness.loader import import_module_at

CH04 = REPO / "ch04"
PAIRS = ("cpu_reduction", "dataparallel_multigpu", "ddp_overlap_multigpu", "device_initiated_put_multigpu",
         "gradient_bucketing_multigpu", "gradient_compression_multigpu", "pipeline_parallel_multigpu",
         "small_allreduce_multigpu", "tensor_parallel_multigpu", "zero_sharding_multigpu")
SMALL = {  # the multi-rank pairs at CPU sizes
    "dataparallel_multigpu": {"batch": 16, "width": 32, "layers": 2},
    "ddp_overlap_multigpu": {"batch": 16, "width": 32, "layers": 2},
    "gradient_bucketing_multigpu": {"width": 8, "layers": 2, "bucket_mb": 0.0005},
    "gradient_compression_multigpu": {"numel": 4096},
    "zero_sharding_multigpu": {"params": 1024},
    "tensor_parallel_multigpu": {"tokens_per_rank": 8, "hidden": 16, "ffn": 32, "dtype": "fp32",
                                 "precision": "fp32"},
    "pipeline_parallel_multigpu": {"width": 16, "layers_per_stage": 2, "micro_batches": 4, "micro_batch": 3,
                                   "dtype": "fp32", "precision": "fp32"},
}
GLOO = aisp.Requirements(ranks=2)
CPU = torch.device("cpu")
EXTRA_VARIANTS = {"tensor_parallel_pulled": ("tensor_parallel_multigpu", "optimized_tensor_parallel_multigpu_pulled"),
                  "ddp_overlap_pulled": ("ddp_overlap_multigpu", "optimized_ddp_overlap_multigpu_pulled"),
                  "gradient_bucketing_pulled": ("gradient_bucketing_multigpu",
                                                "optimized_gradient_bucketing_multigpu_pulled"),
                  "gradient_bucketing_tapered": ("gradient_bucketing_multigpu",
                                                 "optimized_gradient_bucketing_multigpu_tapered"),
                  "zero_sharding_pipelined": ("zero_sharding_multigpu", "optimized_zero_sharding_multigpu_pipelined"),
                  "gradient_compression_pulled": ("gradient_compression_multigpu",
                                                  "optimized_gradient_compression_multigpu_pulled")}
"""Further optimized variants the gloo run checks against their pair's baseline (report key: pair, module)."""


def load(module: str) -> ModuleType:
    return import_module_at(CH04 / f"{module}.py")


def test_the_harness_discovers_the_pairs() -> None:
    assert sorted(p.name for p in pairs_in(CH04)) == sorted(PAIRS)


@pytest.mark.parametrize("name", PAIRS)
def test_variant_shares_workload_and_documents_itself(name: str) -> None:
    base, opt = load(f"baseline_{name}"), load(f"optimized_{name}")
    bench = opt.get_benchmark()
    assert bench.workload is base.WORKLOAD and bench.inputs == base.get_benchmark().inputs and bench.inputs
    extra = [load(module) for pair, module in EXTRA_VARIANTS.values() if pair == name]
    for mod in extra:
        assert mod.get_benchmark().workload is base.WORKLOAD and mod.get_benchmark().inputs == bench.inputs
    for doc in (base.__doc__, opt.__doc__, *(mod.__doc__ for mod in extra)):
        assert any(form in doc for form in ("Expect (estimate, not yet measured", "Expect (measured",
                                            "Expect: measured (", "Expect: not yet measured. Estimate (arithmetic, not a measurement):"))
        assert f"aisp bench run -t ch04:{name}" in doc


@pytest.mark.parametrize("name", [p for p in PAIRS if p.endswith("_multigpu")])
def test_multigpu_pairs_skip_without_two_gpus(name: str, monkeypatch) -> None:
    requires = load(f"baseline_{name}").WORKLOAD.requires
    assert requires.world_size == 2
    assert "CUDA" in unmet_requirements(requires, torch.device("cpu"))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert unmet_requirements(requires, torch.device("cuda")) == "needs 2 GPUs; 1 present"


def test_cpu_reduction_matches_on_cpu() -> None:
    base, opt = load("baseline_cpu_reduction"), load("optimized_cpu_reduction")
    small = replace(base.WORKLOAD, shards=5, numel=1000)
    benches = [m.get_benchmark() for m in (base, opt)]
    for bench in benches:
        bench.workload, bench.device = small, torch.device("cpu")
    check_refilled_pair(*benches, small)


def test_bucket_plan_respects_the_cap() -> None:
    plan = load("optimized_gradient_bucketing_multigpu").buckets
    assert plan([10, 10, 10, 30, 5], 25) == [[0, 1], [2], [3], [4]]
    assert plan([100], 25) == [[0]]


def test_pull_chunks_cover_the_buffer_and_shrink_at_the_end() -> None:
    plan = load("optimized_gradient_bucketing_multigpu_pulled").pull_chunks
    for total, cap in ((1, 1000), (255, 1000), (257, 64), (85_054_464, 6_250_000), (1_579_520, 250_000)):
        bounds = plan(total, cap)
        assert bounds[0][0] == 0 and bounds[-1][1] == total
        assert all(a < b for a, b in bounds) and all(bounds[i][1] == bounds[i + 1][0] for i in range(len(bounds) - 1))
        assert all(b % 256 == 0 for _, b in bounds[:-1]) and all(b - a <= cap + 255 for a, b in bounds)
    gpt2 = [b - a for a, b in plan(85_054_464, 6_250_000)]  # the pair's 340 MB at 25 MB
    assert len(gpt2) == 16 and gpt2[-1] < 800_000 and gpt2[-3:] == sorted(gpt2[-3:], reverse=True)


def test_tapered_chunks_cover_the_buffer_and_shrink_by_the_factor() -> None:
    """optimized_gradient_bucketing_multigpu_tapered's plan: in order, bounds on ALIGN, no chunk over
    the cap (+ ALIGN), each but the first at most GROWTH x the next (so its mean hides under the next
    pull); the pair's 340 MB in 10 pulls of <= 100 MB, the last ~3 MB."""
    tapered = load("optimized_gradient_bucketing_multigpu_tapered")
    for total, bucket in ((1, 1), (255, 10), (257, 64), (1000, 1), (3_160_000, 125_000), (85_054_464, 6_250_000)):
        bounds = tapered.plan(total, bucket)
        cap = max(tapered.BUCKETS_A_CHUNK * bucket, 256)
        sizes = [b - a for a, b in bounds]
        assert bounds[0][0] == 0 and bounds[-1][1] == total and all(n > 0 for n in sizes)
        assert all(bounds[i][1] == bounds[i + 1][0] and bounds[i][1] % 256 == 0 for i in range(len(bounds) - 1))
        assert max(sizes) < cap + 256
        assert all(sizes[i] <= tapered.GROWTH * sizes[i + 1] + 256 for i in range(1, len(sizes) - 1))
    sizes = [b - a for a, b in tapered.plan(85_054_464, 6_250_000)]  # the pair's 340 MB, 25 MB buckets
    assert len(sizes) == 10 and 25_000_000 <= max(sizes) < 25_000_256 and 700_000 < sizes[-1] < 800_000
    assert sizes[1:] == sorted(sizes[1:], reverse=True)


def test_compression_chunks_ramp_up_and_down() -> None:
    """optimized_gradient_compression_multigpu_pulled's chunks: they cover the buffer in order, bounds on
    ALIGN, small first (the exposed cast) and last (the exposed mean), CAP in the middle."""
    pulled = load("optimized_gradient_compression_multigpu_pulled")
    for total in (1, 255, 257, 1000, 4096, 2**22 + 77, 64 * 2**20):
        bounds = pulled.plan(total)
        assert bounds[0][0] == 0 and bounds[-1][1] == total and all(a < b for a, b in bounds)
        assert all(bounds[i][1] == bounds[i + 1][0] and bounds[i][1] % 256 == 0 for i in range(len(bounds) - 1))
    sizes = [b - a for a, b in pulled.plan(64 * 2**20)]  # the pair's 64 Mi values
    assert len(sizes) == 14 and max(sizes) == pulled.CAP and sizes.count(pulled.CAP) == 6
    assert sizes[:3] == [2**20, 2**21, 2**22] and sizes[-4:] == [2**22, 2**21, 2**20, 2**19]


def test_pulled_bucket_layout_averages_each_tensor() -> None:
    """optimized_gradient_bucketing_multigpu_pulled's layout and chunked mean on a CPU: gradients as
    views of row 0 (backward order), the peer's in row 1, chunks that cut through tensors; each
    returned view is (mine + peer's) / 2 of its tensor, bit for bit."""
    pulled, base = load("optimized_gradient_bucketing_multigpu_pulled"), load("baseline_gradient_bucketing_multigpu")
    w = replace(base.WORKLOAD, width=16, layers=2)
    gen = torch.Generator().manual_seed(7)
    mine, peer = ([torch.randn(s, generator=gen) for s in base.shapes(w)] for _ in range(2))
    total = sum(t.numel() for t in mine)
    rows, out = torch.full((2, total), float("nan")), torch.full((total,), float("nan"))
    for r, grads in enumerate((mine, peer)):
        for view, t in zip(pulled.bucket_views(rows[r], list(reversed(grads))), grads, strict=True):
            view.copy_(t)
    assert torch.equal(rows[0, : mine[-1].numel()], mine[-1].reshape(-1))  # backward order: last first
    bounds = pulled.pull_chunks(total, 700)
    seen: list[int] = []
    pulled.average(rows, out, bounds, seen.append)
    assert seen == list(range(len(bounds))) and len(bounds) > 5
    for got, a, b in zip(pulled.bucket_views(out, list(reversed(mine))), mine, peer, strict=True):
        assert torch.equal(got, (a + b) / 2)


def test_bubble_fraction() -> None:
    bubble = import_module_at(CH04 / "ch04_pipeline.py").bubble
    assert bubble(2, 8) == pytest.approx(1 / 9) and bubble(4, 4) == pytest.approx(3 / 7) and bubble(1, 8) == 0


def test_pipeline_declares_a_stage_weights_and_gradients_per_rank() -> None:
    """resident_bytes = one stage's parameters and the gradients a step leaves on them, counted on a CPU
    stage at the pair's size (the run stores the largest rank's peak; every stage is the same size)."""
    w = load("baseline_pipeline_parallel_multigpu").WORKLOAD
    stage = load("ch04_common").mlp(w.width, w.layers_per_stage, torch.Generator().manual_seed(0),
                                    torch.device("cpu"), torch.bfloat16)
    stage(torch.ones(1, w.width, dtype=torch.bfloat16)).float().sum().backward()
    held = [t for p in stage.parameters() for t in (p, p.grad)]
    assert w.resident_bytes == sum(t.numel() * t.element_size() for t in held)


def _torchrun(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=150,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


@pytest.fixture(scope="module")
def launched(tmp_path_factory) -> tuple[Path, str]:
    """One torchrun launch of this file's ``__main__`` on two gloo ranks: nccl_sweep.py's sweep, then
    every multi-rank pair checked. Returns the output folder and rank 0's stdout."""
    out = tmp_path_factory.mktemp("ranked")
    proc = _torchrun(__file__, str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, proc.stdout


@pytest.fixture(scope="module")
def ranked(launched) -> list[dict]:
    """The pair checks' report of each rank."""
    return [json.loads((launched[0] / f"rank{r}.json").read_text()) for r in range(2)]


@pytest.mark.parametrize("name", [*SMALL, *EXTRA_VARIANTS])
def test_pair_matches_on_every_rank(ranked, name: str) -> None:
    for report in ranked:
        result = report[name]
        assert result.get("error") is None, result
        assert result["driven"], f"{name}: the baseline's output ignores its declared inputs"
        assert result.get("exact", True), f"{name}: not the exact mean of the ranks' bf16 gradients"


def test_gradients_without_sync_fail_verification(ranked) -> None:
    assert all("outside tolerance" in report["no_sync"]["error"] for report in ranked)


def test_bf16_all_reduce_error_is_small_but_real(ranked) -> None:
    for report in ranked:
        err = report["gradient_compression_multigpu"]["rel_l2"]
        assert 1e-4 < err < 5e-3, err


def test_nccl_sweep_runs_on_gloo(launched) -> None:
    out, stdout = launched
    rows = json.loads((out / "sweep.json").read_text())
    assert [(r["op"], r["bytes"]) for r in rows[:4]] == [("all_reduce", 8), ("all_reduce", 64), ("all_reduce", 512),
                                                         ("all_reduce", 4096)]
    assert {r["op"] for r in rows} == {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}
    assert all(r["time_us"] > 0 and r["ranks"] == 2 for r in rows)
    assert "busbw (GB/s)" in stdout and (out / "sweep.png").stat().st_size > 1000


def test_bus_bandwidth_as_nccl_tests_defines_it() -> None:
    sweep = load("nccl_sweep")
    row = sweep.row("all_reduce", 2**30, 8, 0.01)
    assert row.algbw_gbs == pytest.approx(2**30 / 0.01 / 1e9) and row.busbw_gbs == pytest.approx(row.algbw_gbs * 1.75)
    assert sweep.row("all_gather", 1000, 4, 1e-6).busbw_gbs == pytest.approx(0.75)
    assert sweep.sizes(8, 2**30)[-1] == 2**30 and len(sweep.sizes(8, 2**30)) == 28
    assert sweep.parse_size("64K") == 65536 and sweep.parse_size("1G") == 2**30 and sweep.parse_size("8") == 8
    assert sweep.collective("all_gather", 8, 4, torch.device("cpu"))[0] == 16  # one fp32 per rank at least


FIXTURE = """from dataclasses import replace
import aisp
from {module} import WORKLOAD, {cls}
SMALL = replace(WORKLOAD, requires=aisp.Requirements(ranks=2), batch=16, width=32, layers=2)
class Small({cls}):
    workload = SMALL
def get_benchmark():
    return Small()
"""


@pytest.mark.skipif(not os.environ.get("AISP_CH04_HARNESS"), reason="set AISP_CH04_HARNESS=1: ~60 s on 2 busy cores")
def test_dataparallel_through_the_harness(tmp_path, monkeypatch) -> None:
    """The real path (torchrun, per-rank verification and refill, slowest-rank timing), where rank 1
    returns only the loss and rank 0 the loss and the gradients. Opt-in: it starts a worker, torchrun
    and two ranks, which would take this file past its time budget; ``check_pair`` below runs the same
    checks per rank for every pair in one launch."""
    from aisp.harness.discovery import resolve_targets
    from aisp.harness.options import RunOptions
    from aisp.harness.runner import run_suite

    pairs = tmp_path / "pairs"
    pairs.mkdir()
    for kind, cls in (("baseline", "Baseline"), ("optimized", "Optimized")):
        text = FIXTURE.format(module=f"{kind}_dataparallel_multigpu", cls=cls)
        (pairs / f"{kind}_dp.py").write_text(text)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(CH04), str(REPO)]))
    options = RunOptions(iterations=3, warmup=1, warmup_s=0.0, device="cpu", artifacts_dir=tmp_path / "art")
    found = resolve_targets([], pairs, (pairs,))
    results, _ = run_suite(found, options, hooks=rank_hints(found, 2))
    (result,) = results
    ddp = {v["name"]: v for v in result["variants"]}["optimized_dp"]
    assert ddp["verdict"] in ("ok", "inconclusive", "slower"), ddp["reason"]  # tiny sizes on a CPU: the time says nothing
    assert "each of 2 ranks: matches that rank's baseline" in ddp["verification"]["checks"]


def check_pair(base: aisp.Benchmark, opt: aisp.Benchmark, workload: aisp.Workload,
               device: torch.device = CPU) -> dict:
    """What the harness checks on one rank: both outputs match (inputs unchanged, outputs fresh),
    then again after poisoning scratch and refilling the declared inputs; the baseline's changed."""
    from aisp.harness.execute import guarded_run
    from aisp.harness.verify import compare, poison_scratch, refill, tensor_attributes

    try:
        known = {}
        for bench in (base, opt):
            bench.device, bench.seed, bench.workload = device, 0, workload
            bench.setup()
            known[id(bench)] = set(tensor_attributes(bench))
        first = [guarded_run(b) for b in (base, opt)]
        evidence = compare(*first, workload)
        for bench in (base, opt):
            poison_scratch(bench, known[id(bench)])
            refill(bench, seed=4242)
        second = [guarded_run(b) for b in (base, opt)]
        evidence.merge(compare(*second, workload))
        driven = any(not torch.equal(a, b) for (_, a), (_, b) in zip(first[0], second[0], strict=True))
        return {"rel_l2": evidence.rel_l2_err, "driven": driven}
    except AssertionError as exc:  # VerificationError: recorded, and the ranks go on in step
        return {"error": str(exc)}


COMPRESSED = "optimized_gradient_compression_multigpu_pulled"


def is_bf16_mean(bench: aisp.Benchmark) -> bool:
    """``bench``'s last output is (bf16(a) + bf16(b)) / 2 in fp32 of the two ranks' gradients
    (``grads``, as refilled), bit for bit, on this rank: every chunk cast, exchanged and averaged once."""
    grads = [torch.empty_like(bench.grads) for _ in range(2)]
    torch.distributed.all_gather(grads, bench.grads)
    want = (grads[0].bfloat16().float() + grads[1].bfloat16().float()) / 2
    return bool(torch.equal(bench.out, want)) and not torch.equal(want, grads[0])


def check_all(out: Path) -> None:
    from aisp.kits.multirank import script_init, world_and_rank

    script_init("cpu")
    sweep = load("nccl_sweep")
    rows = [sweep.measure(op, n, torch.device("cpu"), 2) for op in sweep.OPS for n in sweep.sizes(8, 4096, 8)]
    if world_and_rank()[1] == 0:
        sweep.print_table(rows)
        sweep.plot(rows, str(out / "sweep.png"))
        (out / "sweep.json").write_text(json.dumps([vars(r) for r in rows]))
    report = {}
    for name, sizes in SMALL.items():
        base, opt = load(f"baseline_{name}"), load(f"optimized_{name}")
        small = replace(base.WORKLOAD, requires=GLOO, **sizes)
        report[name] = check_pair(base.get_benchmark(), opt.get_benchmark(), small)
    for name, (pair, variant) in EXTRA_VARIANTS.items():
        base = load(f"baseline_{pair}")
        small = replace(base.WORKLOAD, requires=GLOO, **SMALL[pair])
        report[name] = check_pair(base.get_benchmark(), opt := load(variant).get_benchmark(), small)
        if variant == COMPRESSED and hasattr(opt, "grads"):  # set up on both ranks: both gather
            report[name]["exact"] = is_bf16_mean(opt)
    dp = load("ch04_dataparallel")

    class NoSync(dp.DDPStep):
        def prepare(self) -> None:
            self.ddp = self.model

    small = replace(load("baseline_ddp_overlap_multigpu").WORKLOAD, requires=GLOO, **SMALL["ddp_overlap_multigpu"])
    report["no_sync"] = check_pair(dp.AllReduceAfterBackward(), NoSync(), small)
    (out / f"rank{world_and_rank()[1]}.json").write_text(json.dumps(report))
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()  # gloo's threads stopped before exit (else, at times, an abort there)


TP_SMALL = {"tokens_per_rank": 1024, "hidden": 1024, "ffn": 4096}
NCCL_CHECKS = (
    ("baseline_tensor_parallel_multigpu", "optimized_tensor_parallel_multigpu", TP_SMALL, False),
    ("baseline_tensor_parallel_multigpu", "optimized_tensor_parallel_multigpu_pulled", TP_SMALL, False),
    # the pulled gradients: symmetric memory, barriers, pulls
    ("baseline_ddp_overlap_multigpu", "optimized_ddp_overlap_multigpu_pulled",
     {"batch": 2048, "width": 1024, "layers": 3}, True),
    # one symmetric bucket, 9 chunked pulls, means
    ("baseline_gradient_bucketing_multigpu", "optimized_gradient_bucketing_multigpu_pulled",
     {"width": 256, "layers": 2, "bucket_mb": 1.0}, True),
    # the same, in 13 tapered pulls (500 K values down to 16 K), the last barrier on the pull stream
    ("baseline_gradient_bucketing_multigpu", "optimized_gradient_bucketing_multigpu_tapered",
     {"width": 256, "layers": 4, "bucket_mb": 0.5}, True),
    # pushes into symmetric memory, signals, Triton, a graph: 16 chunks of 64 K parameters a shard
    ("baseline_zero_sharding_multigpu", "optimized_zero_sharding_multigpu_pipelined", {"params": 2**21}, False),
    # casts into symmetric memory, a barrier and a pull a chunk (14 chunks of 32-512 K values), a graph
    ("baseline_gradient_compression_multigpu", COMPRESSED, {"numel": 2**22}, False),
)
"""check_tensor_parallel_nccl's pairs: (baseline, optimized variant, the small sizes, whether the variant
must match its baseline bit for bit)."""


def check_tensor_parallel_nccl(out: Path) -> None:
    """On two GPUs (NCCL): both optimized tensor-parallel variants, the pulled-gradient DDP variant and
    the pulled gradient buckets and the pipelined ZeRO variant against their baselines at small sizes,
    through their real paths (symmetric memory, barriers and signals, copy-engine pulls and pushes,
    CUDA graphs)."""
    from aisp.kits.multirank import script_init, world_and_rank

    device = script_init("cuda")
    report = {}
    for baseline, optimized, small, exact in NCCL_CHECKS:
        base = load(baseline)
        report[optimized] = check_pair(base.get_benchmark(), opt := load(optimized).get_benchmark(),
                                       replace(base.WORKLOAD, **small), device)
        if exact:
            report[optimized]["exact"] = report[optimized].get("rel_l2") == 0.0
        if optimized == COMPRESSED and hasattr(opt, "grads"):
            report[optimized]["exact"] = is_bf16_mean(opt)
    (out / f"rank{world_and_rank()[1]}.json").write_text(json.dumps(report))
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    if sys.argv[2:] == ["nccl"]:
        check_tensor_parallel_nccl(Path(sys.argv[1]))
    else:
        check_all(Path(sys.argv[1]))


@pytest.mark.multigpu
def test_dataparallel_threads_keep_bf16_only_inside_forward() -> None:
    """nn.DataParallel's replica threads take autocast's on/off but not its dtype: fp16 comes out
    unless autocast is entered inside forward (BF16Forward), as the baseline does."""
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    BF16Forward = load("ch04_dataparallel").BF16Forward  # noqa: N806
    layer = torch.nn.Linear(64, 64).cuda()
    x = torch.randn(8, 64, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        plain = torch.nn.DataParallel(layer, device_ids=[0, 1])(x)
        wrapped = torch.nn.DataParallel(BF16Forward(layer), device_ids=[0, 1])(x)
    assert plain.dtype == torch.float16
    assert wrapped.dtype == torch.bfloat16


def test_pulled_partials_sum_to_the_block() -> None:
    """The pulled variant's split: rank r's output = its own partial + the peer's partial for r's
    tokens (each rank holding a column shard of W1 and the row shard of W2), as the baseline's block."""
    pulled = load("optimized_tensor_parallel_multigpu_pulled")
    gen = torch.Generator().manual_seed(3)
    x = [torch.randn(6, 16, generator=gen) for _ in range(2)]
    w1, w2 = torch.randn(16, 32, generator=gen) / 4, torch.randn(32, 16, generator=gen) / 6
    shards = [(w1[:, cols], w2[cols]) for cols in (slice(0, 16), slice(16, 32))]
    parts = [pulled.rank_partials(x[r], x[1 - r], *shards[r], torch.zeros(16)) for r in range(2)]
    for r in range(2):
        block = torch.nn.functional.gelu(x[r] @ w1) @ w2  # exact GELU: _addmm_activation's on a CPU
        torch.testing.assert_close(parts[r][1] + parts[1 - r][0], block, rtol=1e-5, atol=1e-5)
        assert not torch.allclose(parts[r][1], block, atol=1e-3)  # one shard alone is not the block


@pytest.mark.gpu
@pytest.mark.multigpu
def test_tensor_parallel_variants_match_on_two_gpus(tmp_path) -> None:
    """Both optimized tensor-parallel variants, optimized_ddp_overlap_multigpu_pulled and
    optimized_gradient_bucketing_multigpu_pulled (and _tapered), optimized_zero_sharding_multigpu_pipelined and
    optimized_gradient_compression_multigpu_pulled against their baselines on two GPUs (NCCL), each
    rank's output, after poisoned scratch and refilled inputs too (check_tensor_parallel_nccl); both
    pulled gradient variants match their baseline's bit for bit, the pulled bf16 one the exact fp32
    mean of the two ranks' bf16 gradients."""
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    proc = _torchrun(__file__, str(tmp_path), "nccl")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for r in range(2):
        for module, result in json.loads((tmp_path / f"rank{r}.json").read_text()).items():
            assert result.get("error") is None and result["driven"], (r, module, result)
            assert result.get("exact", True), (r, module, result)


def test_written_out_backward_is_autograds_bit_for_bit() -> None:
    """optimized_ddp_overlap_multigpu_pulled's forward and backward (ch04_dataparallel.forward_saved,
    backward_into) give the bf16 gradients autograd gives for the bf16-autocast step, bit for bit:
    why sending them as bf16 loses nothing."""
    dp, common = load("ch04_dataparallel"), load("ch04_common")
    gen = torch.Generator().manual_seed(5)
    model = common.mlp(32, 3, gen, CPU)
    x, y = torch.randn(12, 32, generator=gen), torch.randn(12, 32, generator=gen)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(x)
    torch.nn.functional.mse_loss(out.float(), y).backward()
    want = common.flat_grads(model)
    layers = dp.bf16_layers(model)
    grads = [(torch.empty(32, 32, dtype=torch.bfloat16), torch.empty(32, dtype=torch.bfloat16)) for _ in range(3)]
    seen: list[int] = []
    with torch.no_grad():
        dp.backward_into(layers, *dp.forward_saved(layers, x), y, grads, seen.append)
    got = torch.cat([t.float().reshape(-1) for pair in grads for t in pair])
    assert seen == [2, 1, 0]
    assert torch.equal(got, want)
    assert torch.equal(want.bfloat16().float(), want)  # autograd's fp32 gradients are bf16 values
