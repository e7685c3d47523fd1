"""The conditional-node floor of ``aisp peak`` (aisp/peak/graph_while.py, graph_while.cu): the body
kernel sets the WHILE condition on the device (its sm_90 SASS, built on a CPU with nvcc), a pass count
that falls short fails the probe, a CPU skips it with the reason, and ``while_iterations`` is priced
at it; on a GPU, the figure is measured (every pass counted)."""

from __future__ import annotations

import re
import shutil

import pytest
import torch

from aisp.kits import native
from aisp.peak import graph_while
from aisp.peak.latency import check_counted
from aisp.peak.measure import measure_peaks, probe_names
from aisp.peak.probes import QUICK, ProbeSkipped
from aisp.report.ceilings import ceiling

needs_tools = pytest.mark.skipif(shutil.which("nvcc") is None or native.cuobjdump() is None,
                                 reason="needs nvcc and cuobjdump")


@needs_tools
def test_the_body_kernel_sets_the_condition_on_the_device() -> None:
    sass = graph_while.LIBRARY.sass("90")
    body = next(part for part in re.split(r"\n\s*Function : ", sass)[1:] if part.startswith("_Z11while_count"))
    assert re.search(r"CALL\.\w+", body), "while_count never calls cudaGraphSetConditional"
    assert "STG" in body  # the pass is counted


def test_a_pass_count_that_falls_short_fails_the_probe() -> None:
    passes = graph_while.PASSES
    check_counted((3 + 1) * 10 * passes, passes, calls=10, repeats=3, what="passes")
    with pytest.raises(RuntimeError, match="passes: 2559 ran, 2560 were launched"):
        check_counted((3 + 1) * 10 * passes - 1, passes, calls=10, repeats=3, what="passes")


def test_a_cpu_skips_it_with_the_reason() -> None:
    with pytest.raises(ProbeSkipped, match="no GPU"):
        graph_while.while_pass(torch.device("cpu"), 10, 3)
    assert "graph_while" in probe_names()
    assert "no GPU" in measure_peaks(QUICK, torch.device("cpu"), only=["graph_while"])["skipped"]["graph_while"]


def test_while_iterations_are_priced_at_the_pass_floor() -> None:
    peaks = {"measurements": {}, "latency": {"graph_while_iteration": {"value": 1.5}, "launch_graph": {"value": 4.0}}}
    counts = {"latency": {"graph_launches": 1, "while_iterations": 20}}
    found = ceiling({"name": "optimized_x", "summary": {"median": 0.068}}, counts, peaks)
    assert found["kind"] == "latency" and found["value"] == pytest.approx(4.0 + 20 * 1.5)
    assert found["percent"] == pytest.approx(50)


@pytest.mark.gpu
def test_the_pass_floor_is_measured_on_a_gpu() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    found = graph_while.while_pass(torch.device("cuda", 0), 50, 3)["graph_while_iteration"]
    print(f"graph_while_iteration {found['value']:.2f} us ({found['detail']})")
    assert 0.05 < found["value"] < 100
