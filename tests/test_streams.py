"""Work left on other streams, read from the GPU's timestamps in a profiler trace (synthetic traces in
the shape torch's profiler exports: the marker range, the launch inside it, GPU work by correlation)."""

from __future__ import annotations

from aisp.harness.results import assemble
from aisp.harness.streams import MARKER, SPACER, leftover_us, spacer_covered
from aisp.harness.timing import left_on_streams


def _kernel(name, ts, dur, stream, correlation, device=0, cat="kernel"):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur,
            "args": {"stream": stream, "device": device, "correlation": correlation}}


def _trace(*work, marker_at=100.0):
    """The call's work, then the marker range at ``marker_at`` whose launch (correlation 99) ran a
    2 us spin on stream 7 (the current stream) starting right after."""
    return [*work,
            {"ph": "X", "cat": "user_annotation", "name": MARKER, "ts": marker_at, "dur": 6.0},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": marker_at + 1, "dur": 4.0,
             "args": {"correlation": 99}},
            _kernel("at::cuda::spin_kernel(long)", marker_at + 10, 2.0, 7, 99)]


def test_a_spin_left_on_a_side_stream_is_measured_past_the_marker():
    """60 us on stream 13 ending 30 us after the marker kernel's start (110 us): 30 us left behind."""
    events = _trace(_kernel("spin", 50.0, 30.0, 7, 1), _kernel("spin", 80.0, 60.0, 13, 2))
    assert leftover_us(events) == 30.0


def test_joined_work_copies_on_the_current_stream_and_other_gpus_are_not_left_over():
    joined = _kernel("gemm", 40.0, 50.0, 13, 1)  # ends at 90, before the marker kernel starts (110)
    copy = _kernel("Memcpy HtoD", 60.0, 20.0, 7, 2, cat="gpu_memcpy")
    other_gpu = _kernel("nccl", 60.0, 200.0, 21, 3, device=1)
    assert leftover_us(_trace(joined, copy, other_gpu)) == 0.0
    late_copy = _kernel("Memcpy DtoH", 100.0, 40.0, 13, 4, cat="gpu_memcpy")
    assert leftover_us(_trace(joined, late_copy)) == 30.0


def test_the_markers_range_drawn_on_the_gpus_timeline_is_not_taken_for_the_cpu_one():
    """torch's profiler exports a record_function range twice: on the CPU (user_annotation) and over the
    GPU work it launched (gpu_user_annotation, later, on the GPU's clock)."""
    events = _trace(_kernel("spin", 80.0, 60.0, 13, 2))
    events.append({"ph": "X", "cat": "gpu_user_annotation", "name": MARKER, "ts": 110.0, "dur": 2.0,
                   "args": {"device": 0, "stream": 7}})
    assert leftover_us(events) == 30.0


def _spacer(launch_at, ends_at):
    """The spacer range with its launch (correlation 98) at ``launch_at``, its kernel ending at ``ends_at``."""
    return [{"ph": "X", "cat": "user_annotation", "name": SPACER, "ts": launch_at - 1, "dur": 6.0},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": launch_at, "dur": 4.0,
             "args": {"correlation": 98}},
            _kernel("at::cuda::spin_kernel(long)", launch_at + 5, ends_at - launch_at - 5, 7, 98)]


def test_the_spacer_must_outlast_the_hosts_launch_of_the_marker():
    """The marker's launch is at 101 us: a spacer ending at 2,000 us covered the call's issue; one
    ending at 60 us did not (the call then ran as the host got to it: a late marker hides a tail)."""
    call = _kernel("spin", 80.0, 60.0, 13, 2)
    assert spacer_covered([*_spacer(0.0, 2000.0), *_trace(call)]) is True
    assert spacer_covered([*_spacer(0.0, 60.0), *_trace(call)]) is False
    assert spacer_covered(_trace(call)) is None  # no spacer in the trace: nothing to say
    # the spacer is on the current stream: its own time is not work left on another stream
    assert leftover_us([*_spacer(0.0, 2000.0), *_trace(call)]) == 30.0


def test_no_marker_kernel_is_no_answer():
    events = _trace(_kernel("spin", 50.0, 30.0, 7, 1))
    assert leftover_us(events[:-1]) is None  # the marker's kernel is missing
    assert leftover_us([e for e in events if e["name"] != MARKER]) is None


def test_the_rule_allows_rounding_and_a_tenth_of_the_events():
    assert left_on_streams(None, [0.03]) is None
    assert left_on_streams(4.0, [0.03]) is None  # under the 5 us floor
    assert left_on_streams(28.0, [0.03]).startswith(
        "work outside the timed stream: in a profiled call, work on another stream ran 28.0 µs")
    assert left_on_streams(80.0, [1.0]) is None  # under 10% of 1 ms
    assert left_on_streams(150.0, [1.0]) is not None


def test_a_variant_with_work_left_on_a_stream_is_an_error_with_no_speedup():
    def record(name, leftover):
        return {"name": name, "file": f"/x/{name}.py", "verdict": "pending", "reason": None,
                "samples_ms": [0.03] * 5, "host_samples_ms": [0.03] * 5, "issue_samples_ms": [0.01] * 5,
                "tail_samples_ms": [0.001] * 5, "idle_probe_ms": [0.035] * 3, "stream_leftover_us": leftover,
                "memory": {}, "metrics": {}}
    result = assemble({"name": "spin"}, {}, [record("baseline_spin", 0.0), record("optimized_spin", 28.0)])
    bad = result["variants"][0]
    assert bad["verdict"] == "error" and "GPU timestamps" in bad["reason"]
    assert result["speedup"] is None
