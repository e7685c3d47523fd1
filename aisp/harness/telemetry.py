"""GPU telemetry while timing: NVML clocks, temperature, power and clock-event (throttle) reasons,
sampled on a background thread; timed samples taken while the GPU was throttled are flagged."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import reduce
from operator import or_
from typing import Any

import torch

# NVML clocks-event reason bits (nvmlClocksEventReason*): the ones that mean the GPU ran below the
# clocks it was asked for: its power cap (the usual one under a large GEMM: an H100 went from 1980 to
# 1350-1530 MHz), a hardware or thermal slowdown, a power brake; not idling or an application's own
# clock setting.
THROTTLE_REASONS = {
    0x0000000000000004: "sw_power_cap",
    0x0000000000000008: "hw_slowdown",
    0x0000000000000020: "sw_thermal_slowdown",
    0x0000000000000040: "hw_thermal_slowdown",
    0x0000000000000080: "hw_power_brake_slowdown",
}
IDLE = {0x0000000000000001: "gpu_idle"}
SAMPLE_PERIOD_S = 0.02


@dataclass(frozen=True)
class Reading:
    t: float
    """time.perf_counter() when read (the clock the timing loop uses)."""
    sm_clock_mhz: float
    mem_clock_mhz: float
    temperature_c: float
    power_w: float
    reasons: int


def reason_names(bits: int, table: dict[int, str] = THROTTLE_REASONS) -> list[str]:
    return [name for bit, name in table.items() if bits & bit]


def _nvml_handle(device: torch.device) -> Any:
    """pynvml and the device's NVML handle, or None where NVML is unavailable."""
    try:
        import pynvml
        pynvml.nvmlInit()
        props = torch.cuda.get_device_properties(device)
        bus = f"{props.pci_domain_id:08X}:{props.pci_bus_id:02X}:{props.pci_device_id:02X}.0"
        return pynvml, pynvml.nvmlDeviceGetHandleByPciBusId(bus)
    except Exception:  # no NVML, no driver access, or an old torch without PCI ids: no telemetry
        return None


def nvml_memory_reader(device: torch.device) -> Callable[[], int] | None:
    """A function that reads the device's used memory in bytes (NVML: every allocation on the GPU,
    native and NCCL ones included, by any process), or None where NVML is unavailable."""
    found = _nvml_handle(device)
    if found is None:
        return None
    pynvml, handle = found
    try:
        pynvml.nvmlDeviceGetMemoryInfo(handle)
    except Exception:  # a query NVML refuses here: no reading
        return None
    return lambda: int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)


def nvml_reader(device: torch.device) -> Callable[[], Reading] | None:
    """A function that reads the device's NVML state now, or None where NVML is unavailable."""
    found = _nvml_handle(device)
    if found is None:
        return None
    pynvml, handle = found

    def read() -> Reading:
        return Reading(
            t=time.perf_counter(),
            sm_clock_mhz=pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
            mem_clock_mhz=pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
            temperature_c=pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
            power_w=pynvml.nvmlDeviceGetPowerUsage(handle) / 1000,
            reasons=pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle),
        )
    try:
        read()
    except Exception:  # a query NVML refuses here (NotSupported/NoPermission): no telemetry
        return None
    return read


class Telemetry:
    """Samples ``read()`` every SAMPLE_PERIOD_S inside a ``with`` block."""

    def __init__(self, read: Callable[[], Reading]) -> None:
        self.read = read
        self.readings: list[Reading] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.readings.append(self.read())
            except Exception:  # a transient NVML error loses one reading, not the run
                pass
            self._stop.wait(SAMPLE_PERIOD_S)

    def __enter__(self) -> Telemetry:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.readings.append(self.read())

    def _within(self, *windows: tuple[float, float]) -> list[Reading]:
        """The readings taken in any of the windows, each widened by one sample period each side."""
        return [r for r in self.readings if any(a - SAMPLE_PERIOD_S <= r.t <= b + SAMPLE_PERIOD_S for a, b in windows)]

    def throttled(self, start: float, end: float) -> list[str]:
        """Throttle reasons seen in the window, widened by one sample period each side."""
        return reason_names(reduce(or_, [r.reasons for r in self._within((start, end))], 0))

    def clock_over(self, windows: list[tuple[float, float]]) -> float | None:
        """The median SM clock of the readings in the windows, each widened by one sample period."""
        clocks = [r.sm_clock_mhz for r in self._within(*windows)]
        return float(statistics.median(clocks)) if clocks else None

    def summary(self) -> dict[str, Any]:
        if not self.readings:
            return {}
        seen = reduce(or_, [r.reasons for r in self.readings], 0)
        first = asdict(self.readings[0])
        keys = [k for k in first if k not in ("t", "reasons")]
        return {
            "readings": len(self.readings),
            **{f"{k}_min": min(getattr(r, k) for r in self.readings) for k in keys},
            **{f"{k}_max": max(getattr(r, k) for r in self.readings) for k in keys},
            "throttle_reasons_seen": reason_names(seen),
            "info_reasons_seen": reason_names(seen, IDLE),
        }
