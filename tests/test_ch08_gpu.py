"""Chapter 8 on a GPU: every optimized variant matches its baseline within the pair's tolerance,
and the occupancy each pair is about is what the occupancy API reports: 2 vs 8 softmax blocks per
SM, one wave vs two in tail_effect, 100% vs 50% occupancy in ilp_vs_occupancy; predication's
4-element steps give the bits of one element a thread, on ragged sizes too; half2_math's 4-chain
variant (_ilp) gives poly_half2's bits, whole and ragged; the sweep runs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from aisp.harness.loader import import_module_at
from aisp.harness.verify import compare, flatten
from aisp.kits import native

CH08 = Path(__file__).resolve().parents[1] / "ch08"
PAIRS = ["half2_math", "ilp_vs_occupancy", "loop_unrolling", "predication", "register_spill",
         "smem_occupancy", "tail_effect", "triton_autotune"]
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def set_up(module: str, seed: int = 3):
    bench = import_module_at(CH08 / f"{module}.py").get_benchmark()
    bench.device, bench.seed = torch.device("cuda"), seed
    bench.setup()
    return bench


def output(bench) -> list[tuple[str, torch.Tensor]]:
    out = [(p, t.detach().clone()) for p, t in flatten(bench.run())]
    torch.cuda.synchronize()
    return out


@pytest.mark.parametrize("name", PAIRS)
def test_optimized_matches_baseline(name: str) -> None:
    if name == "triton_autotune":
        pytest.importorskip("triton")
    base, opt = set_up(f"baseline_{name}"), set_up(f"optimized_{name}")
    compare(output(base), output(opt), import_module_at(CH08 / f"baseline_{name}.py").WORKLOAD)


def test_register_spill_strip64_is_bitwise_the_baseline() -> None:
    """Same FMAs in the same order per output with 64-row strips: the same bits as the ring buffer."""
    base, opt = set_up("baseline_register_spill"), set_up("optimized_register_spill_strip64")
    assert opt.strip == 64
    (_, ref), (_, got) = output(base)[0], output(opt)[0]
    assert torch.equal(ref, got), f"{int((ref != got).sum())} of {ref.numel()} differ"


@pytest.mark.parametrize("n", [None, 2, 1000, 2 * (1 << 21) + 6, 3 * (1 << 20) + 778, 2 * (8 * 811008 + 20003)])
def test_half2_ilp_is_bitwise_poly_half2(n: int | None) -> None:
    """poly_half2_ilp (mode 2: 4 chains a thread, a persistent grid) against poly_half2 (mode 1): the
    pair's input whole (31 grid rounds and a part on an H200), sizes that run no round (all one
    __half2 a thread), rounds and a leftover under 4 __half2; the last size is 6 rounds on 132 SMs
    (270,336 vectors a round), 5,000 vectors under a round and 3 __half2. Both sides also match the
    pair files."""
    bench = set_up("optimized_half2_math_ilp")
    assert bench.mode == 2 and import_module_at(CH08 / "optimized_half2_math.py").get_benchmark().mode == 1
    x = bench.x if n is None else bench.x[:n]
    stream, outs = native.stream(bench.device), []
    for mode in (1, 2):
        y = torch.full_like(x, float("nan"))
        native.check(bench.run_fn(mode, x.data_ptr(), y.data_ptr(), x.numel(), stream), "half2_run")
        torch.cuda.synchronize()
        outs.append(y)
    ref, *got = outs
    assert not ref.isnan().any()
    for k, y in enumerate(got):
        assert torch.equal(ref, y), f"call {k}: {int((ref != y).sum())} of {ref.numel()} differ"
    if n is None:
        assert torch.equal(output(bench)[0][1], got[0])


def test_smem_occupancy_blocks_per_sm() -> None:
    assert set_up("baseline_smem_occupancy").metrics() == {"blocks_per_sm": 2.0}
    assert set_up("optimized_smem_occupancy").metrics() == {"blocks_per_sm": 8.0}


def test_tail_effect_waves() -> None:
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    base, opt = set_up("baseline_tail_effect"), set_up("optimized_tail_effect")
    assert base.grid == opt.grid == 2 * sms
    if base.workload.tiles == 2 * sms + 1:
        assert base.metrics()["waves"] == 2.0
    assert opt.metrics() == {"blocks": float(2 * sms), "waves": 1.0}


@pytest.mark.parametrize("n", [1, 1000, 3 * (1 << 20) + 777])
def test_predication_steps_match_one_element_a_thread(n: int) -> None:
    """A call on under one round of the grid (chunks of 64K elements: 256 blocks, fewer than an
    H100/H200 holds) runs one element a thread, the pair's first body; the whole ragged size runs
    4-element steps and the leftover loop. Both sides, the same bits, and the same across sides."""
    bench = set_up("baseline_predication")
    x, chunk, stream = bench.x[:n], 1 << 16, native.stream(bench.device)
    wholes = []
    for mode in (0, 1):
        whole, pieces = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
        native.check(bench.run_fn(mode, x.data_ptr(), whole.data_ptr(), n, stream), "odd_run")
        for at in range(0, n, chunk):
            part = min(chunk, n - at)
            native.check(bench.run_fn(mode, x[at:].data_ptr(), pieces[at:].data_ptr(), part, stream), "odd_run")
        torch.cuda.synchronize()
        assert not whole.isnan().any() and torch.equal(whole, pieces), f"mode {mode}"
        wholes.append(whole)
    assert torch.equal(wholes[0], wholes[1])


def test_ilp_vs_occupancy_halves_occupancy() -> None:
    assert set_up("baseline_ilp_vs_occupancy").metrics()["occupancy"] == 1.0
    assert set_up("optimized_ilp_vs_occupancy").metrics()["occupancy"] == 0.5


def test_autotune_picked_a_config_in_setup() -> None:
    pytest.importorskip("triton")
    metrics = set_up("optimized_triton_autotune").metrics()
    assert metrics["block_m"] in (64.0, 128.0, 256.0) and metrics["num_warps"] in (4.0, 8.0)


def test_occupancy_sweep_runs(tmp_path: Path) -> None:
    sweep = import_module_at(CH08 / "occupancy_sweep.py")
    records = sweep.measure(sweep.SweepConfig(n=1 << 22, blocks=(128, 1024), ilps=(1, 8), smem_kb=(0, 96),
                                              repeats=3), torch.device("cuda"))
    assert len(records) == 8
    assert any(r.blocks_per_sm == 0 and r.gbps == 0 for r in records)
    assert all(r.gbps > 0 for r in records if r.blocks_per_sm)
    assert sweep.main(["--n", str(1 << 22), "--out", str(tmp_path / "s.png")]) == 0
    assert (tmp_path / "s.png").exists()
