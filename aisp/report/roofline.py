"""Roofline: where a variant stands against this machine's measured ceilings.

Arithmetic intensity is FLOPs per byte of the workload. The attainable rate at that intensity is
``min(peak compute, intensity × peak bandwidth)``: below the ridge point the memory system is the
bound, above it the arithmetic units are. Peaks come from :mod:`aisp.peak.measure` (``matmul_<precision>``,
for a SIMT precision the CUDA cores' FMA rate, in TFLOP/s; in GB/s by ``Workload.link``, :data:`LINK_PEAKS`). The GPU's are one GPU's; a pair of world size
N, whose FLOPs and bytes are summed over its ranks, is held to N times them (:func:`gpus_at_once`): the
intensity and the ridge stay, the roofs rise N-fold. The host's links (:data:`HOST_LINKS`) are one host's,
shared by its ranks: never multiplied (:func:`link_devices`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aisp.harness.artifacts import world_size
from aisp.harness.names import HOST_LINKS, PRECISIONS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PEAK_PRECISIONS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")
"""Precisions with a measured matmul ceiling; the others of :data:`PRECISIONS` but the SIMT ones (None,
"exact") are judged against fp32, as is one whose matmul figure this machine lacks (a CPU measures fp32 only)."""
SIMT_PEAKS = {"fp32_simt": "simt_fp32", "fp16_simt": "simt_fp16"}
"""Each SIMT precision and the CUDA-core FMA rate of ``aisp peak`` (:mod:`aisp.peak.simt`) that prices its
FLOPs: never a matmul peak, which their elementwise math or FMA chains cannot reach."""


class UnknownName(ValueError):
    """A workload names a link or a precision no peak prices: a typo, not a missing measurement."""


class UnknownPrecision(UnknownName):
    """A workload's precision is none of :data:`PRECISIONS`."""


def peak_compute(peaks: dict[str, Any], precision: str | None) -> tuple[str, float]:
    """(precision whose ceiling applies, its TFLOP/s). A SIMT precision is priced at its SIMT FMA rate,
    a KeyError where the peaks lack it; a known precision without a measured matmul ceiling on this
    machine falls back to fp32 (the returned name says so); an unknown one is :class:`UnknownPrecision`."""
    measured = peaks["measurements"]
    if precision is not None and precision not in PRECISIONS:
        raise UnknownPrecision(f"unknown precision '{precision}': the precisions are {', '.join(PRECISIONS)}")
    if precision in SIMT_PEAKS:
        key = SIMT_PEAKS[precision]
        if key not in measured:
            raise KeyError(f"the peaks hold no {key} ceiling for precision '{precision}'; "
                           f"re-run 'aisp peak --refresh' (or 'aisp peak --only {key}')")
        return precision, measured[key]["value"]
    name = precision if precision in PEAK_PRECISIONS else "fp32"
    if f"matmul_{name}" not in measured:
        name = "fp32"
    if "matmul_fp32" not in measured and name == "fp32":
        raise KeyError("the peaks hold no matmul_fp32 ceiling; re-run 'aisp peak --refresh'")
    return name, measured[f"matmul_{name}"]["value"]


LINK_PEAKS = {"hbm": "memory_copy", "l2": "l2_bandwidth", "h2d": "h2d_pinned", "d2h": "d2h_pinned",
              "nvlink": "p2p_copy", "nvlink_one_way": "p2p_copy", "host_memory": "host_memory_copy",
              "page_cache": "page_cache_read", "page_faults": "first_touch"}
"""Each ``Workload.link`` and the measurement of the peaks file that prices its bytes (aisp.peak)."""


class UnknownLink(UnknownName):
    """A workload names a link :data:`LINK_PEAKS` does not know: a typo, not a missing measurement."""


# What N GPUs can do at once, per link, for a pair of world size N (one rank per GPU):
# - hbm: each GPU its own memory, N x memory_copy.
# - l2: each GPU its own L2 cache, N x l2_bandwidth (in-place passes over a quarter of L2, read and
#   write counted as memory_copy counts them).
# - h2d / d2h: each GPU has its own PCIe x16 link to the host, N x the pinned copy rate. Where GPUs
#   share a PCIe switch's uplink or the host's memory bandwidth they reach less together; aisp peak
#   times one GPU's copies, so the ceiling is generous there (a pair reads low, never past 100%).
# - nvlink: p2p_copy is GPU0 -> GPU1 (the faster direction), a 1 GiB dst.copy_(src) with peer access:
#   the copy engine spreads it over every NVLink between the two (NV18 on an H200 pair), so it is one
#   GPU's whole NVLink send rate, not one link's. N GPUs can each send at that rate at the same time:
#   every GPU's links are its own (through the NVSwitches of an HGX board, or one lane each way on a
#   bridged pair). Measured: p2p_copy_bidir, both GPUs of the pair sending at once, reached 763 GB/s
#   on 2 x H200 against 2 x 392 = 785 (97%). So the bound is N x p2p_copy over the bytes that cross
#   between GPUs, each counted once, by its sender. It is nccl-tests' busbw convention: an all-reduce
#   of S bytes over N ranks sends 2(N-1)/N S per rank, 2(N-1) S in all, priced here at the per-GPU
#   link rate that busbw is compared with. Bytes sent one way only (one rank sends, the others wait)
#   read at most 1/N of this ceiling, as a pipeline's bubble does of the compute ceiling; GPUs of a
#   host that are not all NVLink peers of each other reach less, and the ceiling is generous there.
# - nvlink_one_way: bytes the task itself sends one way (data that lives on one GPU and is needed on
#   another, e.g. a prefill GPU's KV cache for a decode GPU): only the holder's links can carry them
#   (a reader on the other GPU pulls them over the same direction), so 1 x p2p_copy at any world size.
# - host_memory / page_cache / page_faults: the host's, measured once for the whole host; its ranks
#   share its memory, its page cache and its page-fault path, so the bound stays 1 x the figure.
# Latency counts (aisp.report.ceilings) are one rank's chain and are not scaled.


def gpus_at_once(workload: dict[str, Any], peaks: dict[str, Any]) -> int:
    """How many of the devices the peaks were measured on one ``run()`` has at once: the pair's world
    size (``workload["requires"]``) where the peaks are a GPU's, its ranks one per GPU; 1 where they
    are a CPU's (the host's, measured on all its cores, which its gloo ranks share)."""
    if (peaks.get("provenance") or {}).get("hardware_key") == "cpu":
        return 1
    return world_size(workload)


def link_devices(workload: dict[str, Any], peaks: dict[str, Any], link: str) -> int:
    """How many times one device's ``link`` figure a ``run()`` can use at once: :func:`gpus_at_once` for
    a GPU's link, 1 for a host's (its ranks share it) and for ``nvlink_one_way`` (one GPU sends)."""
    return 1 if link in HOST_LINKS or link == "nvlink_one_way" else gpus_at_once(workload, peaks)


def times(gpus: int) -> str:
    """``"N x "`` before a peak's name in a bound's detail, nothing for one GPU."""
    return f"{gpus} x " if gpus > 1 else ""


def peak_bandwidth(peaks: dict[str, Any], link: str = "hbm") -> float:
    """Bandwidth ceiling in GB/s of the link a workload's bytes cross: device memory (buffer copy,
    read and write counted), the L2 cache (in-place passes over data it holds, read and write counted),
    the pinned host<->device copy path, or one GPU's send rate to a peer over NVLink (the faster
    direction of the peer copy, measured on hosts with 2+ GPUs), or a host link (:data:`HOST_LINKS`).
    One device's: see :func:`link_devices` for a pair of several. Raises :class:`UnknownLink` for a
    link :data:`LINK_PEAKS` lacks, KeyError for a known one not measured."""
    measured = peaks["measurements"]
    if link not in LINK_PEAKS:
        raise UnknownLink(f"unknown link '{link}': the links are {', '.join(LINK_PEAKS)}")
    key = LINK_PEAKS[link]
    if key not in measured:
        raise KeyError(f"the peaks hold no {key} ceiling for link '{link}'; re-run 'aisp peak --refresh'")
    return measured[key]["value"]


def bound_tflops(intensity: float, peak_tflops: float, peak_gbps: float) -> float:
    """The roofline: attainable TFLOP/s at ``intensity`` FLOP/byte."""
    return min(peak_tflops, intensity * peak_gbps / 1e3)


def annotate(variant: dict[str, Any], workload: dict[str, Any], peaks: dict[str, Any]) -> dict[str, Any] | None:
    """Intensity, achieved rate, roofline bound and % of it for one variant of a pair.

    None when the workload declares neither FLOPs nor bytes, or the variant has no timing. With
    bytes but no FLOPs the work is pure data movement: % of bound is % of peak bandwidth. With
    FLOPs but no bytes the bound is the compute ceiling. The peaks are ``gpus`` x one GPU's
    (:func:`gpus_at_once`; a host link's bandwidth 1 x the host's, :func:`link_devices`), the rates
    the whole call's.
    """
    flops, nbytes = float(workload.get("flops") or 0), float(workload.get("bytes") or 0)
    summary = variant.get("summary") or {}
    if (flops <= 0 and nbytes <= 0) or not summary.get("median"):
        return None
    seconds, gpus = summary["median"] * 1e-3, gpus_at_once(workload, peaks)
    precision, peak_tflops = peak_compute(peaks, workload.get("precision"))
    link = workload.get("link", "hbm")
    peak_tflops = gpus * peak_tflops
    peak_gbps = link_devices(workload, peaks, link) * peak_bandwidth(peaks, link)
    achieved_tflops = flops / seconds / 1e12 if flops > 0 else None
    achieved_gbps = nbytes / seconds / 1e9 if nbytes > 0 else None
    intensity = flops / nbytes if flops > 0 and nbytes > 0 else None
    if flops <= 0:
        bound, pct = None, 100 * achieved_gbps / peak_gbps
    else:
        bound = peak_tflops if intensity is None else bound_tflops(intensity, peak_tflops, peak_gbps)
        pct = 100 * achieved_tflops / bound
    memory_bound = flops <= 0 or (intensity is not None and intensity * peak_gbps / 1e3 < peak_tflops)
    return {"intensity": intensity, "achieved_tflops": achieved_tflops, "achieved_gbps": achieved_gbps,
            "bound_tflops": bound, "pct_of_bound": pct, "bound": "memory" if memory_bound else "compute",
            "peak_precision": precision, "peak_tflops": peak_tflops, "peak_gbps": peak_gbps, "gpus": gpus,
            "ridge_intensity": peak_tflops * 1e3 / peak_gbps}


@dataclass(frozen=True)
class PairPoints:
    """One pair on the roofline: both variants share the workload, hence the intensity."""

    label: str
    precision: str
    """The precision whose ceiling applies (see :func:`peak_compute`)."""
    intensity: float
    baseline_tflops: float
    optimized_tflops: float
    gpus: int = 1
    """GPUs of the pair (its world size): its roofs are ``gpus`` x one GPU's, its rates the whole call's."""


BEYOND_CEILING_PCT = 105.0
"""A variant above this % of its roofline bound is flagged: its FLOP/byte accounting is wrong, or
it did not do the work (e.g. returned a copy of an answer computed in setup())."""


def add_roofline(result: dict[str, Any], peaks: dict[str, Any] | None) -> dict[str, Any]:
    """Annotate each timed variant with intensity, achieved rate and % of the roofline bound."""
    if not peaks or not result.get("baseline"):
        return result
    notes = list(result.get("notes", []))
    for var in [result["baseline"], *result["variants"]]:
        try:
            roof = annotate(var, result["workload"], peaks)
        except KeyError as exc:  # a ceiling this machine's peaks lack (an NVLink one on a 1-GPU run)
            notes.append(f"no roofline: {exc.args[0]}")
            break
        if roof is None:
            continue
        var["roofline"] = roof
        if roof["pct_of_bound"] > BEYOND_CEILING_PCT:
            notes.append(f"{var['name']} runs at {roof['pct_of_bound']:.0f}% of the measured roofline bound: "
                         "check its FLOP/byte accounting, or whether it really does the work")
    return {**result, "notes": notes}


def pair_points(results: list[dict[str, Any]], peaks: dict[str, Any]) -> list[PairPoints]:
    """Roofline points of the pairs of a run summary whose workload declares FLOPs and bytes and
    whose baseline and best variant were both timed; not those whose bytes cross a host link (their
    FLOP per host byte is no point on a GPU's roofline)."""
    points = []
    for result in results:
        best = next((v for v in result.get("variants", []) if v["name"] == result.get("best")), None)
        if not result.get("baseline") or not best or result.get("workload", {}).get("link") in HOST_LINKS:
            continue
        try:
            base = annotate(result["baseline"], result.get("workload", {}), peaks)
            opt = annotate(best, result.get("workload", {}), peaks)
        except KeyError:  # no ceiling for its link here: add_roofline noted it
            continue
        if base and opt and base["intensity"] is not None:
            points.append(PairPoints(result["target"], base["peak_precision"], base["intensity"],
                                     base["achieved_tflops"], opt["achieved_tflops"], base["gpus"]))
    return points


def plot(points: list[PairPoints], peaks: dict[str, Any], path: Path) -> Path:
    """Write the roofline of :func:`figure` as a PNG at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    figure(points, peaks).savefig(path, dpi=120)
    return path


def figure(points: list[PairPoints], peaks: dict[str, Any]) -> Figure:
    """A log-log roofline: one roof per precision and GPU count used (N GPUs: N x one GPU's compute
    and HBM roofs), an arrow baseline -> optimized per pair. Needs matplotlib (the ``plot`` extra),
    imported here so the roofline math does not."""
    from aisp.report.plotting import new_figure

    fig, ax = new_figure(width=8, height=5.5)
    roofs = {(p.precision, p.gpus) for p in points} or {("fp32", 1)}
    ceilings = {(name, n): (n * peak_compute(peaks, name)[1], n * peak_bandwidth(peaks)) for name, n in roofs}
    xs = [p.intensity for p in points] + [c * 1e3 / bw for c, bw in ceilings.values()]
    x_lo, x_hi = min(xs) / 8, max(xs) * 8
    for (name, n), (ceiling, bw) in sorted(ceilings.items(), key=lambda kv: kv[1]):
        ridge = ceiling * 1e3 / bw
        ax.plot([x_lo, ridge, x_hi], [x_lo * bw / 1e3, ceiling, ceiling], lw=1.5,
                label=f"{name}{f' on {n} GPUs' if n > 1 else ''}: {ceiling:,.3g} TFLOP/s, {bw:,.0f} GB/s")
    for p in points:
        ax.plot(p.intensity, p.baseline_tflops, "o", mfc="none", color="tab:gray")
        ax.plot(p.intensity, p.optimized_tflops, "o", color="tab:red")
        ax.annotate("", xy=(p.intensity, p.optimized_tflops), xytext=(p.intensity, p.baseline_tflops),
                    arrowprops={"arrowstyle": "->", "color": "tab:red"})
        ax.annotate(p.label, (p.intensity, p.optimized_tflops), xytext=(5, 4), textcoords="offset points",
                    fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"Roofline of {peaks['provenance']['hardware_key']}: baseline (hollow) -> optimized (filled)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return fig
