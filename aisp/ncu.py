"""Nsight Compute on a variant's top kernels: occupancy, DRAM and SM throughput, warp stalls.

ncu runs the variant's file standalone with ``--clock-control none`` (the clocks the harness
timed with), profiling one launch (the second) of each launch configuration of the named kernels.
The report is saved (``.ncu-rep``, opens in the Nsight Compute GUI) and its raw page read as CSV.
"""

from __future__ import annotations

import csv
import io
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aisp.nsight import failure, run_logged, standalone_command

SECTIONS = ("SpeedOfLight", "Occupancy", "WarpStateStats", "LaunchStats")
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
SM_PCT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
DURATION = "gpu__time_duration.sum"
STALL_RE = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")
NOT_STALLS = frozenset({"selected"})
TOP_STALLS = 3
TO_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
         "second": 1e6, "s": 1e6}
REGEX_SPECIALS = re.compile(r"([.^$*+?()\[\]{}|\\])")


def run_ncu(pair_file: Path, out_dir: Path, kernels: int = 5, timeout_s: float = 240,
            kernel_names: Sequence[str] = ()) -> dict[str, Any]:
    """Profile the variant in ``pair_file`` under ncu and summarize its ``kernels`` longest kernels.

    ``kernel_names`` (demangled names, e.g. a torch trace's top kernels) narrow the profile to
    those kernels; without them every launch configuration is profiled once.
    Returns ``{"kernels": {name: {occupancy, dram_pct, sm_pct, duration_us, top_stalls}}, ...}``,
    or ``{"skipped": reason}`` where ``ncu`` is not installed.
    """
    ncu = shutil.which("ncu")
    if ncu is None:
        return {"skipped": "ncu not found on PATH"}
    base = Path(out_dir) / Path(pair_file).stem
    log, report = base.with_suffix(".ncu.log"), base.with_suffix(".ncu-rep")
    cmd = profile_command(ncu, pair_file, report, kernel_names)
    rc = run_logged(cmd, log, timeout_s)
    if rc != 0 or not report.exists():
        return failure("ncu", rc, log, timeout_s) | {"command": cmd}
    raw = base.with_suffix(".ncu.csv")
    rc = run_logged([ncu, "--import", str(report), "--csv", "--page", "raw", "--print-units", "base",
                     "--print-kernel-base", "function"], raw, timeout_s)
    if rc != 0:
        return failure("ncu --import", rc, raw, timeout_s) | {"command": cmd}
    parsed = parse_raw_csv(raw.read_text())
    top = dict(sorted(parsed.items(), key=lambda kv: -kv[1]["duration_us"])[:kernels])
    return {"kernels": top, "report": str(report), "csv": str(raw), "log": str(log), "command": cmd}


def profile_command(ncu: str, pair_file: Path, report: Path, kernel_names: Sequence[str]) -> list[str]:
    """The ncu command line: sections, one launch per configuration after the first, optional filter."""
    cmd = [ncu, "--clock-control", "none", "--target-processes", "all", "--force-overwrite",
           "--filter-mode", "per-launch-config", "--launch-skip", "1", "--launch-count", "1"]
    for section in SECTIONS:
        cmd += ["--section", section]
    if kernel_names:
        cmd += ["--kernel-name", "regex:" + kernel_regex(kernel_names)]
    return cmd + ["-o", str(report.with_suffix("")), *standalone_command(pair_file)]


def kernel_regex(names: Sequence[str]) -> str:
    """A regex matching the function names (ncu's default kernel-name base) of ``names``."""
    bases = sorted({function_name(n) for n in names})
    return "^(" + "|".join(REGEX_SPECIALS.sub(r"\\\1", b) for b in bases) + ")$"


def function_name(demangled: str) -> str:
    """``void at::native::foo<4, bar>(int, float*)`` → ``foo``: no return type, scope, templates
    or parameters."""
    text = demangled.replace("(anonymous namespace)", "anon")
    depth, kept = 0, []
    for ch in text:
        if ch in "<(":
            if ch == "(" and depth == 0:
                break
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif depth == 0:
            kept.append(ch)
    head = "".join(kept).strip().split(" ")[-1]
    return head.split("::")[-1]


def parse_raw_csv(text: str) -> dict[str, dict[str, Any]]:
    """ncu's ``--csv --page raw`` output as {kernel: {occupancy, dram_pct, sm_pct, duration_us,
    top_stalls}}; a kernel profiled in several launch configurations gets ``#2``, ``#3``… suffixes."""
    rows = list(csv.reader(io.StringIO(text[text.find('"ID"'):]))) if '"ID"' in text else []
    if not rows:
        return {}
    header, body = rows[0], rows[1:]
    units = body.pop(0) if body and not body[0][0] else [""] * len(header)
    result: dict[str, dict[str, Any]] = {}
    for row in body:
        cells = dict(zip(header, row, strict=False))
        name = cells.get("Kernel Name", "?")
        key, n = name, 1
        while key in result:
            n += 1
            key = f"{name}#{n}"
        result[key] = _kernel_metrics(cells, dict(zip(header, units, strict=False)))
    return result


def _kernel_metrics(cells: dict[str, str], units: dict[str, str]) -> dict[str, Any]:
    stalls = {m.group(1): _number(v) for k, v in cells.items() if (m := STALL_RE.match(k))}
    ranked = sorted(((r, v) for r, v in stalls.items() if r not in NOT_STALLS and v is not None),
                    key=lambda rv: -rv[1])
    duration = _number(cells.get(DURATION, ""))
    scale = TO_US.get(units.get(DURATION, "nsecond"), 1e-3)
    return {"occupancy": _number(cells.get(OCCUPANCY, "")), "dram_pct": _number(cells.get(DRAM_PCT, "")),
            "sm_pct": _number(cells.get(SM_PCT, "")),
            "duration_us": duration * scale if duration is not None else 0.0,
            "grid": cells.get("Grid Size", ""), "block": cells.get("Block Size", ""),
            "top_stalls": [[r, v] for r, v in ranked[:TOP_STALLS]]}


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None
