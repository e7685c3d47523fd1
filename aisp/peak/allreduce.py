"""The NCCL all-reduce ceiling: bus bandwidth against message size over every local GPU.

:func:`sweep` (in ``aisp peak``'s process) starts ``torchrun --standalone --nproc-per-node N -m
aisp.peak.allreduce`` with NVLink multicast off (``NVLS_OFF``, as the harness's multi-rank runs
have it); each rank joins the group as chapter scripts do (:func:`aisp.kits.multirank.script_init`:
NCCL on ``cuda:LOCAL_RANK``, gloo on a CPU), measures all-reduce at each size with
:func:`aisp.kits.collectives.measure` (nccl-tests' algbw and busbw), and rank 0 writes the rows as
JSON for the parent to read.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import torch
import torch.distributed as dist

from aisp.harness.distributed import NVLS_OFF
from aisp.harness.proctree import kill_tree
from aisp.kits.collectives import Row, collective, measure, row
from aisp.kits.multirank import script_init, time_slowest, world_and_rank

RANK_ERROR = re.compile(r"\[rank\d+\]: ([\w.]*(?:Error|Exception): .*)$")
"""A rank's exception line in torchrun's output (``[rank0]: RuntimeError: ...``): said first."""


def launch_argv(ranks: int, device: str, sizes: list[int], samples: int, out: Path, burst: int = 0,
                graph: bool = False, op: str = "all_reduce") -> list[str]:
    """The torchrun command that runs this module's sweep of ``op`` once per rank on this machine."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}",
            "-m", "aisp.peak.allreduce", "--device", device, "--samples", str(samples), "--out", str(out),
            "--burst", str(burst), "--op", op, *(["--graph"] if graph else []), *map(str, sizes)]


def launch_env() -> dict[str, str]:
    """This environment with NVLink multicast off, and this ``aisp`` importable in the ranks."""
    package_root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, **NVLS_OFF, "PYTHONPATH": path}


def sweep(ranks: int, device: str, sizes: list[int], samples: int, timeout_s: float = 600.0,
          burst: int = 0, graph: bool = False, op: str = "all_reduce") -> list[Row]:
    """All-reduce rows (one per size) measured by ``ranks`` processes on ``device`` ("cuda": NCCL,
    one GPU each; "cpu": gloo, which only proves the plumbing). ``burst``: calls per timed sample
    (0: enough to move about 256 MB, at most 50, as :func:`aisp.kits.collectives.measure` does; a
    latency figure wants many more). ``op``: ``all_reduce`` or ``all_to_all`` (the MoE dispatch and
    combine). ``graph``: each burst captured in a CUDA graph and replayed
    (the host's per-call cost left out, as nccl-tests calling NCCL directly leaves it out; needs
    CUDA and ``burst``). Raises RuntimeError with the ranks' last output when the launch fails."""
    with tempfile.TemporaryDirectory(prefix="aisp_peak_allreduce_") as tmp:
        out = Path(tmp) / "rows.json"
        proc = subprocess.Popen(launch_argv(ranks, device, sizes, samples, out, burst, graph, op), env=launch_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            output, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            end_tree(proc, str(out))
            raise RuntimeError(f"the {op} sweep over {ranks} ranks ran past {timeout_s:.0f} s") from exc
        if proc.returncode != 0 or not out.exists():
            lines = output.strip().splitlines()
            raised = [m.group(1) for ln in lines if (m := RANK_ERROR.match(ln.strip()))][:1]
            raise RuntimeError(f"torchrun exited {proc.returncode}: " + " | ".join(raised + lines[-8:]))
        return [Row(**r) for r in json.loads(out.read_text())]


def end_tree(proc: subprocess.Popen, marker: str) -> None:
    """SIGKILL to torchrun and every process under it or whose command line holds ``marker`` (a rank
    forked while this ran), frozen first (:func:`aisp.harness.proctree.kill_tree`). torchrun starts each
    rank in a session of its own, so its process group alone misses them; a rank left alive (hung in
    NCCL) would hold its GPU for whatever runs next, and the pipe it inherited, so reading torchrun's
    output would never end."""
    kill_tree(proc, marker)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.communicate(timeout=10)


def captured(fn: Callable[[], None], device: torch.device) -> Callable[[], None]:
    """``fn`` captured once in a CUDA graph (on a side stream, as torch asks), returned as its replay.
    Raises RuntimeError without CUDA."""
    if device.type != "cuda":
        raise RuntimeError("graph capture needs CUDA")
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        fn()  # the collectives' buffers and connections set up outside the capture
    torch.cuda.current_stream(device).wait_stream(side)
    torch.cuda.synchronize(device)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def burst_row(nbytes: int, device: torch.device, samples: int, calls: int, graph: bool = False,
              op: str = "all_reduce") -> Row:
    """``op`` (all-reduce by default) of ``nbytes``: ``calls`` back to back between two syncs per sample (nccl-tests'
    latency timing), the median of ``samples`` slowest-rank samples divided by ``calls``. With
    ``graph`` the ``calls`` are one captured graph, replayed: the device's time per all-reduce
    without torch's host-side cost of issuing each one."""
    ranks = world_and_rank()[0]
    used, call = collective(op, nbytes, ranks, device)

    def burst() -> None:
        for _ in range(calls):
            call()

    timed = captured(burst, device) if graph else burst
    timed()  # warm-up: connections, buffers (and a first replay)
    ms = statistics.median(time_slowest(timed, device, samples))
    return row(op, used, ranks, ms / 1e3 / calls)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="One rank of aisp peak's all-reduce sweep (torchrun starts it).")
    ap.add_argument("sizes", nargs="+", type=int, help="message sizes in bytes")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cuda (NCCL) or cpu (gloo)")
    ap.add_argument("--samples", type=int, default=5, help="timed samples per size; the median is kept")
    ap.add_argument("--out", type=Path, required=True, help="rank 0 writes the rows here (JSON)")
    ap.add_argument("--burst", type=int, default=0, help="calls per sample (0: about 256 MB of messages)")
    ap.add_argument("--graph", action="store_true", help="replay each burst from a CUDA graph (CUDA, --burst)")
    ap.add_argument("--op", choices=("all_reduce", "all_to_all"), default="all_reduce", help="the collective")
    args = ap.parse_args(argv)
    device = script_init(args.device)
    rows = [burst_row(n, device, args.samples, args.burst, args.graph, args.op) if args.burst else
            measure(args.op, n, device, args.samples) for n in args.sizes]
    if world_and_rank()[1] == 0:
        args.out.write_text(json.dumps([asdict(r) for r in rows]))
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
