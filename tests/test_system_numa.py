"""NUMA binding library: cpulists, GPU locality (NVML, sysfs fallback), CUDA ordinal mapping, binding,
DataLoader worker binding, placement diagnostics."""

from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path

import pytest
import torch

from aisp.system import numa
from aisp.system.nvml import NvmlUnavailable, StaticNvml
from aisp.system.procfs import format_cpulist, mask_words_to_ids, parse_cpulist

FIXTURE = Path(__file__).parent / "fixtures" / "system" / "two_socket"
UNSUPPORTED = NvmlUnavailable("unsupported", "NotSupported")


def gpu(bus: str, cpus_word: int, node_word: int, uuid: str) -> dict:
    return {"bus_id": bus, "GetUUID": uuid, "GetCpuAffinity": lambda n: [cpus_word],
            "GetMemoryAffinity": lambda n, scope: [node_word]}


TWO_GPUS = StaticNvml([gpu("00000000:18:00.0", 0x0F, 0b01, "GPU-a"), gpu("00000000:3B:00.0", 0xF0, 0b10, "GPU-b")])


def test_cpulists_and_masks() -> None:
    assert parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert format_cpulist([11, 0, 1, 2, 3, 8, 10]) == "0-3,8,10-11"
    assert parse_cpulist("") == [] and format_cpulist([]) == ""
    assert mask_words_to_ids([0x1, 0x8000000000000000]) == [0, 127]
    assert numa.sysfs_bus_id("00000000:3B:00.0") == "0000:3b:00.0"


def test_locality_from_nvml() -> None:
    loc = numa.gpu_locality(1, TWO_GPUS, FIXTURE)
    assert (loc.bus_id, loc.node, loc.cpus) == ("0000:3b:00.0", 1, (4, 5, 6, 7))


def test_locality_node_from_cpus_when_memory_affinity_missing() -> None:
    dev = gpu("00000000:3B:00.0", 0xF0, 0, "GPU-b")
    dev["GetMemoryAffinity"] = UNSUPPORTED
    assert numa.gpu_locality(0, StaticNvml([dev]), FIXTURE).node == 1


def test_locality_falls_back_to_sysfs_and_says_so() -> None:
    dev = gpu("00000000:3B:00.0", 0, 0, "GPU-b")
    dev["GetCpuAffinity"] = UNSUPPORTED
    loc = numa.gpu_locality(0, StaticNvml([dev]), FIXTURE)
    assert (loc.node, loc.cpus) == (1, (4, 5, 6, 7)) and "NVML: unsupported" in loc.source


def test_sysfs_minus_one_is_unknown_not_node0(tmp_path: Path) -> None:
    root = tmp_path / "r"
    shutil.copytree(FIXTURE, root)
    (root / "sys/bus/pci/devices/0000:3b:00.0/numa_node").write_text("-1\n")
    assert numa.gpu_locality(0, None, root, bus_id="0000:3b:00.0").node is None


def test_cuda_ordinal_to_nvml_index() -> None:
    assert numa.nvml_index(0, TWO_GPUS, {}) == 0
    assert numa.nvml_index(0, TWO_GPUS, {"CUDA_VISIBLE_DEVICES": "1"}) == 1
    assert numa.nvml_index(0, TWO_GPUS, {"CUDA_VISIBLE_DEVICES": "GPU-b,GPU-a"}) == 1
    assert numa.nvml_index(1, TWO_GPUS, {"CUDA_VISIBLE_DEVICES": "GPU-b,GPU-a"}) == 0
    assert numa.nvml_index(0, TWO_GPUS, {"CUDA_VISIBLE_DEVICES": "0"}, bus_id="0000:3b:00.0") == 1
    with pytest.raises(LookupError, match="MIG"):
        numa.nvml_index(0, TWO_GPUS, {"CUDA_VISIBLE_DEVICES": "MIG-123"})
    with pytest.raises(LookupError, match="UUID"):
        numa.nvml_index(0, TWO_GPUS, {"CUDA_VISIBLE_DEVICES": "GPU-zzz"})


def test_torch_bus_id_is_built_from_integer_fields(monkeypatch) -> None:
    class Props:
        pci_domain_id, pci_bus_id, pci_device_id = 0, 0x3B, 0

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: Props())
    assert numa.torch_bus_id(0) == "0000:3b:00.0"
    loc = numa.resolve_gpu(0, TWO_GPUS, FIXTURE, env={"CUDA_VISIBLE_DEVICES": "0"})
    assert loc.node == 1  # the bus id wins over the (misleading) CUDA_VISIBLE_DEVICES index


def test_bound_binds_and_restores() -> None:
    before = os.sched_getaffinity(0)
    one = min(before)
    with numa.bound(numa.Binding((one,), node=0)):
        assert os.sched_getaffinity(0) == {one}
        assert numa.get_mempolicy() == (numa.MPOL_PREFERRED, [0])
    assert os.sched_getaffinity(0) == before
    assert numa.get_mempolicy()[0] == numa.MPOL_DEFAULT


def test_bind_worker_pickles_and_binds_one_core_each() -> None:
    allowed = sorted(os.sched_getaffinity(0))
    init = pickle.loads(pickle.dumps(numa.BindWorker(numa.Binding(tuple(allowed), 0), one_core_each=True)))
    with numa.bound(numa.Binding(tuple(allowed))):
        init(1)
        assert os.sched_getaffinity(0) == {allowed[1 % len(allowed)]}
        numa.set_mempolicy(numa.MPOL_DEFAULT, [])


def test_dataloader_workers_are_bound() -> None:
    allowed = sorted(os.sched_getaffinity(0))
    loader = torch.utils.data.DataLoader(_Affinity(), batch_size=None, num_workers=2,
                                         worker_init_fn=numa.BindWorker(numa.Binding(tuple(allowed)), True))
    seen = [set(x.tolist()) for x in loader]
    assert seen == [{allowed[0]}, {allowed[1 % len(allowed)]}]


class _Affinity(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 2

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.tensor(sorted(os.sched_getaffinity(0)))


def test_split_keeps_worker_cores_out_of_the_main_set() -> None:
    main, init = numa.split_for_workers(numa.Binding(tuple(range(8)), 1), workers=3)
    assert main.cpus == (0, 1, 2, 3, 4) and init.binding.cpus == (5, 6, 7) and init.one_core_each
    shared, init = numa.split_for_workers(numa.Binding((0, 1), 0), workers=2)
    assert shared.cpus == (0, 1) and init.binding.cpus == (0, 1) and not init.one_core_each


def test_placement_from_fake_proc() -> None:
    p = numa.placement(FIXTURE)
    assert p.cpus_allowed == "0-7" and p.threads_by_node == {0: 1, 1: 1}
    assert p.memory_by_node == {0: 60 * 4096, 1: 40 * 4096 + 10 * 4096 + 2 * 2048 * 1024}
    text = numa.describe(p, local_node=1)
    assert "off the GPU's node1: 1 threads, 0.2 MiB" in text


def test_local_binding_keeps_allowed_cpus() -> None:
    loc = numa.Locality("0000:3b:00.0", 1, (4, 5, 6, 7), "test")
    assert numa.local_binding(loc, allowed=[0, 1, 4, 5]).cpus == (4, 5)
    assert numa.local_binding(loc, allowed=[0, 1]).cpus == (0, 1)
