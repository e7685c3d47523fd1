"""The GPU timeline of a traced call, for ch04/overlap_profile.py: each device event's kind
(collective, GEMM, copy, other) and, per call, the busy time of each kind, the collective time
beside compute, the idle time and the top kernels, from a torch.profiler Chrome trace's events."""

from __future__ import annotations

from aisp.profile.trace_events import DEVICE_WORK, Event, covered, merge

CLASSES = ("comm", "gemm", "copy", "other")
COMM = ("nccl", "allreduce", "all_reduce", "allgather", "reducescatter", "symmetric_memory", "multimem")
GEMM = ("gemm", "xmma", "cutlass", "nvjet", "wgmma", "matmul")


def kind(event: Event) -> str:
    """comm (a collective's kernel), gemm, copy (memcpy / memset) or other."""
    name = event.name.lower()
    if event.cat in ("gpu_memcpy", "gpu_memset"):
        return "copy"
    if any(key in name for key in COMM):
        return "comm"
    return "gemm" if any(key in name for key in GEMM) else "other"


def timeline(events: list[Event], calls: int) -> dict:
    """Per call (ms): the span from the first device event to the last, each kind's busy time (the
    union of its intervals), the collective time that overlaps compute (gemm or other), the idle
    time, and the top kernels by time. ``events``: a trace's events; only device work counts."""
    work = [e for e in events if e.cat in DEVICE_WORK]
    if not work:
        return {"span_ms": 0.0, "busy_ms": {k: 0.0 for k in CLASSES}, "comm_overlap_ms": 0.0, "idle_ms": 0.0,
                "top": [], "note": "no device work in the trace (a CPU run)"}
    per = {k: merge((e.start, e.end) for e in work if kind(e) == k) for k in CLASSES}
    compute = merge(per["gemm"] + per["other"])
    overlap = covered(per["comm"]) + covered(compute) - covered(per["comm"] + compute)
    span = max(e.end for e in work) - min(e.start for e in work)
    totals: dict[str, float] = {}
    for e in work:
        totals[e.name] = totals.get(e.name, 0.0) + e.dur
    top = sorted(totals.items(), key=lambda kv: -kv[1])[:6]
    ms = 1e-3 / calls
    return {"span_ms": span * ms, "busy_ms": {k: covered(v) * ms for k, v in per.items()},
            "comm_overlap_ms": overlap * ms, "idle_ms": (span - covered(i for v in per.values() for i in v)) * ms,
            "top": [(name[:80], t * ms) for name, t in top]}
