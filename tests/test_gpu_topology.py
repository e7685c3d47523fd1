"""The GPUs of a --gpus run as the scheduler sees them, from recorded NVML answers: which GPUs
--gpus names, how a worker's CUDA_VISIBLE_DEVICES names each, and which pairs NVLink connects
(direct links, an NVSwitch, or nothing NVML can tell)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from aisp.harness.scheduler import PlacementError
from aisp.system import gpu_topology
from aisp.system.nvml import NvmlUnavailable, StaticNvml

BUSES = [f"00000000:{n:02X}:00.0" for n in (0x18, 0x2A, 0x3A, 0x5D)]
SWITCH = "00000000:C0:00.0"


def gpu(i: int, ends: list[str]) -> dict:
    """A device whose first len(ends) links are up, each ending at the given bus id."""
    return {"bus_id": BUSES[i], "GetNvLinkState": lambda link: link < len(ends),
            "GetNvLinkRemotePciInfo_v2": lambda link: SimpleNamespace(busId=ends[link].encode())}


def test_select_names_the_gpus_or_refuses():
    assert gpu_topology.select("all", 4) == (0, 1, 2, 3)
    assert gpu_topology.select("2", 4) == (0, 1) and gpu_topology.select("1,3", 4) == (1, 3)
    for text, count in (("5", 4), ("0,4", 4), ("all", 0), ("1", 0)):
        with pytest.raises(PlacementError, match=f"--gpus {text}: {count} CUDA GPU"):
            gpu_topology.select(text, count)


def test_workers_name_gpus_as_the_parent_sees_them():
    assert gpu_topology._visible(1, {}) == "1"
    assert gpu_topology._visible(1, {"CUDA_VISIBLE_DEVICES": "4,6"}) == "6"
    assert gpu_topology._visible(0, {"CUDA_VISIBLE_DEVICES": "GPU-abc"}) == "GPU-abc"


def test_the_first_gpu_of_a_run_is_named_as_a_subprocess_sees_it(monkeypatch):
    """What --host-peaks measures the launch floors on: the first GPU the run uses, by its entry in this
    process's CUDA_VISIBLE_DEVICES; None without a CUDA GPU; --gpus naming a GPU not here is refused."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    visible = {"CUDA_VISIBLE_DEVICES": "4,5,6,7"}
    assert gpu_topology.first_gpu("1", visible) == "4" and gpu_topology.first_gpu("all", visible) == "4"
    assert gpu_topology.first_gpu("2,3", visible) == "6" and gpu_topology.first_gpu("2,3", {}) == "2"
    with pytest.raises(PlacementError):
        gpu_topology.first_gpu("5,", visible)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_topology.first_gpu("2,3", visible) is None


def test_direct_links_pair_only_their_ends():
    nvml = StaticNvml([gpu(0, [BUSES[1], BUSES[1]]), gpu(1, [BUSES[0], BUSES[0]]), gpu(2, [BUSES[3]]), gpu(3, [BUSES[2]])])
    pairs = gpu_topology.nvlink_pairs(nvml, {i: i for i in range(4)})
    assert pairs == {frozenset((0, 1)), frozenset((2, 3))}


def test_an_nvswitch_links_every_gpu_on_it():
    nvml = StaticNvml([gpu(i, [SWITCH] * 4) for i in range(3)] + [gpu(3, [])])
    pairs = gpu_topology.nvlink_pairs(nvml, {i: i for i in range(4)})
    assert pairs == {frozenset(p) for p in ((0, 1), (0, 2), (1, 2))}, "GPU 3 has no link up"


def test_links_nvml_cannot_read_link_nothing():
    broken = {"bus_id": BUSES[0], "GetNvLinkState": NvmlUnavailable("unsupported", "no NVLink")}
    nvml = StaticNvml([broken, {**broken, "bus_id": BUSES[1]}])
    assert gpu_topology.nvlink_pairs(nvml, {0: 0, 1: 1}) == frozenset()


def test_no_gpu_here_is_a_placement_error():
    if torch.cuda.is_available():
        pytest.skip("this host has a GPU")
    with pytest.raises(PlacementError, match="visible here"):
        gpu_topology.topology("all", env={})


@pytest.mark.gpu
def test_this_hosts_gpus_have_their_numa_cores_and_a_share_each():
    from aisp.harness.scheduler import cpu_shares

    topo = gpu_topology.topology("all")
    assert len(topo.gpus) == torch.cuda.device_count()
    shares = cpu_shares(topo)
    print({g.visible: (g.node, shares[g.ordinal].to_dict()) for g in topo.gpus}, sorted(map(sorted, topo.nvlink)))
    assert sum(s.threads for s in shares.values()) <= topo.cpu_count
    cores = [c for s in shares.values() for c in s.cpus]
    assert len(cores) == len(set(cores)), "no core in two shares"


def test_hyperthreads_stay_with_their_core(tmp_path):
    """Node 0 = cores 0-3 with siblings 8-11: two GPUs on it get whole cores each."""
    from aisp.harness.scheduler import Gpu, Topology, cpu_shares

    for cpu in (*range(4), *range(8, 12)):
        folder = tmp_path / f"sys/devices/system/cpu/cpu{cpu}/topology"
        folder.mkdir(parents=True)
        (folder / "thread_siblings_list").write_text(f"{cpu % 8},{cpu % 8 + 8}\n")
    ordered = gpu_topology.by_core((0, 1, 2, 3, 8, 9, 10, 11), tmp_path)
    assert ordered == (0, 8, 1, 9, 2, 10, 3, 11)
    shares = cpu_shares(Topology((Gpu(0, "0", ordered), Gpu(1, "1", ordered)), 8))
    assert set(shares[0].cpus) == {0, 8, 1, 9} and set(shares[1].cpus) == {2, 10, 3, 11}
    assert gpu_topology.by_core((5, 4), tmp_path / "nothing") == (4, 5), "no sysfs: in order"
