"""Nsight Compute on a variant's top kernels: occupancy, DRAM and SM throughput, warp stalls.

ncu runs the variant's file standalone with ``--clock-control none`` (the clocks the harness
timed with), profiling one launch (the second) of each launch configuration of the kernels the
torch trace ranks highest. The report is saved (``.ncu-rep``, opens in the Nsight Compute GUI)
and its raw page read as CSV. Kernels are matched by function name and launch configuration:
ncu and CUPTI demangle template arguments and lambdas differently, ncu shortens scopes (its
names' angle brackets need not balance), and the trace keeps the names CUPTI cannot demangle
mangled; the function name is what all three agree on.
"""

from __future__ import annotations

import csv
import io
import re
import shutil
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aisp.profile.nsight import failure, run_logged, standalone_command
from aisp.profile.trace_events import load_events

SECTIONS = ("SpeedOfLight", "MemoryWorkloadAnalysis", "Occupancy", "WarpStateStats", "LaunchStats")
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
DRAM_PCT = ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
            "dram__throughput.avg.pct_of_peak_sustained_elapsed")
"""DRAM throughput: the first of these the report holds (Hopper reports the first)."""
MEMORY_PCT = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
SM_PCT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
L2_PCT = "lts__throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_BYTES_PER_S = "dram__bytes.sum.per_second"
L2_BYTES_PER_S = "lts__t_bytes.sum.per_second"
"""Absolute DRAM and L2 throughput (bytes/s), from the MemoryWorkloadAnalysis section."""
EXTRA_METRICS = (DRAM_BYTES_PER_S, L2_BYTES_PER_S, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed")
"""Collected by name besides the sections, so the diff's byte rates and tensor pipe are always there."""
TENSOR_RE = re.compile(r"^sm__pipe_tensor\w*_cycles_active\.avg\.pct_of_peak_sustained_elapsed$")
"""Tensor pipe utilisation: the busiest of the tensor pipe metrics the report holds (all tensor ops;
Hopper's hmma/hgmma/qgmma/imma breakdown; dmma)."""
DURATION = "gpu__time_duration.sum"
STALL_RE = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")
NOT_STALLS = frozenset({"selected"})
TOP_STALLS = 3
TO_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
         "second": 1e6, "s": 1e6}
REGEX_SPECIALS = re.compile(r"([.^$*+?()\[\]{}|\\])")
MANGLED_NESTED = re.compile(r"N[rVKRO]*")
"""The start of a scoped (nested) mangled name and its qualifiers."""
MANGLED_PART = re.compile(r"(?P<length>[1-9][0-9]*)|St|S[0-9A-Z]*_")
"""Parts of a mangled scope: a source name's length, ``std::``, a substitution (``S_``, ``S3_``)."""


def run_ncu(pair_file: Path, out_dir: Path, kernels: int = 5, timeout_s: float = 240,
            launches: Sequence[str] = (), configs: int = 0) -> dict[str, Any]:
    """Profile the variant in ``pair_file`` (run standalone) under ncu; see :func:`run_ncu_command`."""
    base = Path(out_dir) / Path(pair_file).stem
    return run_ncu_command(standalone_command(pair_file), base, kernels, timeout_s, launches, configs)


def run_ncu_command(command: Sequence[str], base: Path, kernels: int = 5, timeout_s: float = 240,
                    launches: Sequence[str] = (), configs: int = 0) -> dict[str, Any]:
    """Profile ``command`` (any program: a variant run standalone, ``python my_script.py``) under
    ncu, writing ``<base>.ncu-rep``, ``.ncu.log`` and ``.ncu.csv``, and summarize ``kernels`` kernels.

    ``launches`` (``function <<<grid, block>>>`` keys in rank order, e.g. :func:`top_launches`
    of the variant's torch trace) narrow the profile to those function names and the report to
    those launch configurations, in that order. Without them (or where none matches) every
    launch configuration is profiled once and the longest are reported. ``configs``: how many
    configurations those functions have in the trace (:func:`launch_configs`); above MAX_CONFIGS
    the first MAX_LAUNCHES launches are profiled (``capped`` in the result).
    Returns ``{"kernels": {launch: {duration_us, sm_pct, memory_pct, dram_pct, dram_gbps, l2_pct,
    l2_gbps, tensor_pct, occupancy, top_stalls, demangled}}, "matched": bool, ...}``, or
    ``{"skipped": reason}`` without ``ncu``.
    """
    ncu = shutil.which("ncu")
    if ncu is None:
        return {"skipped": "ncu not found on PATH"}
    log, report = base.with_suffix(".ncu.log"), base.with_suffix(".ncu-rep")
    cmd = profile_command(ncu, command, report, [launch.split(" <<<")[0] for launch in launches], configs)
    rc = run_logged(cmd, log, timeout_s)
    if rc == 0 and not report.exists() and NO_KERNELS in log.read_text(errors="replace"):
        return {"kernels": {}, "matched": False, "no_kernels": NO_KERNELS_REASON, "log": str(log), "command": cmd}
    if rc != 0 or not report.exists():
        return failure("ncu", rc, log, timeout_s) | {"command": cmd}
    raw = base.with_suffix(".ncu.csv")
    rc = run_logged([ncu, "--import", str(report), "--csv", "--page", "raw", "--print-units", "base",
                     "--print-kernel-base", "demangled"], raw, timeout_s)
    if rc != 0:
        return failure("ncu --import", rc, raw, timeout_s) | {"command": cmd}
    top, matched = select_kernels(parse_raw_csv(raw.read_text()), launches, kernels)
    capped = (f"{configs} launch configurations: the first {MAX_LAUNCHES} launches profiled, not one of each"
              if configs > MAX_CONFIGS else None)
    return {"kernels": top, "matched": matched, "report": str(report), "csv": str(raw), "log": str(log),
            "command": cmd, "capped": capped}


NO_KERNELS = "No kernels were profiled"
"""ncu's warning when the program ran and launched no kernel (it then writes no report)."""
NO_KERNELS_REASON = "no kernel launched under ncu: its GPU time, if any, is copies; the rest is host work"


def top_launches(trace: Path, count: int) -> list[str]:
    """The ``count`` kernel launch configurations with the most device time in a torch trace, as
    ``function <<<grid, block>>>``: what ncu and the trace agree on, where their demanglers
    spell template arguments and lambdas differently."""
    totals: dict[str, float] = defaultdict(float)
    for ev in load_events(trace):
        if ev.cat == "kernel" and ev.launch is not None:
            totals[launch_key(function_name(ev.name), str(ev.launch[0]), str(ev.launch[1]))] += ev.dur
    return sorted(totals, key=totals.__getitem__, reverse=True)[:count]


def launch_key(function: str, grid: str, block: str) -> str:
    """``Kernel2 <<<(8, 2, 8), (128, 1, 1)>>>``."""
    return f"{function} <<<{grid}, {block}>>>"


def select_kernels(parsed: dict[str, dict[str, Any]], launches: Sequence[str], count: int
                   ) -> tuple[dict[str, dict[str, Any]], bool]:
    """The profiled kernels whose launch is one of ``launches`` (in their order), and True; where
    none is, the longest ones and False. ncu also profiles kernels that only share a function
    name with a wanted one (setup's elementwise ops): this is where they are dropped."""
    rank = {launch: i for i, launch in enumerate(launches)}
    chosen = {k: m for k, m in parsed.items() if m["launch"] in rank}
    matched = bool(chosen)
    pool = chosen if matched else parsed
    ordered = sorted(pool.items(), key=lambda kv: (rank.get(kv[1]["launch"], 0), -kv[1]["duration_us"]))
    return dict(ordered[:count]), matched


MAX_CONFIGS = 48
"""Launch configurations of the wanted kernels above which ncu profiles the first MAX_LAUNCHES launches
instead of one of each: a cache that grows every decode step (``ch13:kv_cache_naive``) gives its
kernels a new grid each step, hundreds of configurations, each replayed under the sections (its ncu
run passed 142 s)."""
MAX_LAUNCHES = 64


def launch_configs(trace: Path, functions: Sequence[str]) -> int:
    """How many distinct launch configurations of kernels named ``functions`` a torch trace holds."""
    wanted = {function_name(f) for f in functions}
    return len({(function_name(ev.name), str(ev.launch)) for ev in load_events(trace)
                if ev.cat == "kernel" and ev.launch is not None and function_name(ev.name) in wanted})


def profile_command(ncu: str, command: Sequence[str], report: Path, functions: Sequence[str],
                    configs: int = 0) -> list[str]:
    """The ncu command line: sections, one launch per configuration after the first, optional filter;
    where the wanted kernels come in more than MAX_CONFIGS configurations (``configs``, from the
    trace), the first MAX_LAUNCHES launches after the first instead (the report then says so)."""
    if configs > MAX_CONFIGS:
        limit = ["--filter-mode", "global", "--launch-skip", "1", "--launch-count", str(MAX_LAUNCHES)]
    else:
        limit = ["--filter-mode", "per-launch-config", "--launch-skip", "1", "--launch-count", "1"]
    cmd = [ncu, "--clock-control", "none", "--target-processes", "all", "--force-overwrite", *limit]
    for section in SECTIONS:
        cmd += ["--section", section]
    cmd += ["--metrics", ",".join(EXTRA_METRICS)]
    if functions:
        cmd += ["--kernel-name", "regex:" + kernel_regex(functions)]
    return cmd + ["-o", str(report.with_suffix("")), *command]


def kernel_regex(names: Sequence[str]) -> str:
    """A regex matching the function names (ncu's default kernel-name base) of ``names``."""
    bases = sorted({function_name(n) for n in names})
    return "^(" + "|".join(REGEX_SPECIALS.sub(r"\\\1", b) for b in bases) + ")$"


def function_name(name: str) -> str:
    """A kernel's function name, ncu's default ``--kernel-name-base``: no return type, scope,
    template arguments or parameters. ``void at::native::foo<4, bar>(int, float*)`` → ``foo``;
    a mangled name (``_ZN7cutlass13device_kernelI...``) → ``device_kernel``.

    The name is what comes before the first ``<`` or ``(``, once the anonymous namespaces of the
    scope are removed: the template arguments need not be balanced, as ncu's shortened names are
    not (``indexFuncLargeIndex<float, ..., (int)-2, 1, unnamed>::ReduceAdd>(...)``)."""
    if name.startswith("_Z"):
        return mangled_function_name(name)
    text = name.replace("(anonymous namespace)", "").replace("<unnamed>", "")
    head = re.split(r"[<(]", text, maxsplit=1)[0].strip()
    return head.split(" ")[-1].split("::")[-1]


def mangled_function_name(mangled: str) -> str:
    """The function name in an Itanium-mangled kernel name: the last source name (``<length><id>``)
    of its scope before the template arguments (``I``) or the end of the scope (``E``);
    ``mangled`` itself where it is not of that form. The torch trace keeps the names CUPTI cannot
    demangle (PyTorch's CUTLASS grouped GEMM) mangled, and ncu's filter matches demangled names."""
    pos = 3 if mangled.startswith("_ZL") else 2
    nested = MANGLED_NESTED.match(mangled, pos)
    if nested:
        pos = nested.end()
    last = ""
    while (part := MANGLED_PART.match(mangled, pos)) is not None:
        pos = part.end()
        if part.group("length"):
            pos += int(part.group("length"))
            last = mangled[part.end():pos]
            if not nested:
                break
    return last if last and pos <= len(mangled) else mangled


def parse_raw_csv(text: str) -> dict[str, dict[str, Any]]:
    """ncu's ``--csv --page raw`` output as {kernel: {occupancy, dram_pct, memory_pct, sm_pct,
    duration_us, top_stalls, demangled, launch}}, each kernel named by its launch,
    ``function <<<grid, block>>>`` (``#2``… for repeats)."""
    rows = list(csv.reader(io.StringIO(text[text.find('"ID"'):]))) if '"ID"' in text else []
    if not rows:
        return {}
    header, body = rows[0], rows[1:]
    units = body.pop(0) if body and not body[0][0] else [""] * len(header)
    result: dict[str, dict[str, Any]] = {}
    for row in body:
        if not any(row):  # a blank line (a trailing newline of the tool's output)
            continue
        cells = dict(zip(header, row, strict=False))
        demangled = cells.get("Kernel Name", "?")
        name = launch_key(function_name(demangled), cells.get("Grid Size", "?"), cells.get("Block Size", "?"))
        key, n = name, 1
        while key in result:
            n += 1
            key = f"{name}#{n}"
        result[key] = _kernel_metrics(cells, dict(zip(header, units, strict=False))) | {"demangled": demangled, "launch": name}
    return result


def _kernel_metrics(cells: dict[str, str], units: dict[str, str]) -> dict[str, Any]:
    stalls = {m.group(1): _number(v) for k, v in cells.items() if (m := STALL_RE.match(k))}
    ranked = sorted(((r, v) for r, v in stalls.items() if r not in NOT_STALLS and v is not None),
                    key=lambda rv: -rv[1])
    duration = _number(cells.get(DURATION, ""))
    scale = TO_US.get(units.get(DURATION, "nsecond"), 1e-3)
    dram = next((cells[k] for k in DRAM_PCT if k in cells), "")
    tensor = [v for k, text in cells.items() if TENSOR_RE.match(k) and (v := _number(text)) is not None]
    return {"occupancy": _number(cells.get(OCCUPANCY, "")), "dram_pct": _number(dram),
            "memory_pct": _number(cells.get(MEMORY_PCT, "")), "sm_pct": _number(cells.get(SM_PCT, "")),
            "l2_pct": _number(cells.get(L2_PCT, "")), "tensor_pct": max(tensor) if tensor else None,
            "dram_gbps": _per_second_gb(cells.get(DRAM_BYTES_PER_S, "")),
            "l2_gbps": _per_second_gb(cells.get(L2_BYTES_PER_S, "")),
            "duration_us": duration * scale if duration is not None else 0.0,
            "top_stalls": [[r, v] for r, v in ranked[:TOP_STALLS]]}


def _per_second_gb(text: str) -> float | None:
    """A byte/second figure (``--print-units base``) in GB/s."""
    value = _number(text)
    return None if value is None else value / 1e9


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None
