"""Throttle flags come from NVML readings inside a sample's window (fake NVML, or NVML readings
recorded on an H100)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from aisp.harness.telemetry import Reading, Telemetry, reason_names

RECORDED = Path(__file__).resolve().parent / "fixtures" / "timing" / "nvml_h100_gemm.json"


def _fake(throttle_after: float):
    t0 = time.perf_counter()

    def read() -> Reading:
        now = time.perf_counter()
        hot = now - t0 > throttle_after
        return Reading(t=now, sm_clock_mhz=1200 if hot else 1980, mem_clock_mhz=2619, temperature_c=85 if hot else 60,
                       power_w=690, reasons=0x40 if hot else 0x0)
    return read


def test_samples_in_throttled_window_are_flagged():
    with Telemetry(_fake(throttle_after=0.15)) as tel:
        a0 = time.perf_counter()
        time.sleep(0.05)
        a1 = time.perf_counter()
        time.sleep(0.2)
        b0 = time.perf_counter()
        time.sleep(0.05)
        b1 = time.perf_counter()
    assert tel.throttled(a0, a1) == []
    assert tel.throttled(b0, b1) == ["hw_thermal_slowdown"]
    summary = tel.summary()
    assert summary["sm_clock_mhz_min"] == 1200 and summary["sm_clock_mhz_max"] == 1980
    assert summary["throttle_reasons_seen"] == ["hw_thermal_slowdown"]


def test_power_cap_is_a_throttle_reason_idle_is_not():
    assert reason_names(0x4) == ["sw_power_cap"]
    assert reason_names(0x1) == []
    assert reason_names(0x8 | 0x80) == ["hw_slowdown", "hw_power_brake_slowdown"]


def test_power_capped_gemm_recorded_on_an_h100_is_flagged():
    """Back-to-back 8192^3 bf16 matmuls: NVML reported only the SW power cap while the SM clock fell
    from 1980 MHz to 1350-1530 MHz. A sample timed then is flagged; one timed after is not."""
    tel = Telemetry(lambda: Reading(0, 0, 0, 0, 0, 0))
    tel.readings = [Reading(**r) for r in json.loads(RECORDED.read_text())["readings"]]
    assert tel.throttled(1.0, 1.0016) == ["sw_power_cap"]
    assert tel.throttled(10.0, 10.0016) == []
    summary = tel.summary()
    assert summary["throttle_reasons_seen"] == ["sw_power_cap"] and summary["info_reasons_seen"] == []
    assert summary["sm_clock_mhz_max"] <= 1530


def test_a_failing_read_loses_one_reading_not_the_run():
    calls = {"n": 0}
    good = _fake(10)

    def flaky() -> Reading:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("NVML hiccup")
        return good()

    with Telemetry(flaky) as tel:
        time.sleep(0.1)
    assert len(tel.readings) >= 3
