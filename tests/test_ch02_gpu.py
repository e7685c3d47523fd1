"""Chapter 2 on a CUDA GPU: each pair's optimized variant matches its baseline on refilled inputs
(the two multi-GPU pairs where two GPUs are present),
the zero-copy kernel reads pinned host memory without a device copy of it, the L2 chunk follows this
GPU's L2 size, and the tools read this machine (NVML and PyTorch agree on the SM count)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from refill_check import check_refilled_pair

from aisp.harness.loader import import_module_at

pytestmark = pytest.mark.gpu
CH02 = Path(__file__).resolve().parents[1] / "ch02"
PAIRS = ("l2_blocking", "small_copies", "tensor_core_alignment", "zero_copy")
MULTI = ("p2p_copy_multigpu", "p2p_direct_access_multigpu")
"""Run here in one process on cuda:0 with cuda:1 as the peer; the harness runs them as 2 ranks."""


def load(module: str):
    return import_module_at(CH02 / f"{module}.py")


@pytest.mark.parametrize("name", PAIRS)
def test_optimized_matches_baseline_on_refilled_inputs(name: str) -> None:
    base, opt = load(f"baseline_{name}"), load(f"optimized_{name}")
    check_refilled_pair(base.get_benchmark(), opt.get_benchmark(), base.WORKLOAD)


@pytest.mark.multigpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
@pytest.mark.parametrize("name", MULTI)
def test_multigpu_optimized_matches_baseline_in_one_process(name: str) -> None:
    base, opt = load(f"baseline_{name}"), load(f"optimized_{name}")
    check_refilled_pair(base.get_benchmark(), opt.get_benchmark(), base.WORKLOAD)


def test_mapped_small_copies_match_baseline_and_follow_a_new_list_of_sources() -> None:
    """The one-kernel gather from mapped pinned memory gives the baseline's rows on refilled inputs,
    and reads the tensors of a list that replaced the one it mapped in setup()."""
    base, opt = load("baseline_small_copies"), load("optimized_small_copies_mapped")
    check_refilled_pair(base.get_benchmark(), opt.get_benchmark(), base.WORKLOAD)
    bench = opt.get_benchmark()
    bench.setup()
    bench.srcs = [torch.full_like(t, float(i)).pin_memory() for i, t in enumerate(bench.srcs)]
    out = bench.run()
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), torch.stack(bench.srcs))


def test_zero_copy_reads_host_rows_and_allocates_no_table_on_the_gpu() -> None:
    bench = load("optimized_zero_copy").get_benchmark()
    bench.setup()
    torch.cuda.synchronize()
    held = torch.cuda.memory_allocated()
    out = bench.run()
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), bench.table[bench.idx.cpu()])
    assert torch.cuda.memory_allocated() - held <= out.numel() * 4 + 2**20
    assert not hasattr(bench, "staged")


def test_l2_chunks_follow_this_gpus_l2() -> None:
    bench = load("optimized_l2_blocking").get_benchmark()
    bench.setup()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    assert bench.chunk * 4 <= l2 // 4 and bench.workload.elements * 4 > l2


def test_tools_read_this_machine(capsys) -> None:
    info = import_module_at(CH02 / "hardware_info.py")
    assert info.main(["--json"]) == 0
    gpus = json.loads(capsys.readouterr().out)["gpus"]
    assert len(gpus) >= torch.cuda.device_count()
    assert torch.cuda.get_device_properties(0).multi_processor_count in [g["sms"] for g in gpus]
    topo = import_module_at(CH02 / "topology.py")
    assert topo.main([]) == 0 and "GPU0" in capsys.readouterr().out


def test_this_machine_recorded_replays_to_the_same_figures(tmp_path) -> None:
    rec, info = import_module_at(CH02 / "record_machine.py"), import_module_at(CH02 / "hardware_info.py")
    machine, topo = import_module_at(CH02 / "ch02_machine.py"), import_module_at(CH02 / "topology.py")
    assert rec.main([str(tmp_path / "here.json")]) == 0
    live, replay = machine.open_machine()[0], machine.load_recorded(tmp_path / "here.json")
    keys = ("name", "sms", "max_sm_clock_mhz", "memory_gib", "memory_peak_gbs", "l2_mib", "nvlinks")  # not pcie: an idle link changes generation
    for i in range(live.nvml.device_count()):
        a, b = info.gpu_info(live, i), info.gpu_info(replay, i)
        assert [getattr(a, k) for k in keys] == [getattr(b, k) for k in keys]
    assert topo.topology(live).links == topo.topology(replay).links
