"""Chapter 15's two-rank pairs on the CPU with gloo: both pairs at tiny fp32 sizes through the
real harness path (torchrun, two ranks; tests/fixtures/distributed_ch15/), each with a wrong
variant that verification must reject; the GPU-sized pairs skip without two GPUs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import REPO, run_fixture_pairs

from aisp.harness.benchmark import unmet_requirements
from aisp.harness.loader import import_module_at
from aisp.harness.options import RunOptions

CH15 = REPO / "ch15"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "distributed_ch15"


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    """Both pairs (four fixture pairs: the transfer at three sizes), two gloo ranks each; ch15/ on the
    workers' PYTHONPATH. The workers are forked from one zygote (--fork-workers, as
    tests/test_distributed_ch13.py runs its pairs): a spawned worker imports torch and the pair's
    modules anew, ~7 s of CPU each, four times; the ranks start as they do under a spawned worker."""
    options = RunOptions(iterations=2, warmup=0, warmup_s=0.0, device="cpu", artifacts_dir=tmp_path_factory.mktemp("art"),
                         fork_workers=True)
    results = run_fixture_pairs(FIXTURES, CH15, options, ranks=2)
    assert all(r["placement"]["forked"] for r in results), [r["placement"] for r in results]
    return {r["name"]: {v["name"]: v for v in [r["baseline"], *r["variants"]]} for r in results}


def test_disaggregated_serving_matches_colocated_and_reports_latency(suite):
    pair = suite["disagg"]
    opt = pair["optimized_disagg"]
    assert opt["verdict"] in ("ok", "inconclusive", "slower"), opt["reason"]  # verified; CPU timing means nothing here
    assert "each of 2 ranks: matches that rank's baseline" in opt["verification"]["checks"]
    for name in ("baseline_disagg", "optimized_disagg"):
        metrics = pair[name]["metrics"]
        assert 0 < metrics["ttft_p50_ms"] <= metrics["ttft_p99_ms"], name
        assert 0 < metrics["tpot_p50_ms"] <= metrics["tpot_p99_ms"], name


def test_decoding_without_the_sent_kv_fails(suite):
    lost = suite["disagg"]["optimized_disagg_lostkv"]
    assert lost["verdict"] == "verify-failed"


def test_nccl_send_equals_the_host_path_exactly(suite):
    opt = suite["kv_transfer"]["optimized_kv_transfer"]
    assert opt["verdict"] in ("ok", "inconclusive", "slower"), opt["reason"]
    assert opt["verification"]["max_abs_err"] == 0.0


def test_pages_never_scattered_fail(suite):
    assert suite["kv_transfer"]["optimized_kv_transfer_noscatter"]["verdict"] == "verify-failed"


@pytest.mark.parametrize("name", ["disagg_prefill_decode_multigpu", "kv_transfer_multigpu"])
def test_gpu_pairs_need_two_gpus(name, monkeypatch):
    requires = import_module_at(CH15 / f"baseline_{name}.py").WORKLOAD.requires
    assert requires.world_size == 2
    assert "CUDA" in unmet_requirements(requires, torch.device("cpu"))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert unmet_requirements(requires, torch.device("cuda")) == "needs 2 GPUs; 1 present"


@pytest.mark.parametrize("pair, variant", [("kv_transfer", "optimized_kv_transfer_pipelined"),
                                           ("kv_transfer_odd", "optimized_kv_transfer_odd_pipelined"),
                                           ("kv_transfer", "optimized_kv_transfer_chunksums"),
                                           ("kv_transfer_odd", "optimized_kv_transfer_odd_chunksums"),
                                           ("kv_transfer_wide", "optimized_kv_transfer_wide_chunksums")])
def test_pipelined_chunks_equal_the_host_path_exactly(suite, pair, variant):
    opt = suite[pair][variant]
    assert opt["verdict"] in ("ok", "inconclusive", "slower"), opt["reason"]
    assert opt["verification"]["max_abs_err"] == 0.0
    if variant.endswith("chunksums"):  # on a CPU the receiver keeps one checksum a pool, and says so
        assert opt["metrics"]["per_chunk_sums"] == 0.0


def test_chunks_received_into_the_wrong_pool_fail(suite):
    assert suite["kv_transfer_odd"]["optimized_kv_transfer_odd_swapped"]["verdict"] == "verify-failed"


def pipelined():
    return import_module_at(CH15 / "optimized_kv_transfer_multigpu_pipelined.py")


@pytest.mark.parametrize("layers, chunks", [(8, 4), (8, 3), (3, 2), (2, 4), (1, 1), (5, 5), (7, 16)])
def test_chunk_plan_covers_each_pool_layer_once_k_first(layers, chunks):
    plan = pipelined().chunk_plan(layers, chunks)
    assert len(plan) == 2 * min(layers, chunks)
    covered = [(pool, layer) for pool, run in plan for layer in range(run.start, run.stop)]
    assert covered == [(pool, layer) for pool in (0, 1) for layer in range(layers)]
    sizes = [run.stop - run.start for _, run in plan]
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("dtype, shape", [(torch.bfloat16, (3, 31, 2, 4, 16)), (torch.float32, (2, 17, 1, 3, 5)),
                                          (torch.bfloat16, (2, 9, 1, 1, 2))])
def test_word_gather_and_scatter_copy_the_bits_of_index_select(dtype, shape):
    words = import_module_at(CH15 / "ch15_kv_transfer.py").words
    gen = torch.Generator().manual_seed(3)
    pool = torch.randn(shape, generator=gen).to(dtype)
    pages = torch.randperm(shape[1], generator=gen)[:shape[1] // 2 + 1]  # an odd count where shape[1] % 4 == 1
    packed = torch.empty(shape[0], len(pages), *shape[2:], dtype=dtype)
    torch.index_select(words(pool[1:]), 1, pages, out=words(packed[1:]))
    torch.index_select(words(pool[:1]), 1, pages, out=words(packed[:1]))
    assert torch.equal(packed.view(torch.int16 if dtype == torch.bfloat16 else torch.int32),
                       pool.index_select(1, pages).view(torch.int16 if dtype == torch.bfloat16 else torch.int32))
    dst = torch.zeros_like(pool)
    words(dst[1:]).index_copy_(1, pages, words(packed[1:]))
    words(dst[:1]).index_copy_(1, pages, words(packed[:1]))
    assert torch.equal(dst, torch.zeros_like(pool).index_copy_(1, pages, packed))


def chunksums():
    return import_module_at(CH15 / "optimized_kv_transfer_multigpu_chunksums.py")


@pytest.mark.parametrize("pieces, chunks, sizes", [(16, 6, [1, 2, 4, 4, 4, 1]), (16, 8, [1, 2, 3, 3, 2, 2, 2, 1]),
                                                   (6, 3, [2, 2, 2]), (4, 6, [1, 1, 1, 1]), (16, 1, [16]),
                                                   (7, 5, [1, 2, 2, 1, 1]), (2, 6, [1, 1])])
def test_piece_plan_covers_every_piece_once_single_layer_ends(pieces, chunks, sizes):
    plan = chunksums().piece_plan(pieces, chunks)
    assert [b - a for a, b in plan] == sizes
    assert plan[0][0] == 0 and plan[-1][1] == pieces and all(b == c for (_, b), (c, _) in zip(plan[:-1], plan[1:], strict=True))


@pytest.mark.parametrize("start, end, runs", [(0, 1, [(0, 0, 1)]), (6, 10, [(0, 6, 8), (1, 0, 2)]),
                                              (8, 16, [(1, 0, 8)]), (15, 16, [(1, 7, 8)]), (0, 16, [(0, 0, 8), (1, 0, 8)])])
def test_pool_runs_split_a_chunk_at_the_pool_boundary(start, end, runs):
    got = chunksums().pool_runs(start, end, 8)
    assert [(pool, r.start, r.stop) for pool, r in got] == runs
