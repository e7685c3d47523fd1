"""Audit checks of each GPU through NVML: persistence, ECC, row remapping, clocks, power, clock
events, MIG, PCIe, NVLink; and of the GPUs together: driver vs CUDA runtime, topology.

A read NVML refuses raises ``NvmlUnavailable``; the audit runner turns it into SKIP or UNKNOWN.
"""

from __future__ import annotations

from aisp.system.model import AuditContext, Finding, Grade
from aisp.system.nvml import NvmlUnavailable

CLOCK_SM = 1
ECC_UNCORRECTED, ECC_VOLATILE, ECC_AGGREGATE = 1, 0, 1
CLOCK_EVENTS = {0x1: "GpuIdle", 0x2: "ApplicationsClocksSetting", 0x4: "SwPowerCap", 0x8: "HwSlowdown",
                0x10: "SyncBoost", 0x20: "SwThermalSlowdown", 0x40: "HwThermalSlowdown",
                0x80: "HwPowerBrakeSlowdown", 0x100: "DisplayClockSetting"}
HW_EVENTS = 0x8 | 0x40 | 0x80
TOPOLOGY = {0: "same board", 10: "one PCIe switch", 20: "several PCIe switches", 30: "host bridge",
            40: "same NUMA node", 50: "across sockets (SYS)"}
RESET_FIX = "drain the GPU, then a GPU reset or reboot (manual): nvidia-smi -i {i} -r"


def persistence(ctx: AuditContext, i: int) -> Finding:
    mode = ctx.nvml.device(i, "GetPersistenceMode")
    src = "nvmlDeviceGetPersistenceMode"
    if mode == 1:
        return Finding(Grade.PASS, "enabled", "enabled", src)
    return Finding(Grade.WARN, "disabled", "enabled", src, needs_root=True,
                   fix="systemctl enable --now nvidia-persistenced  (or nvidia-smi -pm 1)",
                   note="without it the driver tears down and re-initialises the GPU between jobs")


def ecc_mode(ctx: AuditContext, i: int) -> Finding:
    current, pending = ctx.nvml.device(i, "GetEccMode")
    observed = f"current {'on' if current else 'off'}, pending {'on' if pending else 'off'}"
    src = "nvmlDeviceGetEccMode"
    if current and pending:
        return Finding(Grade.PASS, observed, "on", src)
    fix = f"nvidia-smi -i {i} -e 1, then a GPU reset or reboot (manual: never automatic)"
    note = "a change is pending until the next reset" if current != pending else "silent memory corruption goes undetected"
    return Finding(Grade.WARN, observed, "on", src, fix=fix, needs_root=True, note=note)


def ecc_errors(ctx: AuditContext, i: int) -> Finding:
    volatile = ctx.nvml.device(i, "GetTotalEccErrors", ECC_UNCORRECTED, ECC_VOLATILE)
    aggregate = ctx.nvml.device(i, "GetTotalEccErrors", ECC_UNCORRECTED, ECC_AGGREGATE)
    observed = f"uncorrectable: {volatile} since boot, {aggregate} lifetime"
    src = "nvmlDeviceGetTotalEccErrors(UNCORRECTED, VOLATILE/AGGREGATE)"
    if volatile:
        return Finding(Grade.FAIL, observed, "0", src, hardware=True, needs_root=True,
                       fix=RESET_FIX.format(i=i) + "; then dcgmi diag -r 3",
                       note="uncorrectable memory errors since boot: results on this GPU are suspect")
    if aggregate:
        return Finding(Grade.WARN, observed, "0", src, hardware=True,
                       note="past uncorrectable errors: watch row remapping")
    return Finding(Grade.PASS, observed, "0", src)


def row_remap(ctx: AuditContext, i: int) -> Finding:
    corrected, uncorrected, pending, failed = ctx.nvml.device(i, "GetRemappedRows")
    observed = f"remapped rows {corrected} corrected, {uncorrected} uncorrectable; pending {bool(pending)}, failure {bool(failed)}"
    src = "nvmlDeviceGetRemappedRows"
    if failed:
        return Finding(Grade.FAIL, observed, "no failure, nothing pending", src, hardware=True,
                       fix="take the GPU out of service (RMA)", note="a row could not be remapped")
    if pending:
        return Finding(Grade.FAIL, observed, "no failure, nothing pending", src, hardware=True, needs_root=True,
                       fix=RESET_FIX.format(i=i), note="a remap waits for a GPU reset")
    return Finding(Grade.PASS, observed, "no failure, nothing pending", src)


def clocks(ctx: AuditContext, i: int) -> Finding:
    now = ctx.nvml.device(i, "GetClockInfo", CLOCK_SM)
    top = ctx.nvml.device(i, "GetMaxClockInfo", CLOCK_SM)
    app = ctx.nvml.device(i, "GetApplicationsClock", CLOCK_SM)
    default = ctx.nvml.device(i, "GetDefaultApplicationsClock", CLOCK_SM)
    observed = f"SM {now} MHz now, application {app} of default {default}, max {top}"
    src = "nvmlDeviceGet{Clock,MaxClock,ApplicationsClock,DefaultApplicationsClock}Info(SM)"
    note = "current clock sampled now (idle unless a job runs)"
    if app < default:
        return Finding(Grade.WARN, observed, f"application clock {default} MHz", src, needs_root=True,
                       fix=f"nvidia-smi -i {i} -rac", note="application clocks lowered below default")
    return Finding(Grade.PASS, observed, f"application clock {default} MHz", src, note=note)


def power(ctx: AuditContext, i: int) -> Finding:
    enforced = ctx.nvml.device(i, "GetEnforcedPowerLimit") / 1000
    default = ctx.nvml.device(i, "GetPowerManagementDefaultLimit") / 1000
    observed = f"enforced {enforced:.0f} W, default {default:.0f} W"
    src = "nvmlDeviceGetEnforcedPowerLimit, nvmlDeviceGetPowerManagementDefaultLimit"
    if enforced < default:
        return Finding(Grade.WARN, observed, f"{default:.0f} W", src, needs_root=True,
                       fix=f"nvidia-smi -i {i} -pl {default:.0f}", note="power capped below the board default")
    return Finding(Grade.PASS, observed, f"{default:.0f} W", src)


def clock_events(ctx: AuditContext, i: int) -> Finding:
    mask = ctx.nvml.device(i, ("GetCurrentClocksEventReasons", "GetCurrentClocksThrottleReasons"))
    names = [name for bit, name in CLOCK_EVENTS.items() if mask & bit] or ["none"]
    observed = f"0x{mask:x}: {', '.join(names)}"
    src = "nvmlDeviceGetCurrentClocksEventReasons"
    rec = "no hardware slowdown, no thermal slowdown"
    if mask & HW_EVENTS:
        return Finding(Grade.FAIL, observed, rec, src, hardware=True,
                       fix="check cooling, power delivery and nvidia-smi -q -d PERFORMANCE; dcgmi diag -r 3",
                       note="the GPU is slowing itself down in hardware")
    if mask & 0x20:
        return Finding(Grade.WARN, observed, rec, src, hardware=True, fix="check airflow and inlet temperature")
    return Finding(Grade.PASS, observed, rec, src, note="sampled now (idle unless a job runs)")


def mig(ctx: AuditContext, i: int) -> Finding:
    current, pending = ctx.nvml.device(i, "GetMigMode")
    observed = f"current {'on' if current else 'off'}, pending {'on' if pending else 'off'}"
    rec = ctx.by_profile("off (a process sees one slice)", "on or off (slices isolate tenants)")
    src = "nvmlDeviceGetMigMode"
    if current != pending:
        return Finding(Grade.WARN, observed, rec, src, needs_root=True,
                       fix=f"reset GPU {i} to apply (manual)", note="a MIG mode change is pending")
    if current and ctx.profile == "training":
        return Finding(Grade.WARN, observed, rec, src, needs_root=True,
                       fix=f"nvidia-smi -i {i} -mig 0, then a GPU reset (manual)",
                       note="a training process can use one MIG slice, not the whole GPU")
    return Finding(Grade.PASS, observed, rec, src)


def pcie(ctx: AuditContext, i: int) -> Finding:
    gen, max_gen = ctx.nvml.device(i, "GetCurrPcieLinkGeneration"), ctx.nvml.device(i, "GetMaxPcieLinkGeneration")
    width, max_width = ctx.nvml.device(i, "GetCurrPcieLinkWidth"), ctx.nvml.device(i, "GetMaxPcieLinkWidth")
    observed = f"Gen{gen} x{width} of Gen{max_gen} x{max_width}"
    src = "nvmlDeviceGet{Curr,Max}PcieLink{Generation,Width}"
    if width < max_width:
        return Finding(Grade.WARN, observed, f"x{max_width}", src, hardware=True,
                       fix="reseat the GPU or riser; check the slot and BIOS bifurcation",
                       note="the link trained narrower than it can: host<->GPU bandwidth drops with it")
    note = "generation drops when idle to save power: re-check under load" if gen < max_gen else ""
    return Finding(Grade.PASS, observed, f"x{max_width}", src, note=note)


def nvlink(ctx: AuditContext, i: int) -> Finding:
    states = []
    for link in range(64):
        try:
            states.append(ctx.nvml.device(i, "GetNvLinkState", link))
        except NvmlUnavailable as err:
            if link == 0 or err.kind == "no_permission":
                raise
            break
    down = [str(n) for n, up in enumerate(states) if not up]
    observed = f"{len(states) - len(down)} of {len(states)} links active"
    src = "nvmlDeviceGetNvLinkState"
    if down and len(down) < len(states):
        return Finding(Grade.WARN, observed + f"; down: {','.join(down)}", "all links active", src,
                       hardware=True, fix="nvidia-smi nvlink -s; check fabric manager and cabling")
    return Finding(Grade.PASS, observed, "all links active", src,
                   note="no link trained (no NVLink peers)" if down else "")


def driver(ctx: AuditContext) -> Finding:
    version = ctx.nvml.system("GetDriverVersion")
    cuda = ctx.nvml.system("GetCudaDriverVersion")
    import torch

    runtime = torch.version.cuda
    driver_cuda = f"{cuda // 1000}.{cuda % 1000 // 10}"
    observed = f"driver {version} (CUDA {driver_cuda}), PyTorch CUDA runtime {runtime}"
    src = "nvmlSystemGetDriverVersion, nvmlSystemGetCudaDriverVersion, torch.version.cuda"
    rec = "runtime <= driver's CUDA version"
    if runtime is None:
        return Finding(Grade.SKIP, observed, rec, src, note="PyTorch built without CUDA")
    have = tuple(int(x) for x in driver_cuda.split("."))
    want = tuple(int(x) for x in runtime.split(".")[:2])
    if want[0] > have[0]:
        return Finding(Grade.FAIL, observed, rec, src, fix="upgrade the driver (or use the CUDA forward-compat package)")
    if want > have:
        return Finding(Grade.WARN, observed, rec, src, fix="upgrade the driver",
                       note="minor-version compatibility: runs, but PTX JIT of newer code fails")
    return Finding(Grade.PASS, observed, rec, src)


def topology(ctx: AuditContext) -> Finding:
    n = ctx.nvml.device_count()
    src = "nvmlDeviceGetTopologyCommonAncestor"
    if n < 2:
        return Finding(Grade.SKIP, f"{n} GPU", "inventory", src, note="one GPU: no peers")
    pairs = [f"{a}-{b}: {TOPOLOGY.get(ctx.nvml.topology(a, b), '?')}" for a in range(n) for b in range(a + 1, n)]
    return Finding(Grade.PASS, "; ".join(pairs), "inventory", src,
                   note="PCIe path only; NVLink peers are listed by gpuN.nvlink")


DEVICE_CHECKS = (
    ("persistence", persistence),
    ("ecc.mode", ecc_mode),
    ("ecc.errors", ecc_errors),
    ("ecc.remap", row_remap),
    ("clocks", clocks),
    ("power", power),
    ("clock_events", clock_events),
    ("mig", mig),
    ("pcie", pcie),
    ("nvlink", nvlink),
)
SYSTEM_CHECKS = (("gpu.driver", driver), ("gpu.topology", topology))
