"""Work left on other streams, read from the GPU's timestamps in a profiler trace (synthetic traces in
the shape torch's profiler exports: the marker range, the launch inside it, GPU work by correlation)."""

from __future__ import annotations

from aisp.harness.results import assemble
from aisp.harness.streams import MARKER, SPACER, beside_spacer_us, leftover_us, spacer_covered
from aisp.harness.timing import idle_tail_overruled, left_on_streams, tail_overruled, unseen_work


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


def _jittery(name, leftover, idle_tail=0.008):
    """ch18:split_kv_decode's figures from a 4 x H200 book run (2026-11-28): 0.076 ms events, a median
    sync tail of 0.021 ms against 0.007 ms after an empty call (the tail rule fires), calls from idle
    at the empty call's tail; ``leftover``: the GPU's timestamps (None: not read)."""
    return {"name": name, "file": f"/x/{name}.py", "verdict": "pending", "reason": None,
            "samples_ms": [0.076] * 20, "host_samples_ms": [0.3] * 20, "issue_samples_ms": [0.2] * 20,
            "tail_samples_ms": [0.021] * 20, "empty_tail_ms": [0.007] * 5,
            "idle_probe_ms": [0.4] * 3, "idle_tail_ms": [idle_tail] * 3, "stream_leftover_us": leftover,
            "memory": {}, "metrics": {}}


def test_a_sync_tail_the_gpus_timestamps_contradict_is_host_jitter_not_an_error():
    tails = ([0.021] * 20, [0.076] * 20, [0.007] * 5, [0.008] * 3, [0.4] * 3)
    assert unseen_work(tails[0], tails[1], empty_ms=tails[2]) is not None  # the host's tail alone fires
    note = tail_overruled(*tails, 0.0)
    assert note.startswith("its sync tail read 0.014 ms past its events")
    assert tail_overruled(*tails, None) is None  # timestamps not read: the tail stands
    assert tail_overruled(*tails, 28.0) is None  # the timestamps see work left behind
    assert tail_overruled(tails[0], tails[1], tails[2], [0.05] * 3, tails[4], 0.0) is None  # idle calls see it
    assert tail_overruled([0.008] * 20, *tails[1:], 0.0) is None  # the tail rule does not fire at all

    base = {**_jittery("baseline_decode", 0.0), "tail_samples_ms": [0.008] * 20, "samples_ms": [0.3] * 20}
    result = assemble({"name": "decode"}, {}, [base, _jittery("optimized_decode", 0.0)])
    assert result["variants"][0]["verdict"] != "error" and result["speedup"] is not None
    for leftover, idle_tail in ((None, 0.008), (28.0, 0.008), (0.0, 0.05)):
        result = assemble({"name": "decode"}, {}, [base, _jittery("optimized_decode", leftover, idle_tail)])
        bad = result["variants"][0]
        assert bad["verdict"] == "error" and "work outside the timed stream" in bad["reason"], (leftover, idle_tail)
        assert result["speedup"] is None


def _idle_jitter(name, leftover, timed_tail=0.008):
    """ch19:w4a16_gemm's one-stream kernel in an H200 run (2026-11-29): calls from idle of 0.212 ms whose
    sync tail read 0.026 ms past an empty call's (the allowance: 10% of 0.212 ms), timed calls of 0.107 ms
    with a quiet tail; ``leftover``: the GPU's timestamps (None: not read)."""
    return {**_jittery(name, leftover), "samples_ms": [0.107] * 20, "tail_samples_ms": [timed_tail] * 20,
            "idle_probe_ms": [0.212] * 3, "idle_tail_ms": [0.033] * 3}


def test_an_idle_calls_tail_the_gpus_timestamps_contradict_is_host_jitter_not_an_error():
    idle, empty, timed = ([0.033] * 3, [0.212] * 3), [0.007] * 5, ([0.008] * 20, [0.107] * 20)
    assert unseen_work(*idle, empty_ms=empty) is not None  # the idle calls' tail alone fires
    note = idle_tail_overruled(*idle, empty, *timed, 0.0)
    assert note.startswith("its calls from idle read a sync tail of 0.026 ms past their events")
    assert idle_tail_overruled(*idle, empty, *timed, None) is None  # timestamps not read: the tail stands
    assert idle_tail_overruled(*idle, empty, *timed, 28.0) is None  # the timestamps see work left behind
    assert idle_tail_overruled(*idle, empty, [0.03] * 20, timed[1], 0.0) is None  # the timed calls see it too
    assert idle_tail_overruled([0.008] * 3, idle[1], empty, *timed, 0.0) is None  # the idle rule does not fire

    base = {**_jittery("baseline_w4a16", 0.0), "samples_ms": [0.6] * 20, "tail_samples_ms": [0.008] * 20}
    result = assemble({"name": "w4a16"}, {}, [base, _idle_jitter("optimized_w4a16", 0.0)])
    assert result["variants"][0]["verdict"] != "error" and result["speedup"] is not None
    for leftover, timed_tail in ((None, 0.008), (28.0, 0.008), (0.0, 0.03)):
        result = assemble({"name": "w4a16"}, {}, [base, _idle_jitter("optimized_w4a16", leftover, timed_tail)])
        bad = result["variants"][0]
        assert bad["verdict"] == "error" and "work outside the timed stream" in bad["reason"], (leftover, timed_tail)


def test_confirm_tails_reads_the_timestamps_only_where_the_tail_fires(monkeypatch):
    import torch

    from aisp.harness import execute
    from aisp.harness.options import RunOptions

    calls = []

    def traced(fn, device):
        calls.append(fn)
        return (len(calls) * 1.0, None)  # 1, 2, 3 µs: the longest is kept

    monkeypatch.setattr(execute, "traced_leftover", traced)

    class Bench:
        def run(self):
            return None

    def variant(tails):
        var = execute.Variant(path=execute.Path("/x/optimized_decode.py"))
        var.bench = Bench()
        var.samples_ms, var.tail_samples_ms, var.empty_tail_ms = [0.076] * 20, tails, [0.007] * 5
        var.idle_probe_ms, var.idle_tail_ms = [0.4] * 3, [0.008] * 3
        return var
    quiet, jittery = variant([0.008] * 20), variant([0.021] * 20)
    execute.confirm_tails([quiet, jittery], RunOptions(), torch.device("cuda"))
    assert len(calls) == execute.TRACE_CONFIRMS and quiet.stream_leftover_us is None
    assert jittery.stream_leftover_us == 3.0
    assert any("host wake-up jitter" in n for n in jittery.evidence.notes)
    calls.clear()
    idle_jittery = variant([0.008] * 20)  # the timed tail quiet, the calls from idle's over its allowance
    idle_jittery.idle_probe_ms, idle_jittery.idle_tail_ms = [0.212] * 3, [0.033] * 3
    execute.confirm_tails([idle_jittery], RunOptions(), torch.device("cuda"))
    assert len(calls) == execute.TRACE_CONFIRMS and idle_jittery.stream_leftover_us == 3.0
    assert any("its calls from idle read a sync tail" in n for n in idle_jittery.evidence.notes)
    calls.clear()
    execute.confirm_tails([variant([0.021] * 20)], RunOptions(), torch.device("cpu"))
    assert not calls  # no GPU timestamps on a CPU


def test_work_beside_the_spacer_is_work_the_events_never_see():
    """Two ~30 us spins on a stream that never waited for the current one start at once, beside the
    spacer (5-2,000 us on stream 7), as the timing fixture under_spacer's do: 60 us unseen. Work on
    the current stream, on another GPU, or after the spacer (a stream that waited for it) is not."""
    spacer = _spacer(0.0, 2000.0)
    side = [_kernel("spin", 20.0, 30.0, 13, 2), _kernel("spin", 50.0, 30.0, 13, 3)]
    assert beside_spacer_us([*spacer, *side]) == 60.0
    # a second side stream running at the same time counts once (the union of the overlaps)
    assert beside_spacer_us([*spacer, *side, _kernel("spin", 30.0, 40.0, 14, 4)]) == 60.0
    # partly beside: only the part before the spacer's end
    assert beside_spacer_us([*spacer, _kernel("spin", 1990.0, 30.0, 13, 2)]) == 10.0
    assert beside_spacer_us([*spacer, _kernel("spin", 2001.0, 30.0, 13, 2)]) == 0.0  # waited for it
    assert beside_spacer_us([*spacer, _kernel("spin", 20.0, 30.0, 7, 2)]) == 0.0  # the current stream
    assert beside_spacer_us([*spacer, _kernel("spin", 20.0, 30.0, 13, 2, device=1)]) == 0.0  # another GPU
    assert beside_spacer_us(side) == 0.0  # no spacer: nothing to say
    # the rule then fires on it as on work left past the marker
    assert left_on_streams(beside_spacer_us([*spacer, *side]), [0.03]) is not None


def test_the_stream_probe_runs_after_every_timed_sample(monkeypatch):
    """The first run of torch's profiler in a process slows the calls right after it (for about 2 s on an
    H200), so the profiled call of a short variant comes after the timed samples (and after the checked call's
    verification), never between them; a long variant gets none, nor does any variant on a CPU."""
    import torch

    from aisp.harness import execute
    from aisp.harness.options import RunOptions

    order = []
    monkeypatch.setattr(execute, "traced_leftover", lambda fn, device: (order.append(("traced", fn)), (2.0, None))[1])
    monkeypatch.setattr(execute, "start", lambda paths, options: (torch.device("cuda"), variants, execute.ProcessSettings(
        execute.Path("/x"), []), execute.Workload()))
    monkeypatch.setattr(execute, "unmet_requirements", lambda requires, device: None)
    monkeypatch.setattr(execute, "verify_seed", lambda *a, **k: None)
    monkeypatch.setattr(execute, "timed_with_telemetry", lambda live, *a, **k: order.append("timed") or {})
    monkeypatch.setattr(execute, "verify_checked", lambda *a, **k: order.append("verified"))
    monkeypatch.setattr(execute, "confirm_tails", lambda *a, **k: order.append("tails"))
    monkeypatch.setattr(execute, "measure_standing", lambda live, device: live)
    monkeypatch.setattr(execute, "teardown", lambda variants: None)

    class Bench:
        def run(self):
            return None

    variants = []
    for name, idle in (("baseline_x", [0.4] * 3), ("optimized_x", [0.05] * 3)):
        var = execute.Variant(path=execute.Path(f"/x/{name}.py"))
        var.bench, var.idle_probe_ms = Bench(), idle
        variants.append(var)
    execute.run_variants([v.path for v in variants], RunOptions())
    assert order[:2] == ["timed", "verified"] and order[-1] == "tails", order
    assert [e for e in order if isinstance(e, tuple)] == [("traced", variants[1].bench.run)]
    assert variants[1].stream_leftover_us == 2.0 and variants[0].stream_leftover_us is None
    order.clear()
    execute.probe_streams(variants, RunOptions(), torch.device("cpu"))
    assert not order
