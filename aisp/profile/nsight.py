"""Running Nsight tools on a variant's file standalone; Nsight Systems (``nsys``) captures.

A variant runs as ``python <pair_file> --iterations 2 --warmup 1`` under the tool, in its own
process group, killed with the group and every process under it when it outlives its timeout.
"""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from aisp.harness.proctree import kill_tree

STANDALONE_ARGS = ("--iterations", "2", "--warmup", "1")
LOG_TAIL = 2000


def standalone_command(pair_file: Path) -> list[str]:
    """The command that runs one variant on its own, briefly."""
    return [sys.executable, str(Path(pair_file).resolve()), *STANDALONE_ARGS]


def run_logged(cmd: list[str], log: Path, timeout_s: float, env: dict[str, str] | None = None) -> int | None:
    """Run ``cmd`` (in ``env``, default this environment) with stdout and stderr to ``log``; its exit
    code, or None after a timeout, when its process group and every process under it are killed
    (torchrun starts each rank in a session of its own, which the group alone would miss; see
    :func:`aisp.harness.proctree.kill_tree`)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_tree(proc)  # frozen first: a child started meanwhile is killed too
            return None


def failure(tool: str, rc: int | None, log: Path, timeout_s: float) -> dict[str, Any]:
    """The result of a tool run that failed: why, and the end of its log."""
    why = f"{tool} timed out after {timeout_s:g} s" if rc is None else f"{tool} exited with {rc}"
    return {"error": why, "log": str(log), "log_tail": log.read_text(errors="replace")[-LOG_TAIL:]}


def run_nsys(pair_file: Path, out_dir: Path, timeout_s: float = 240) -> dict[str, Any]:
    """Nsight Systems on the variant in ``pair_file`` run standalone; see :func:`run_nsys_command`."""
    return run_nsys_command(standalone_command(pair_file), Path(out_dir) / Path(pair_file).stem, timeout_s)


def run_nsys_command(command: list[str], base: Path, timeout_s: float = 240) -> dict[str, Any]:
    """Capture a Nsight Systems timeline of ``command`` (CUDA, NVTX, OS runtime) as
    ``<base>.nsys-rep`` and its kernel summary; ``{"skipped": reason}`` where ``nsys`` is not
    installed."""
    nsys = shutil.which("nsys")
    if nsys is None:
        return {"skipped": "nsys not found on PATH"}
    log = base.with_suffix(".nsys.log")
    cmd = [nsys, "profile", "--trace=cuda,nvtx,osrt", "--sample=none", "--cpuctxsw=none",
           "--force-overwrite=true", "-o", str(base), *command]
    rc = run_logged(cmd, log, timeout_s)
    report = base.with_suffix(".nsys-rep")
    if rc != 0 or not report.exists():
        return failure("nsys", rc, log, timeout_s)
    stats = [nsys, "stats", "--report", "cuda_gpu_kern_sum", "--format", "csv", "--force-export=true",
             "--output", str(base), str(report)]
    rc = run_logged(stats, base.with_suffix(".stats.log"), timeout_s)
    csv_path = Path(f"{base}_cuda_gpu_kern_sum.csv")
    kernels = parse_kernel_summary(csv_path.read_text()) if rc == 0 and csv_path.exists() else {}
    return {"report": str(report), "log": str(log), "kernel_summary": str(csv_path), "kernels": kernels}


def parse_kernel_summary(text: str) -> dict[str, dict[str, float]]:
    """``nsys stats --report cuda_gpu_kern_sum --format csv`` rows as {kernel: {total_ns, instances, pct}}."""
    rows = csv.DictReader(io.StringIO(text))
    return {row["Name"]: {"total_ns": float(row["Total Time (ns)"]), "instances": float(row["Instances"]),
                          "pct": float(row["Time (%)"])} for row in rows if row.get("Name")}
