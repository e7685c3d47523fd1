"""Throttle flags come from NVML readings inside a sample's window (fake NVML, or NVML readings
recorded on an H100)."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import pytest

from aisp.harness.telemetry import SAMPLE_PERIOD_S, Reading, Telemetry, reason_names

RECORDED = Path(__file__).resolve().parent / "fixtures" / "timing" / "nvml_h100_gemm.json"


def _reading(t: float, hot: bool) -> Reading:
    return Reading(t=t, sm_clock_mhz=1200 if hot else 1980, mem_clock_mhz=2619, temperature_c=85 if hot else 60,
                   power_w=690, reasons=0x40 if hot else 0x0)


def test_samples_in_throttled_window_are_flagged():
    """Readings every sample period, hot from t = 0.15 s: a window well before is clean, one after is
    flagged, and a window's edges reach one sample period out (no thread, no clock: the readings are given)."""
    tel = Telemetry(lambda: _reading(0.0, False))
    tel.readings = [_reading(k * SAMPLE_PERIOD_S, k * SAMPLE_PERIOD_S > 0.15) for k in range(20)]
    assert tel.throttled(0.0, 0.05) == []
    assert tel.throttled(0.25, 0.30) == ["hw_thermal_slowdown"]
    assert tel.throttled(0.10, 0.145) == ["hw_thermal_slowdown"]  # the hot reading at 0.16 is within a period
    assert tel.throttled(0.10, 0.12) == []
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
    """The sampler thread keeps reading after an NVML error (waits on its progress, not on a clock)."""
    calls = {"n": 0}

    def flaky() -> Reading:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("NVML hiccup")
        return _reading(time.perf_counter(), False)

    with Telemetry(flaky) as tel:
        give_up = time.monotonic() + 60
        while calls["n"] < 4 and time.monotonic() < give_up:
            time.sleep(0.01)
    assert calls["n"] >= 4 and len(tel.readings) == calls["n"] - 1  # every call but the failed one, and the last


def test_the_clock_over_the_windows_is_the_median_of_the_readings_in_them():
    """Readings at 0.00-0.19 s with the clock falling 10 MHz a step; windows [0.055, 0.065] and [0.145, 0.155],
    widened by one period (0.02 s) each side, take the readings at 0.04-0.08 and 0.13-0.17."""
    tel = Telemetry(lambda: Reading(0, 0, 0, 0, 0, 0))
    tel.readings = [Reading(t=i / 100, sm_clock_mhz=1980 - 10 * i, mem_clock_mhz=0, temperature_c=0, power_w=0,
                            reasons=0) for i in range(0, 20)]
    assert SAMPLE_PERIOD_S == 0.02
    assert tel.clock_over([(0.055, 0.065), (0.145, 0.155)]) == pytest.approx(statistics.median(
        [1980 - 10 * i for i in (*range(4, 9), *range(13, 18))]))
    assert tel.clock_over([(5.0, 6.0)]) is None
