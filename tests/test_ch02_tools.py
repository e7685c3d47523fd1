"""ch02/hardware_info.py and ch02/topology.py on recorded machines (no GPU): an HGX H200 board (8
GPUs on NVSwitch, two NUMA nodes) and two H100 PCIe cards without NVLink, both written by hand from
public specifications; a direct NVLink bridge and 1..8 GPU subsets are built from them here."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from aisp.harness.loader import import_module_at

CH02 = Path(__file__).resolve().parents[1] / "ch02"
H200 = CH02 / "recorded" / "h200_hgx_8gpu.json"
H100 = CH02 / "recorded" / "h100_pcie_2gpu.json"
info = import_module_at(CH02 / "hardware_info.py")
topo = import_module_at(CH02 / "topology.py")
machine = import_module_at(CH02 / "ch02_machine.py")
links = import_module_at(CH02 / "ch02_links.py")


def recorded(tmp_path: Path, base: Path, edit=lambda d: d) -> Path:
    data = edit(copy.deepcopy(json.loads(base.read_text())))
    path = tmp_path / base.name
    path.write_text(json.dumps(data))
    return path


def test_hgx_h200_properties() -> None:
    m = machine.load_recorded(H200)
    gpus = [info.gpu_info(m, i) for i in range(8)]
    g = gpus[0]
    assert (g.name, g.compute_capability, g.sms, g.max_sm_clock_mhz) == ("NVIDIA H200", "9.0", 132, 1980)
    assert g.memory_peak_gbs == round(2 * 3201e6 * 6144 / 8 / 1e9)  # DDR: 2 transfers per clock
    assert (g.l2_mib, g.smem_per_sm_kib, g.smem_per_block_optin_kib, g.regs_per_sm) == (60.0, 228.0, 227.0, 65536)
    assert (g.nvlinks, g.nvlink_version, g.nvlink_gbs) == (18, "4.0", 450.0)
    assert (g.pcie, g.pcie_gbs) == ("Gen5 x16 now, Gen5 x16 max", 63.0)
    assert [x.numa_node for x in gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert gpus[5].local_cpus == "56-111,168-223" and gpus[5].bus_id == "00000000:AB:00.0"


def test_pcie_cards_without_nvlink() -> None:
    m = machine.load_recorded(H100)
    g = info.gpu_info(m, 0)
    assert (g.nvlinks, g.nvlink_version, g.nvlink_gbs) == (0, None, None)
    assert g.pcie == "Gen1 x16 now, Gen5 x16 max" and g.memory_peak_gbs == 2039
    assert info.cell(None, " GB/s") == "n/a" and info.cell(1980, " MHz") == "1,980 MHz"


def test_pcie_rates() -> None:
    assert links.pcie_gbs(5, 16) == pytest.approx(63.0, abs=0.1)
    assert links.pcie_gbs(4, 8) == pytest.approx(15.75, abs=0.01)
    assert links.pcie_gbs(2, 16) == pytest.approx(8.0)


@pytest.mark.parametrize("tool", [info, topo])
@pytest.mark.parametrize("as_json", [False, True])
def test_no_gpu_says_so_and_exits_zero(tool, as_json, monkeypatch, capsys) -> None:
    monkeypatch.setattr(tool, "open_machine", lambda: (None, "NVML could not start: no driver"))
    assert tool.main(["--json"] if as_json else []) == 0
    out = capsys.readouterr().out
    if as_json:
        assert json.loads(out)["reason"] == "NVML could not start: no driver"
    else:
        assert out.startswith("No NVIDIA GPU here: NVML could not start")


def test_hardware_info_replays_as_json_and_table(capsys) -> None:
    assert info.main(["--replay", str(H200), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["gpus"]) == 8 and data["source"] == "recorded: h200_hgx_8gpu.json"
    assert info.main(["--replay", str(H100)]) == 0
    table = capsys.readouterr().out
    assert "NVIDIA H100 PCIe" in table and "2,039 GB/s" in table and "00000000:41:00.0" in table


def test_hgx_matrix_is_all_nvswitch() -> None:
    t = topo.topology(machine.load_recorded(H200))
    assert all(t.links[a][b] == ("X" if a == b else "NV18") for a in range(8) for b in range(8))
    assert t.p2p[0][7] == "RWNA" and t.numa == ["0"] * 4 + ["1"] * 4
    text = topo.render(t)
    assert "GPU4   NV18   NV18   NV18   NV18   X" in text and "56-111,168-223" in text


def test_pcie_pair_shows_its_switch_and_no_nvlink_p2p() -> None:
    t = topo.topology(machine.load_recorded(H100))
    assert t.links == [["X", "PIX"], ["PIX", "X"]] and t.p2p[0][1] == "RW-A"


def test_direct_nvlink_bridge_counts_links_to_that_peer(tmp_path) -> None:
    def bridge(d):
        for me, other in ((0, 1), (1, 0)):
            d["devices"][me].update(GetNvLinkState=[1] * 12 + [0] * 6, GetNvLinkVersion=[6] * 18,
                                    GetNvLinkRemoteDeviceType=[0] * 18,
                                    GetNvLinkRemotePciInfo=[d["devices"][other]["bus_id"]] * 18)
        return d
    m = machine.load_recorded(recorded(tmp_path, H100, bridge))
    assert topo.topology(m).links[0][1] == "NV12"
    assert info.gpu_info(m, 1).nvlink_gbs == 300.0


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_one_to_eight_gpus(tmp_path, n) -> None:
    def first(d):
        d["devices"] = d["devices"][:n]
        d["topology"] = [row[:n] for row in d["topology"][:n]]
        return d
    t = topo.topology(machine.load_recorded(recorded(tmp_path, H200, first)))
    assert len(t.links) == n and t.links[0][0] == "X"
    assert topo.render(t).count("\nGPU0 ") == 2  # the link matrix and the P2P matrix


def test_missing_values_print_unknown_not_guesses(tmp_path) -> None:
    def strip(d):
        for call in ("GetMaxPcieLinkGeneration", "GetMemoryBusWidth", "GetNvLinkState"):
            del d["common"][call]
        d["topology"], d["p2p"] = [], {"read": 0}
        return d
    m = machine.load_recorded(recorded(tmp_path, H200, strip))
    g = info.gpu_info(m, 0)
    assert (g.pcie, g.memory_peak_gbs, g.nvlinks) == (None, None, 0)
    t = topo.topology(m)
    assert t.links[0][1] == "?" and t.p2p[0][1] == "R???"


@pytest.mark.parametrize("base", [H200, H100])
def test_a_recording_replays_to_the_same_output(tmp_path, base) -> None:
    rec = import_module_at(CH02 / "record_machine.py")
    original = machine.load_recorded(base)
    path = tmp_path / "again.json"
    path.write_text(json.dumps(rec.record(original, "round trip")))
    again = machine.load_recorded(path)
    n = original.nvml.device_count()
    assert [info.gpu_info(again, i) for i in range(n)] == [info.gpu_info(original, i) for i in range(n)]
    first, second = topo.topology(original), topo.topology(again)
    assert (second.links, second.p2p, second.cpus, second.numa) == (first.links, first.p2p, first.cpus, first.numa)


def test_recording_keeps_unreadable_values_unreadable(tmp_path) -> None:
    rec = import_module_at(CH02 / "record_machine.py")

    def holes(d):
        d["topology"][0][1] = d["topology"][1][0] = None
        d["p2p"]["nvlink"] = [[None, None], [0, None]]
        return d
    m = machine.load_recorded(recorded(tmp_path, H100, holes))
    path = tmp_path / "again.json"
    path.write_text(json.dumps(rec.record(m, "holes")))
    t = topo.topology(machine.load_recorded(path))
    assert t.links[0][1] == "?" and t.p2p[0][1] == "RW?A" and t.p2p[1][0] == "RWNA"


def test_record_without_a_gpu_writes_nothing(tmp_path, monkeypatch, capsys) -> None:
    rec = import_module_at(CH02 / "record_machine.py")
    monkeypatch.setattr(rec, "open_machine", lambda: (None, "no driver"))
    assert rec.main([str(tmp_path / "x.json")]) == 0
    assert not (tmp_path / "x.json").exists() and "No NVIDIA GPU here" in capsys.readouterr().out


def test_pytorch_properties_are_matched_to_nvml_devices_by_bus_id(monkeypatch) -> None:
    import types

    import torch

    nvml = machine.load_recorded(H100).nvml  # NVML index 0: bus 41, index 1: bus 42
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda o: types.SimpleNamespace(name=f"cuda:{o}", multi_processor_count=100 + o))
    monkeypatch.setattr(machine, "torch_bus_id", lambda o: ["0000:42:00.0", "0000:41:00.0"][o])  # reversed
    props = machine.live_torch_props(nvml)
    assert [p["name"] for p in props] == ["cuda:1", "cuda:0"] and props[0]["multi_processor_count"] == 101
