"""GPU audit checks through a recorded NVML: every grade, NotSupported/NoPermission never PASS, and
hardware faults outranking tuning advice in order and exit code."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from aisp.system import checks_gpu, checks_locality
from aisp.system.audit import EXIT_FAIL, EXIT_HARDWARE, EXIT_OK, exit_code, run_audit, run_check
from aisp.system.model import AuditContext, Finding, Grade
from aisp.system.nvml import NvmlUnavailable, StaticNvml

FIXTURE = Path(__file__).parent / "fixtures" / "system" / "two_socket"
UNSUPPORTED = NvmlUnavailable("unsupported", "NotSupported")


def healthy(**changes) -> dict:
    """What the H200 on the device machine reported (host_audit.md section 6), plus NVLink."""
    dev = {
        "bus_id": "00000000:3B:00.0", "GetUUID": "GPU-aaaa", "GetPersistenceMode": 1, "GetEccMode": (1, 1),
        "GetTotalEccErrors": lambda kind, counter: 0, "GetRemappedRows": (0, 0, 0, 0),
        "GetClockInfo": 345, "GetMaxClockInfo": 1980, "GetApplicationsClock": 1980,
        "GetDefaultApplicationsClock": 1980, "GetEnforcedPowerLimit": 700_000,
        "GetPowerManagementDefaultLimit": 700_000, "GetCurrentClocksEventReasons": 0x1, "GetMigMode": (0, 0),
        "GetCurrPcieLinkGeneration": 5, "GetMaxPcieLinkGeneration": 5, "GetCurrPcieLinkWidth": 16,
        "GetMaxPcieLinkWidth": 16, "GetNvLinkState": lambda link: 1 if link < 18 else _invalid(),
        "GetCpuAffinity": lambda words: [0xF0], "GetMemoryAffinity": lambda words, scope: [0b10],
    }
    dev.update(changes)
    return dev


def _invalid() -> None:
    raise NvmlUnavailable("error", "InvalidArgument")


def ctx(*devices: dict, profile: str = "training", root: Path = FIXTURE) -> AuditContext:
    nvml = StaticNvml(list(devices), {"GetDriverVersion": "580.159.04", "GetCudaDriverVersion": 13000})
    return AuditContext(root=root, profile=profile, nvml=nvml, env={}, probe_torch=False)


def grade(fn, *devices: dict, **kw) -> Finding:
    return run_check("t", fn, ctx(*devices, **kw), 0)


def test_healthy_gpu_passes_every_device_check() -> None:
    for cid, fn in checks_gpu.DEVICE_CHECKS:
        assert grade(fn, healthy()).grade is Grade.PASS, cid
    assert "18 of 18" in grade(checks_gpu.nvlink, healthy()).observed


@pytest.mark.parametrize("fn, change, expected, hardware", [
    (checks_gpu.persistence, {"GetPersistenceMode": 0}, Grade.WARN, False),
    (checks_gpu.ecc_mode, {"GetEccMode": (0, 0)}, Grade.WARN, False),
    (checks_gpu.ecc_mode, {"GetEccMode": (1, 0)}, Grade.WARN, False),
    (checks_gpu.ecc_errors, {"GetTotalEccErrors": lambda kind, counter: 2 if counter == 0 else 5}, Grade.FAIL, True),
    (checks_gpu.ecc_errors, {"GetTotalEccErrors": lambda kind, counter: 0 if counter == 0 else 5}, Grade.WARN, True),
    (checks_gpu.row_remap, {"GetRemappedRows": (0, 1, 1, 0)}, Grade.FAIL, True),
    (checks_gpu.row_remap, {"GetRemappedRows": (0, 1, 0, 1)}, Grade.FAIL, True),
    (checks_gpu.clocks, {"GetApplicationsClock": 1500}, Grade.WARN, False),
    (checks_gpu.power, {"GetEnforcedPowerLimit": 500_000}, Grade.WARN, False),
    (checks_gpu.clock_events, {"GetCurrentClocksEventReasons": 0x8}, Grade.FAIL, True),
    (checks_gpu.clock_events, {"GetCurrentClocksEventReasons": 0x40 | 0x1}, Grade.FAIL, True),
    (checks_gpu.clock_events, {"GetCurrentClocksEventReasons": 0x20}, Grade.WARN, True),
    (checks_gpu.mig, {"GetMigMode": (1, 1)}, Grade.WARN, False),
    (checks_gpu.mig, {"GetMigMode": (0, 1)}, Grade.WARN, False),
    (checks_gpu.pcie, {"GetCurrPcieLinkWidth": 8}, Grade.WARN, True),
    (checks_gpu.nvlink, {"GetNvLinkState": lambda link: int(link != 3) if link < 18 else _invalid()},
     Grade.WARN, True),
])
def test_each_fault_is_graded(fn, change, expected, hardware) -> None:
    found = grade(fn, healthy(**change))
    assert (found.grade, found.hardware) == (expected, hardware)


def test_mig_on_is_fine_for_inference() -> None:
    assert grade(checks_gpu.mig, healthy(GetMigMode=(1, 1)), profile="inference").grade is Grade.PASS


def test_idle_pcie_gen_drop_passes_with_a_note() -> None:
    found = grade(checks_gpu.pcie, healthy(GetCurrPcieLinkGeneration=1))
    assert found.grade is Grade.PASS and "idle" in found.note


def test_older_pynvml_name_for_clock_events_is_used() -> None:
    dev = healthy()
    dev["GetCurrentClocksThrottleReasons"] = dev.pop("GetCurrentClocksEventReasons") | 0x8
    assert grade(checks_gpu.clock_events, dev).grade is Grade.FAIL


@pytest.mark.parametrize("error, expected", [
    (NvmlUnavailable("unsupported", "NotSupported"), Grade.SKIP),
    (NvmlUnavailable("no_permission", "NoPermission"), Grade.UNKNOWN),
    (NvmlUnavailable("error", "Unknown"), Grade.UNKNOWN),
    (RuntimeError("driver went away"), Grade.UNKNOWN),
])
def test_nvml_refusals_are_never_pass(error, expected) -> None:
    calls = ["GetPersistenceMode", "GetEccMode", "GetTotalEccErrors", "GetRemappedRows", "GetClockInfo",
             "GetEnforcedPowerLimit", "GetCurrentClocksEventReasons", "GetMigMode", "GetCurrPcieLinkWidth",
             "GetNvLinkState"]
    dev = healthy(**dict.fromkeys(calls, error))
    for cid, fn in checks_gpu.DEVICE_CHECKS:
        found = grade(fn, dev)
        assert found.grade is expected, cid
        assert found.check == "t"


def test_nvlink_not_supported_on_link0_is_skip() -> None:
    assert grade(checks_gpu.nvlink, healthy(GetNvLinkState=UNSUPPORTED)).grade is Grade.SKIP


def test_driver_against_runtime(monkeypatch) -> None:
    import torch

    c = ctx(healthy())
    for runtime, expected in [("12.8", Grade.PASS), ("13.0", Grade.PASS), ("13.1", Grade.WARN),
                              ("14.0", Grade.FAIL), (None, Grade.SKIP)]:
        monkeypatch.setattr(torch.version, "cuda", runtime)
        assert run_check("gpu.driver", checks_gpu.driver, c).grade is expected, runtime


def test_topology_needs_two_gpus() -> None:
    assert run_check("x", checks_gpu.topology, ctx(healthy())).grade is Grade.SKIP
    two = ctx(healthy(), healthy(bus_id="00000000:86:00.0"))
    two.nvml._topology[(0, 1)] = 50
    found = run_check("x", checks_gpu.topology, two)
    assert found.grade is Grade.PASS and "across sockets" in found.observed


@pytest.fixture
def root(tmp_path: Path) -> Path:
    dst = tmp_path / "root"
    shutil.copytree(FIXTURE, dst)
    return dst


def test_locality_from_nvml_and_sysfs(root: Path) -> None:
    warn = grade(checks_locality.locality, healthy(), root=root)
    assert warn.grade is Grade.WARN and "node 1" in warn.observed and "0-3" in warn.observed
    assert "nvmlDeviceGetCpuAffinity" in warn.source
    sysfs = grade(checks_locality.locality, healthy(GetCpuAffinity=UNSUPPORTED), root=root)
    assert "numa_node" in sysfs.source and "local CPUs 4-7" in sysfs.observed
    (root / "proc/self/status").write_text("Cpus_allowed_list:\t4-7\nMems_allowed_list:\t1\n")
    assert grade(checks_locality.locality, healthy(), root=root).grade is Grade.PASS


def test_locality_unknown_when_platform_reports_none(root: Path) -> None:
    (root / "sys/bus/pci/devices/0000:3b:00.0/numa_node").write_text("-1\n")
    (root / "sys/bus/pci/devices/0000:3b:00.0/local_cpulist").write_text("\n")
    found = grade(checks_locality.locality, healthy(GetCpuAffinity=UNSUPPORTED), root=root)
    assert found.grade is Grade.UNKNOWN and "node unknown" in found.observed


def test_irq_affinity(root: Path) -> None:
    warn = grade(checks_locality.irq_affinity, healthy(), root=root)
    assert warn.grade is Grade.WARN and "1 handled off" in warn.observed and "(40)" in warn.observed
    (root / "proc/irq/40/effective_affinity_list").write_text("4-7\n")
    assert grade(checks_locality.irq_affinity, healthy(), root=root).grade is Grade.PASS
    shutil.rmtree(root / "sys/bus/pci/devices/0000:3b:00.0/msi_irqs")
    assert grade(checks_locality.irq_affinity, healthy(), root=root).grade is Grade.SKIP


def test_hardware_fault_outranks_tuning_advice() -> None:
    sick = healthy(GetRemappedRows=(0, 2, 1, 0))
    findings = run_audit(ctx(sick))
    assert findings[0].check == "gpu0.ecc.remap" and findings[0].hardware
    assert exit_code(findings) == EXIT_HARDWARE
    tuning_only = run_audit(ctx(healthy()))
    fails = [f.check for f in tuning_only if f.grade is Grade.FAIL]
    assert fails == ["mem.shm"] and exit_code(tuning_only) == EXIT_FAIL


def test_exit_codes() -> None:
    ok = [Finding(Grade.PASS, "", "", ""), Finding(Grade.WARN, "", "", ""), Finding(Grade.UNKNOWN, "", "", "")]
    assert exit_code(ok) == EXIT_OK
    assert exit_code(ok, strict=True) == EXIT_FAIL
    hw_warn = ok + [Finding(Grade.WARN, "", "", "", hardware=True)]
    assert exit_code(hw_warn) == EXIT_OK


def test_no_nvml_is_one_skip() -> None:
    c = AuditContext(root=FIXTURE, nvml=None, nvml_reason="no driver", env={}, probe_torch=False)
    gpu = [f for f in run_audit(c) if f.check.startswith("gpu")]
    assert [(f.check, f.grade, f.observed) for f in gpu] == [("gpu.nvml", Grade.SKIP, "no driver")]
