"""Every pair against its true ceiling: compute, memory or latency, whichever its workload declares.

Each declared bound is a lower bound on one ``run()``'s time on this machine: ``flops`` at the
matmul peak of its precision (a SIMT precision's: the CUDA cores' FMA rate), ``bytes`` at the peak
bandwidth of its ``link``, and the latency counts (:class:`aisp.harness.benchmark.LatencyCounts`) at
their measured floors, one after another. A pair of world size N declares its FLOPs and bytes summed
over its ranks and is held to N x one GPU's peaks (:func:`aisp.report.roofline.gpus_at_once`); bytes
over a host link (host memory, the page cache, page faults) to 1 x the host's figure, which its ranks
share; its latency counts, one rank's chain, are not scaled.
The pair's ceiling is the tightest, i.e. the longest, of them; its kind says which. For a pair
with FLOPs and bytes this is exactly the roofline's bound. A variant reaches ``percent`` = ceiling
time / its median time. Where the workload counts items (tokens of a serving loop), the ceiling is
also given as items/s: a decode loop that declares the weight bytes it streams per step is held
to the HBM bound, and tokens / that time is its tokens/s ceiling.

``aisp report ceilings RUN_DIR`` lists every pair with its ceiling kind, the % its best variant
reaches and, below :data:`REACHED_PCT`, the reason its workload's ``ceiling_note`` gives.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.table import Table

from aisp.harness.names import PEAK_METHOD
from aisp.peak.measure import latency_figure
from aisp.report.console import Column, fitted_table
from aisp.report.roofline import (
    BEYOND_CEILING_PCT,
    UnknownName,
    gpus_at_once,
    link_devices,
    peak_bandwidth,
    peak_compute,
    times,
)

REACHED_PCT = 80.0
"""A pair at or above this % of its ceiling has reached it; below, it should say why."""
COUNT_FLOORS = {"launches": ("launch_eager",), "graph_launches": ("launch_graph",),
                "graph_nodes": ("launch_graph_node",),
                "dependent_graph_nodes": ("launch_graph_node", "launch_graph_node_dependent"), "syncs": ("sync_roundtrip",),
                "copies": ("copy_h2d_small", "copy_d2h_small"), "device_copies": ("copy_d2d_small",),
                "messages": ("allreduce_latency",), "dispatches": ("dispatch_torch_op",),
                "device_launches": ("launch_device_tail",), "device_graph_launches": ("launch_device_graph",),
                "all_to_alls": ("alltoall_latency",), "while_iterations": ("graph_while_iteration",),
                "dependent_fmas": ("fma_dependent",)}
"""Each latency count and the floor(s) it is priced at: the slower of those the peaks hold, so a count
whose second floor is not measured yet is priced at its first (``dependent_graph_nodes`` as ``graph_nodes``)."""


class MissingPeak(KeyError):
    """The peaks lack a figure the workload's bound needs; the message says which."""


@dataclass(frozen=True)
class Bound:
    """One lower bound on a run()'s time."""

    kind: str
    """compute, memory or latency."""
    seconds: float
    value: float
    """The ceiling in ``unit``: peak TFLOP/s, peak GB/s, or the latency floor in µs per run()."""
    unit: str
    detail: str


def latency_seconds(counts: dict[str, Any], peaks: dict[str, Any]) -> tuple[float, str]:
    """(seconds, how) of the declared latency counts at their measured floors, one after another."""
    total, parts = 0.0, []
    for name, count in counts.items():
        if not count:
            continue
        floors = {f: latency_figure(peaks, f) for f in COUNT_FLOORS[name]}
        found = [v for v in floors.values() if v is not None]
        if not found:
            missing = ", ".join(COUNT_FLOORS[name])
            raise MissingPeak(f"the peaks hold no {missing} latency floor; re-run 'aisp peak --refresh'")
        floor = max(found)
        total += count * floor * 1e-6
        part = f"{count:g} {name} x {floor:.2f} us" if floor >= 0.1 else f"{count:g} {name} x {floor:.3g} us"
        if lacking := [f for f, v in floors.items() if v is None]:
            part += f" (no {', '.join(lacking)} measured)"
        parts.append(part)
    return total, " + ".join(parts)


def unpriced(counts: dict[str, Any], peaks: dict[str, Any]) -> list[str]:
    """The declared latency counts none of whose floors the peaks hold (a file measured before they existed)."""
    return [name for name, count in counts.items()
            if count and all(latency_figure(peaks, f) is None for f in COUNT_FLOORS[name])]


def unpriced_reason(names: list[str]) -> str:
    """What a row says of the counts its ceiling leaves out: which, and the floors to measure."""
    floors = ", ".join(f for name in names for f in COUNT_FLOORS[name])
    return f"ceiling without its {', '.join(names)}: the peaks hold no {floors} floor (aisp peak measures it)"


def bounds(workload: dict[str, Any], peaks: dict[str, Any]) -> list[Bound]:
    """Every bound the workload declares, its FLOPs and bytes at ``gpus`` x one GPU's peaks (the
    pair's world size, :func:`gpus_at_once`; bytes over a host link at the host's, :func:`link_devices`).
    Raises :class:`MissingPeak` where a ceiling is missing, :class:`~aisp.report.roofline.UnknownLink` or
    :class:`~aisp.report.roofline.UnknownPrecision` for a link or a precision no peak prices. A latency
    count whose floor is missing (:func:`unpriced`) is left out where FLOPs or bytes still bound the run,
    which keeps the ceiling it had before it declared the count; with no such bound, :class:`MissingPeak`."""
    found, gpus = [], gpus_at_once(workload, peaks)
    try:
        if float(workload.get("flops") or 0) > 0:
            precision, tflops = peak_compute(peaks, workload.get("precision"))
            tflops *= gpus
            found.append(Bound("compute", workload["flops"] / (tflops * 1e12), tflops, "TFLOP/s",
                               f"{workload['flops']:.3g} FLOP at {times(gpus)}the {precision} peak"))
        if float(workload.get("bytes") or 0) > 0:
            link = workload.get("link", "hbm")
            devices = link_devices(workload, peaks, link)
            gbps = devices * peak_bandwidth(peaks, link)
            found.append(Bound("memory", workload["bytes"] / (gbps * 1e9), gbps, "GB/s",
                               f"{workload['bytes']:.3g} B at {times(devices)}the {link} peak"))
    except KeyError as exc:
        raise MissingPeak(exc.args[0]) from exc
    counts = workload.get("latency") or {}
    if found:
        counts = {name: count for name, count in counts.items() if name not in unpriced(counts, peaks)}
    if any(counts.values()):
        seconds, how = latency_seconds(counts, peaks)
        found.append(Bound("latency", seconds, seconds * 1e6, "us per run", how))
    return found


def ceiling(variant: dict[str, Any], workload: dict[str, Any], peaks: dict[str, Any]) -> dict[str, Any] | None:
    """``{kind, value, unit, percent, time_ms, detail}`` of one timed variant (plus ``items_per_s``
    and ``item_unit`` where the workload counts items, ``unpriced``: the latency counts left out for want
    of their floor, see :func:`bounds`); None when the workload declares no bound or the variant has no
    timing. Raises :class:`MissingPeak` where a needed peak is missing."""
    summary = variant.get("summary") or {}
    counted = (variant.get("memory") or {}).get("peak_method") == PEAK_METHOD
    if workload.get("headline") == "memory" and float(workload.get("resident_bytes") or 0) > 0 and counted:
        return capacity(variant, float(workload["resident_bytes"]))
    found = bounds(workload, peaks)
    if not found or not summary.get("median"):
        return None
    tight = max(found, key=lambda b: b.seconds)
    result = {"kind": tight.kind, "value": tight.value, "unit": tight.unit,
              "percent": 100 * tight.seconds / (summary["median"] * 1e-3), "time_ms": tight.seconds * 1e3,
              "detail": tight.detail}
    if float(workload.get("items") or 0) > 0:
        result |= {"items_per_s": workload["items"] / tight.seconds, "item_unit": workload.get("item_unit", "items")}
    if left_out := unpriced(workload.get("latency") or {}, peaks):
        result["unpriced"] = left_out
    return result


BEYOND_CHECKS = {"latency": "declared latency counts", "capacity": "declared resident bytes"}
"""The ceilings a variant cannot pass unless the workload's declaration is wrong, and what to check."""


def capacity(variant: dict[str, Any], resident: float) -> dict[str, Any] | None:
    """The capacity ceiling of a memory-headline variant: the bytes its work must hold (``resident``)
    over the peak bytes it held (``memory.peak_bytes``); None where no peak was measured. Only for peaks
    that count the state earlier calls left (``PEAK_METHOD``): an older run's keeps its time ceiling."""
    peak = float((variant.get("memory") or {}).get("peak_bytes") or 0)
    if peak <= 0 or not (variant.get("summary") or {}).get("median"):
        return None
    return {"kind": "capacity", "value": resident / 1e9, "unit": "GB", "percent": 100 * resident / peak,
            "time_ms": None, "detail": f"{resident / 1e9:.3g} GB must be resident; the variant's peak held {peak / 1e9:.3g} GB"}


def add_ceiling(result: dict[str, Any], peaks: dict[str, Any] | None) -> dict[str, Any]:
    """A run's post step: each timed variant gets its ``ceiling``; the result gets its best variant's
    (the baseline's when none is best), or ``no_ceiling`` with the reason."""
    if not result.get("baseline"):
        return result
    if not peaks:
        return {**result, "no_ceiling": "no measured peaks for this machine; run 'aisp peak'"}
    # Recomputed from scratch: a ceiling the run stored (older peaks or declarations) must not stand in
    # for one these peaks cannot price.
    result = {k: v for k, v in result.items() if k != "ceiling"}
    sides = [{k: v for k, v in var.items() if k != "ceiling"} for var in [result["baseline"], *result["variants"]]]
    result["baseline"], result["variants"] = sides[0], sides[1:]
    notes = list(result.get("notes", []))
    try:
        for var in sides:
            found = ceiling(var, result["workload"], peaks)
            if found is not None:
                var["ceiling"] = found
                if found["kind"] in BEYOND_CHECKS and found["percent"] > BEYOND_CEILING_PCT:
                    notes.append(f"{var['name']} runs at {found['percent']:.0f}% of its {found['kind']} ceiling: "
                                 f"check the {BEYOND_CHECKS[found['kind']]}")
    except MissingPeak as exc:
        return {**result, "no_ceiling": exc.args[0]}
    best = next((v for v in result["variants"] if v["name"] == result.get("best")), result["baseline"])
    if "ceiling" not in best and not (best.get("summary") or {}).get("median"):  # skipped, failed, timed out
        return {**result, "notes": notes, "untimed": result.get("reason") or f"not timed ({result.get('verdict')})"}
    if "ceiling" not in best:  # the workload's own reason when it gives one ("no ceiling: ...")
        why = (result["workload"] or {}).get("ceiling_note") or "the workload declares no FLOPs, bytes or latency counts"
        return {**result, "notes": notes, "no_ceiling": why}
    return {**result, "notes": notes, "ceiling": best["ceiling"]}


@dataclass(frozen=True)
class Row:
    """One pair in the ceilings report."""

    target: str
    kind: str
    """compute, memory, latency, capacity (a memory-headline pair's resident bytes over its peak bytes),
    "none" (no bound declared or no peak prices it) or "untimed" (the run
    timed no variant of the pair: skipped, failed or timed out)."""
    percent: float | None
    variant: str | None
    reason: str
    """Below the mark: the workload's ceiling note; without a ceiling: why there is none."""


def rows(results: list[dict[str, Any]],
         peaks: dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any] | None] | None) -> list[Row]:
    """One row per pair of a run summary, its ceiling recomputed from ``peaks`` when given (a run
    made before the ceiling step, or against newer peaks), else the one stored in the result.
    ``peaks`` may be a function of the result (the peaks of the GPUs that pair uses). A workload with
    an unknown link or precision raises :class:`~aisp.report.roofline.UnknownLink` or
    :class:`~aisp.report.roofline.UnknownPrecision` naming the pair."""
    found = []
    for result in results:
        mine = peaks(result) if callable(peaks) else peaks
        try:
            judged = add_ceiling(result, mine) if mine else result
        except UnknownName as exc:
            raise type(exc)(f"{result['target']}: {exc}") from exc
        best = judged.get("ceiling")
        if best is None and judged.get("no_ceiling") and not judged.get("untimed"):
            found.append(Row(result["target"], "none", None, None, judged["no_ceiling"]))
            continue
        if best is None:
            why = judged.get("untimed") or result.get("reason") or f"not timed ({result.get('verdict')})"
            found.append(Row(result["target"], "untimed", None, None, why))
            continue
        note = (result.get("workload") or {}).get("ceiling_note") or ""
        reason = "" if best["percent"] >= REACHED_PCT else (note or "no reason given (the workload's ceiling_note)")
        if best.get("unpriced"):
            reason = "; ".join(filter(None, [reason, unpriced_reason(best["unpriced"])]))
        found.append(Row(result["target"], best["kind"], best["percent"], best_name(result), reason))
    return found


FAILED_IN_RUN = " (optimized: "
"""How a row's variant says the run judged no optimized variant: ``baseline (optimized: error)``."""


def best_name(result: dict[str, Any]) -> str:
    """The variant a row's % is of: the run's best, else the baseline, marked with the pair's verdict when
    the run failed it (an error or a failed check leaves no best, and the baseline's % is all there is)."""
    if result.get("best"):
        return result["best"]
    verdict = result.get("verdict")
    return f"baseline{FAILED_IN_RUN}{verdict})" if verdict in ("verify-failed", "error", "timeout") else "baseline"


PROFILED_PREFIXES = ("ncu", "profiled")
"""How a ceiling note that states what a profile showed begins: ``ncu: ...`` (Nsight Compute figures),
``profiled: ...`` or ``profiled (ncu timed out): ...`` (a torch profiler's kernel-time split)."""


PROFILE_CITES = ("ncu:", "profiled:", "(profiled)", "nsight compute", "torch profiler", "torch trace")
"""How a note cites a profile further on: ``timed 0.1 ms; ncu: DRAM 57%``, ``... (Nsight Compute, H200)``."""


NOT_PROFILED = re.compile(r"\b(not|never|not yet) profiled\b")
"""A negation, taken out before the cites are looked for: "``_fused`` not profiled: ..." cites none,
though it holds ``profiled:``."""


def profiled(reason: str) -> bool:
    """Whether a below-the-mark reason cites a profile: it begins with one of :data:`PROFILED_PREFIXES`
    or holds one of :data:`PROFILE_CITES` once its negations (:data:`NOT_PROFILED`) are taken out."""
    text = reason.lower()
    if text.startswith(PROFILED_PREFIXES):
        return True
    text = NOT_PROFILED.sub("", text)
    return any(cite in text for cite in PROFILE_CITES)


def declared_workload(pair: Any) -> Any:
    """The workload a pair's baseline file declares now, or None where the file does not import here."""
    from aisp.harness.loader import load_benchmark

    try:
        return load_benchmark(pair.baseline).workload
    except Exception:  # noqa: BLE001 - any import or construction error: the pair has no current declaration
        return None


def with_current_notes(results: list[dict[str, Any]], root: Path, workloads: bool = False) -> list[dict[str, Any]]:
    """The results with each pair's ``ceiling_note`` as its baseline file under ``root`` says it now,
    instead of as the run stored it: an older run judged with the reasons written since (a pair no
    longer found, or whose file does not import here, keeps its stored note). ``workloads``: the whole
    workload as the file declares it now (FLOPs, bytes, link, latency counts, note), so the ceilings
    are recomputed from today's declarations against the times the run measured."""
    from aisp.harness.discovery import all_pairs
    from aisp.harness.execute import workload_dict

    pairs = {pair.target: pair for pair in all_pairs(root)}  # the folders read once, not once a result
    updated = []
    for result in results:
        pair = pairs.get(result["target"])
        workload = None if pair is None else declared_workload(pair)
        if workload is None:  # a pair no longer found, or whose file does not import here, keeps its stored note
            updated.append(result)
        elif workloads:
            updated.append({**result, "workload": workload_dict(workload)})
        else:
            stored = result.get("workload") or {}
            updated.append({**result, "workload": {**stored, "ceiling_note": workload.ceiling_note}})
    return updated


def tally(found: list[Row]) -> dict[str, int]:
    """How many pairs reach the mark, fall below it (with and without a reason, with a reason that cites
    no profile, and judged on the baseline because the run failed the pair), have no ceiling, and were
    not timed in the run."""
    judged = [r for r in found if r.percent is not None]
    below = [r for r in judged if r.percent < REACHED_PCT]
    return {"pairs": len(found), "reached": len(judged) - len(below), "below": len(below),
            "below_without_reason": sum(r.reason.startswith("no reason given") for r in below),
            "below_unprofiled": sum(not profiled(r.reason) for r in below),
            "below_failed": sum(FAILED_IN_RUN in (r.variant or "") for r in below),
            "no_ceiling": sum(r.kind == "none" for r in found), "untimed": sum(r.kind == "untimed" for r in found)}


BANDS = (REACHED_PCT, 70.0, 50.0, 20.0)
"""The lower edges of the bands :func:`bands` counts pairs in (the mark first)."""


def bands(found: list[Row]) -> list[tuple[str, int]]:
    """How many judged pairs fall in each band of % reached: at the mark or above, then between each
    edge of :data:`BANDS` and the one above it, then below the last: how far the pairs below are."""
    judged = [r.percent for r in found if r.percent is not None]
    edges = [math.inf, *BANDS, -math.inf]
    labels = [f">= {BANDS[0]:.0f}%", *[f"{lo:.0f}-{hi:.0f}%" for hi, lo in pairwise(BANDS)], f"< {BANDS[-1]:.0f}%"]
    return [(label, sum(lo <= p < hi for p in judged)) for label, (hi, lo) in zip(labels, pairwise(edges), strict=True)]


CEILING_COLUMNS = (Column("pair"), Column("ceiling"), Column("% reached"), Column("variant", drop_rank=0),
                   Column("reason (below 80%) / why none", wraps=True))


def table(found: list[Row], title: str, width: int = 200) -> Table | Group:
    """The report as a rich table fitted to ``width``: pair, ceiling kind, % reached (green at the
    mark, yellow below), variant (left out first on a narrow console), reason (wraps)."""
    cells = []
    for r in found:
        pct = "-" if r.percent is None else f"{r.percent:.0f}%"
        style = "dim" if r.percent is None else ("green" if r.percent >= REACHED_PCT else "yellow")
        cells.append([escape(r.target), r.kind, f"[{style}]{pct}[/{style}]", escape(r.variant or "-"), escape(r.reason)])
    return fitted_table(CEILING_COLUMNS, cells, width - 1, title=title)  # - 1: the left border
