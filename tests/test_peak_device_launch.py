"""The device-side launch floors of ``aisp peak`` (aisp/peak/device_launch.py, device_launch.cu): the
kernels launch through the device runtime (its sm_90 SASS, built on a CPU with nvcc), a grid
count that falls short fails the probe, a CPU skips it with the reason, and the count
``device_launches`` is priced at it; on a GPU, the figure is measured (every grid counted)."""

from __future__ import annotations

import re
import shutil
from dataclasses import asdict

import pytest
import torch

from aisp.harness.benchmark import LatencyCounts
from aisp.kits import native
from aisp.peak import device_launch
from aisp.peak.latency import check_counted
from aisp.peak.measure import measure_peaks, probe_names
from aisp.peak.probes import QUICK, ProbeSkipped
from aisp.report.ceilings import MissingPeak, ceiling

needs_tools = pytest.mark.skipif(shutil.which("nvcc") is None or native.cuobjdump() is None,
                                 reason="needs nvcc and cuobjdump")


@needs_tools
def test_the_chain_kernel_launches_from_the_device() -> None:
    """Built with -rdc and the device runtime for sm_90: tail_chain's own code calls the device
    runtime's launch (a kernel that only looped would read as a fast 'launch')."""
    sass = device_launch.LIBRARY.sass("90")
    body = re.split(r"\n\s*Function : ", sass)
    for kernel in ("_Z10tail_chain", "_Z11graph_chain"):
        chain = next(part for part in body[1:] if part.splitlines()[0].startswith(kernel))
        assert re.search(r"CALL\.\w+", chain), f"{kernel} calls nothing: no device-side launch"
    assert "__cudaCDP2LaunchDeviceV2" in sass


def test_a_chain_that_did_not_run_every_grid_fails_the_probe() -> None:
    links = device_launch.LINKS
    check_counted((3 + 1) * 10 * links, links, calls=10, repeats=3, what="grids")  # every grid ran
    with pytest.raises(RuntimeError, match="grids: 639 ran, 640 were launched"):
        check_counted((3 + 1) * 10 * links - 1, links, calls=10, repeats=3, what="grids")


def test_a_cpu_skips_it_with_the_reason() -> None:
    with pytest.raises(ProbeSkipped, match="no GPU"):
        device_launch.device_launches(torch.device("cpu"), 10, 3)
    assert "device_launch" in probe_names()
    peaks = measure_peaks(QUICK, torch.device("cpu"), only=["device_launch"])
    assert "no GPU" in peaks["skipped"]["device_launch"]


def test_device_launches_are_priced_at_the_device_floors() -> None:
    counts = {"latency": asdict(LatencyCounts(launches=1, device_launches=16, device_graph_launches=2))}
    peaks = {"measurements": {}, "latency": {"launch_eager": {"value": 5.0}, "launch_device_tail": {"value": 2.0},
                                             "launch_device_graph": {"value": 3.0}}}
    found = ceiling({"name": "optimized_x", "summary": {"median": 0.074}}, counts, peaks)
    assert found["kind"] == "latency" and found["value"] == pytest.approx(5.0 + 16 * 2.0 + 2 * 3.0)
    assert "16 device_launches x 2.00 us" in found["detail"] and "2 device_graph_launches x 3.00 us" in found["detail"]
    with pytest.raises(MissingPeak, match="launch_device_tail"):
        ceiling({"name": "optimized_x", "summary": {"median": 0.074}}, counts,
                {"measurements": {}, "latency": {"launch_eager": {"value": 5.0}}})


@pytest.mark.gpu
def test_the_floor_is_measured_on_a_gpu() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    found = device_launch.device_launches(torch.device("cuda", 0), 50, 3)
    for name in ("launch_device_tail", "launch_device_graph"):
        print(f"{name} {found[name]['value']:.2f} us ({found[name]['detail']})")
        assert 0.1 < found[name]["value"] < 100
