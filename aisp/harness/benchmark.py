"""The pair protocol: what a baseline or optimized file defines.

A pair is ``baseline_<name>.py`` and ``optimized_<name>[_<variant>].py`` in one folder. Each file
defines a subclass of :class:`Benchmark` and returns an instance from ``get_benchmark()``. Both
share one :class:`Workload` (a frozen dataclass) that tells the harness the sizes, the work done
per ``run()`` and how to judge the pair.
"""

from __future__ import annotations

import importlib.util
import shutil
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import torch

from aisp.harness.names import LINKS, PRECISIONS, Link, Precision

SIMT_FORMATS = {"fp32_simt": "fp32", "fp16_simt": "fp16"}
"""SIMT precisions (FLOPs no tensor core can run, priced at ``aisp peak``'s SIMT FMA rate) -> their number
format, which picks the tolerance."""


@dataclass(frozen=True, kw_only=True)
class Requirements:
    """What a pair needs; the harness skips the pair, with the reason, where one is unmet."""

    cuda: bool = False
    """The pair only makes sense on a CUDA GPU."""
    min_compute_capability: tuple[int, int] | None = None
    """Lowest compute capability, e.g. (9, 0) for Hopper-only instructions."""
    gpus: int = 1
    """GPUs the pair needs; more than one: one rank per GPU, launched through torchrun (NCCL)."""
    ranks: int = 1
    """Processes the pair runs as, launched through torchrun: one GPU each on CUDA (so a CUDA run
    needs that many GPUs), gloo between CPU processes otherwise. Unlike ``gpus`` it does not ask
    for CUDA, so a multi-rank pair can be verified on a CPU."""
    packages: tuple[str, ...] = ()
    """Importable Python modules the pair needs (e.g. "triton")."""
    executables: tuple[str, ...] = ()
    """Programs that must be on PATH (e.g. "nvcc")."""

    @property
    def world_size(self) -> int:
        """Ranks the pair runs as: ``max(gpus, ranks)``; more than one goes through torchrun."""
        return max(self.gpus, self.ranks)


@dataclass(frozen=True, kw_only=True)
class LatencyCounts:
    """The fewest latency-bound events one ``run()`` of the pair's work needs, for a lesson whose time
    goes to launches, waits and small messages rather than FLOPs or bytes. Each count is priced at
    its floor measured by ``aisp peak`` (the ``latency`` section of the peaks); their sum is the
    pair's latency ceiling (the fastest the events can go one after another). Count what the best
    design needs (a CUDA-graph lesson: one graph launch and its nodes), so the baseline's extra
    events show as distance from the ceiling. A pair of several ranks counts one rank's chain (the
    ranks' events happen side by side): counts are never multiplied by the world size."""

    launches: int = 0
    """Kernels launched one by one from Python (priced at ``launch_eager``)."""
    graph_launches: int = 0
    """CUDA graph replays (``launch_graph``: one launch of a one-kernel graph)."""
    graph_nodes: int = 0
    """Kernels inside replayed graphs (``launch_graph_node``: each node of a large graph)."""
    dependent_graph_nodes: int = 0
    """Graph nodes that read what the node before them wrote (a chain of tiny kernels, each on the last
    one's output), priced at the slower of ``launch_graph_node`` and ``launch_graph_node_dependent``
    (each node of a graph of one-element read-modify-writes): as ``graph_nodes`` where the peaks lack the latter."""
    syncs: int = 0
    """Host waits on the GPU: ``.item()``, ``synchronize()``, a blocking copy (``sync_roundtrip``)."""
    copies: int = 0
    """Small host<->device copies (the slower of ``copy_h2d_small`` and ``copy_d2h_small``)."""
    device_copies: int = 0
    """Small device-to-device copies (``copy_d2d_small``)."""
    messages: int = 0
    """Small all-reduces across the GPUs (``allreduce_latency``, 8 bytes, back to back)."""
    dispatches: int = 0
    """Torch ops dispatched from Python on the host (``dispatch_torch_op``)."""
    device_launches: int = 0
    """Grids launched from the GPU after their parent (``cudaStreamTailLaunch``: ``launch_device_tail``)."""
    device_graph_launches: int = 0
    """Graphs launched from the GPU (``cudaGraphLaunch`` in a kernel: ``launch_device_graph``)."""
    all_to_alls: int = 0
    """Small all-to-alls across the GPUs (``alltoall_latency``, 8 bytes, back to back)."""
    while_iterations: int = 0
    """Passes of a WHILE graph node, each with its body (``graph_while_iteration``: a one-kernel body)."""
    dependent_fmas: int = 0
    """The longest chain of fp32 FMAs that must run one after another, each on the last's result
    (``fma_dependent``: one FFMA's latency), however many such chains run side by side."""


@dataclass(frozen=True, kw_only=True)
class Workload:
    """Sizes and accounting shared by both files of a pair.

    Chapters subclass this with their own size fields (frozen, keyword-only) and compute
    ``flops``/``bytes``/``items`` when they instantiate it.
    """

    flops: float = 0.0
    """Floating-point operations one ``run()`` performs, summed over all its ranks (0: not declared).
    A pair of world size N (``requires``) is held to N x one GPU's matmul peak, since its N GPUs work
    at once: a rank that idles (a pipeline's bubble) or repeats another's work shows as distance."""
    bytes: float = 0.0
    """The fewest bytes one ``run()`` must move over ``link``, summed over all its ranks (0: not
    declared); a pair of world size N is held to N x one GPU's peak of that link (see ``link``)."""
    link: Link = "hbm"
    """Which link ``bytes`` cross, so the roofline uses its ceiling (from ``aisp peak``): device memory
    (hbm), the L2 cache (``l2``: passes over data L2 holds, each pass's read and write counted), pinned
    host-to-device / device-to-host copies (each GPU has its own PCIe link), GPU-GPU peer copies
    (``p2p_copy``, one GPU sending to a peer: count each byte once, by its sender; N x for N GPUs, or
    1 x for ``nvlink_one_way``: bytes the task sends from one GPU to another), or the host's: its
    memory (a copy's read and write both counted), page-cache reads, or fresh memory's first-touch
    page faults; a host link is one host's, shared by its ranks (never N x)."""
    latency: LatencyCounts | None = None
    """The latency-bound events one ``run()`` needs; None: not declared. The pair's ceiling is the
    tightest of the compute (``flops``), memory (``bytes`` over ``link``) and latency bounds declared."""
    resident_bytes: float = 0.0
    """For a pair whose headline is "memory": the least bytes its work must hold on the GPU at once
    (weights, optimizer states, the live cache: what no design can free), derived in the pair's file.
    Its ceiling is then capacity: this over a variant's peak bytes (``memory.peak_bytes``), not time."""
    ceiling_note: str = ""
    """Why the best variant stays below 80% of its ceiling, as the chapter README explains it
    (shown by ``aisp report ceilings``); empty: no reason given. A reason read from a profile begins
    ``ncu:`` or ``profiled:`` (the report counts the reasons that cite none)."""
    items: float = 0.0
    """Useful items one ``run()`` processes (samples, tokens, requests), summed over its ranks, for goodput."""
    item_unit: str = "items"
    """What an item is, for reports ("samples", "tokens")."""
    precision: Precision | None = None
    """The lowest precision either variant computes in; picks the default tolerance and the compute
    ceiling (its matmul peak). ``fp32_simt`` / ``fp16_simt``: that format on the CUDA cores (FFMA,
    packed HFMA2), for FLOPs that cannot run on tensor cores, priced at the SIMT FMA rate. None:
    inferred from the output dtype."""
    element_tol: float | None = None
    """Per element, how far an optimized value may be off as a fraction of the baseline's largest
    |value| (the ``c*u`` of ``aisp.harness.verify.TOLERANCES``); None: the precision's default."""
    rtol: float | None = None
    """Per element, how far an optimized value may be off as a fraction of the baseline's value;
    None: the precision's default. Both element bounds are judged as a tail test (see TOLERANCES)."""
    max_rel_l2: float | None = None
    """Bound on ||optimized - baseline|| / ||baseline|| per output tensor; None: the precision's default."""
    headline: str = "time"
    """What the pair optimizes, as baseline / optimized: "time", "memory" (peak bytes) or
    "metric:<name>", a lower-is-better figure both variants report from ``metrics()`` (a latency
    percentile, for a pair that trades total time for it); time is reported beside it."""
    requires: Requirements = field(default_factory=Requirements)
    """What the pair needs to run here."""
    timeout_s: float = 300.0
    """Seconds one pair run may take before it is killed (times --timeout-multiplier)."""
    iterations: int | None = None
    """Timed iterations at most (2 or more): a pair whose call takes a second may take fewer than the run's."""
    window: Literal["device", "idle"] = "device"
    """What the CUDA events of a call time. device: a spacer kernel queued before the start event keeps
    the host's launch path out (device work, as do_bench times it). idle: the start event on an idle
    GPU, so the host's path to the first kernel is in (for pairs whose lesson is launch latency)."""
    no_inputs_reason: str | None = None
    """Why the pair's ``run()`` has no per-call inputs to declare (a loader that decodes its own
    samples inside the call), stated with ``inputs = ()`` on its classes. Its result stays
    ``ok-unchecked`` with this reason, and ``--update-expectations`` stores it; without a reason
    an unchecked pair is not stored."""

    def __post_init__(self) -> None:
        if self.window not in ("device", "idle"):  # a chapter's own field named window shadows this one
            raise ValueError(f"{type(self).__name__}.window is {self.window!r}: the timing window must be 'device' "
                             "or 'idle' (name a workload's own size field something else)")
        if self.link not in LINKS:
            raise ValueError(f"{type(self).__name__}.link is {self.link!r}: the links are {', '.join(LINKS)}")
        if self.precision is not None and self.precision not in PRECISIONS:
            raise ValueError(f"{type(self).__name__}.precision is {self.precision!r}: the precisions are "
                             f"{', '.join(PRECISIONS)}")


class Benchmark:
    """Base class of a pair's variant.

    The harness sets ``device`` and ``seed`` before ``setup()``. ``run()`` is the timed unit
    of work and returns what verification compares. Attribute names listed in ``scratch`` are
    buffers ``run()`` overwrites completely (preallocated outputs, workspaces, state a training
    step updates): they may change during ``run()`` and are poisoned before the last timed
    iteration, so a run that skips its work is caught. Names listed in ``state`` are read and
    updated by ``run()`` (a model and optimizer a training step advances, a running counter):
    they may change but are never poisoned. Naming a module attribute covers its parameters
    and buffers. Every other tensor attribute is an input and must be left unchanged by ``run()``.

    Names listed in ``inputs`` are the per-call inputs ``run()`` computes from (activations, tokens,
    a host buffer to copy; not weights a variant may preprocess): before a timed call drawn at random
    they are refilled in place with new values, so an answer computed ahead no longer matches. Every
    variant declares the same ones (names, shapes, dtypes), and they must drive the baseline's output.
    """

    workload: ClassVar[Workload] = Workload()
    scratch: ClassVar[tuple[str, ...]] = ()
    state: ClassVar[tuple[str, ...]] = ()
    inputs: ClassVar[tuple[str, ...]] = ()

    def __init__(self) -> None:
        self.device = default_device()
        self.seed = 0

    def setup(self) -> None:
        """Untimed: build inputs and models on ``self.device`` from ``self.seed``."""

    def run(self) -> Any:
        """The timed unit of work; returns the output verification compares."""
        raise NotImplementedError

    def teardown(self) -> None:
        """Untimed: release what setup() built."""

    def generator(self) -> torch.Generator:
        """A generator seeded from ``self.seed`` on this device, for building inputs."""
        return torch.Generator(device=self.device).manual_seed(self.seed)

    def reference(self) -> Any:
        """Optional, on a baseline: the baseline's math in fp32/fp64 on the inputs its last ``run()``
        used, shaped like ``run()``'s output. Verification then asks each optimized output to be as
        close to it as the baseline is (FlashAttention's differential test). None: none supplied."""
        return None

    def metrics(self) -> dict[str, float]:
        """Extra figures to report after timing (e.g. goodput); optional."""
        return {}


class Unavailable(RuntimeError):
    """Raised by ``setup()`` when only trying shows this machine lacks what the variant needs (a
    driver feature, a kernel module): the variant is skipped with the message, not failed."""


def default_device() -> torch.device:
    """CUDA when present, else CPU."""
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def unmet_requirements(req: Requirements, device: torch.device, capability: bool = True) -> str | None:
    """Why a pair cannot run here, or None when it can. ``capability=False`` leaves out the compute
    capability, the one check that initialises CUDA in this process (counting devices makes no context)."""
    needs_gpu = req.cuda or req.min_compute_capability is not None or req.gpus > 1
    if needs_gpu and device.type != "cuda":
        return f"needs a CUDA GPU; this run {'was asked to use the CPU' if torch.cuda.is_available() else 'has none'}"
    if device.type == "cuda":
        if capability and req.min_compute_capability is not None:
            cc = torch.cuda.get_device_capability(device)
            if cc < req.min_compute_capability:
                want = "{}.{}".format(*req.min_compute_capability)
                return f"needs compute capability {want}; this GPU has {cc[0]}.{cc[1]}"
        if req.world_size > torch.cuda.device_count():
            return f"needs {req.world_size} GPUs; {torch.cuda.device_count()} present"
    missing = [f"the Python package '{pkg}', which is not installed" for pkg in req.packages
               if importlib.util.find_spec(pkg) is None]
    missing += [f"'{exe}' on PATH" for exe in req.executables if shutil.which(exe) is None]
    return f"needs {missing[0]}" if missing else None
