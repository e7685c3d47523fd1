"""``aisp profile``: profile one pair (torch.profiler, ncu, nsys, py-spy, CUDA memory history) and summarize a trace."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from aisp.harness.discovery import TargetError
from aisp.profile.command import CommandError
from aisp.profile.trace_summary import TraceSummary, summarize_trace

app = typer.Typer(help="Profile a pair or any command (torch.profiler traces, Nsight Compute, Nsight Systems, "
                       "py-spy; a pair's CUDA memory history), "
                       "compare a pair's kernels under ncu, summarize traces.", no_args_is_help=True)
console = Console()
GPU_ROWS = frozenset({"goodput (kernel time / wall)", "GPU busy", "kernels / launches", "host gaps (count, total)"})


class ToolName(str, Enum):
    torch = "torch"
    ncu = "ncu"
    nsys = "nsys"
    pyspy = "py-spy"
    memory = "memory"


@app.command("run")
def run(target: Annotated[str | None, typer.Option("--target", "-t", help="One pair, e.g. ch01:batch_size.")] = None,
        command: Annotated[list[str] | None, typer.Argument(
            help="Instead of a pair, any command after --: aisp profile run --tool ncu -- python my_script.py",
            show_default=False)] = None,
        tool: Annotated[ToolName, typer.Option(help="The profiler; memory: the CUDA caching allocator's history "
                                               "(a pair only).")] = ToolName.torch,
        output_dir: Annotated[Path | None, typer.Option(help="Default: artifacts/<time>/<pair>/profiles.")] = None,
        iterations: Annotated[int, typer.Option(min=1, help="Profiled run() calls per variant.")] = 3,
        warmup: Annotated[int, typer.Option(min=0, help="Untraced run() calls before profiling.")] = 3,
        timeout: Annotated[float, typer.Option(min=1, help="Seconds a profiled command, one ncu or nsys run of a variant, or all the "
                                               "ranks of a multi-rank pair, may take.")] = 600.0,
        ) -> None:
    """Profile every variant of one pair (-t) or one command (after --) and print the summaries.
    Exit 2 for an unknown target, both or neither of -t and a command, a non-Python command
    under --tool torch, or a command under --tool memory."""
    if (target is None) == (not command):
        raise _usage("name one pair with -t, or one command after --, not both")
    from aisp.profile.command import profile_any
    from aisp.profile.pair import ProfileRequest, profile_target

    try:
        if target is not None:
            result = profile_target(ProfileRequest(target, tool.value, output_dir, iterations, warmup,
                                                        timeout_s=timeout))
        else:
            result = profile_any(list(command or []), tool.value, output_dir, timeout_s=timeout)
    except (TargetError, CommandError) as exc:
        raise _usage(str(exc)) from exc
    _print_result(result)


@app.command("diff")
def diff(target: Annotated[str, typer.Option("--target", "-t", help="One pair, e.g. ch19:w4a16_gemm.")],
         kernels: Annotated[int, typer.Option(min=1, help="Top kernels shown per variant.")] = 3,
         output_dir: Annotated[Path | None, typer.Option(help="Default: artifacts/<time>/<pair>/profiles.")] = None,
         timeout: Annotated[float, typer.Option(min=1, help="Seconds one variant's ncu run may take.")] = 600,
         ) -> None:
    """Nsight Compute on every variant of one pair, top kernels side by side: duration, SOL % of
    compute and memory, DRAM and L2 throughput, tensor pipe, occupancy, top stalls. Exit 1 when
    fewer than two variants could be profiled (ncu absent or failing), 2 for an unknown target."""
    from aisp.profile.diff import diff_lines, diff_pair, diff_table, fits, profiled

    try:
        result = diff_pair(target, output_dir, kernels, timeout)
    except TargetError as exc:
        raise _usage(str(exc)) from exc
    _print_failures(result["variants"])
    done = profiled(result)
    if len(done) < 2:
        Console(stderr=True).print(f"error: ncu profiled {len(done)} of {len(result['variants'])} variants of "
                                   f"{result['target']}; nothing to compare", soft_wrap=True)
        raise typer.Exit(1)
    title = f"ncu: {result['target']} (files in {result['output_dir']})"
    if fits(done, kernels, console.width):
        console.print(diff_table(done, kernels, title))
    else:  # too narrow for one column a kernel (a CI log reads as 80 columns): one figure a line
        console.print("\n".join([title, *diff_lines(done, kernels)]), soft_wrap=True, markup=False, highlight=False)
    for name, data in done.items():
        if data.get("no_kernels"):
            console.print(f"{name}: {data['no_kernels']}", soft_wrap=True)
        if data.get("capped"):
            console.print(f"{name}: {data['capped']}", soft_wrap=True)


def _usage(message: str) -> typer.Exit:
    Console(stderr=True).print(f"[red]error:[/red] {message}", soft_wrap=True)
    return typer.Exit(2)


@app.command("summarize")
def summarize(trace: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="A Chrome trace JSON.")]
              ) -> None:
    """Top kernels (or CPU ops), host gaps, GPU busy fraction, launches and findings of one trace."""
    _print_summary(summarize_trace(trace))


def _print_failures(variants: dict[str, Any]) -> None:
    for name, data in variants.items():
        if "skipped" in data:
            console.print(f"{name}: skipped: {data['skipped']}")
        elif "error" in data:
            console.print(f"{name}: error: {data['error']}\n{data.get('log_tail', '')}")


def _print_result(result: dict[str, Any]) -> None:
    variants = result["variants"]
    console.print(f"{result['target']} ({result['tool']}): files in {result['output_dir']}", soft_wrap=True)
    _print_failures(variants)
    done = {n: d for n, d in variants.items() if "skipped" not in d and "error" not in d}
    if result["tool"] == "torch" and "trace" in next(iter(done.values()), {}):  # a command's one trace
        for data in done.values():
            _print_summary(summarize_trace(Path(data["trace"])))
    elif result["tool"] == "torch" and done:
        console.print(_side_by_side(done))
        for name, data in done.items():
            for line in data["findings"]:
                console.print(f"{name}: {line}")
    elif result["tool"] == "py-spy":
        for name, data in done.items():
            console.print(_host_table(name, data))
    elif result["tool"] == "memory":
        for name, data in done.items():
            console.print(_memory_table(name, data))
            if "ranks" in data:  # a pair of several ranks: the table is rank 0's
                console.print(f"{name}: peak, each rank: {_per_rank_peak(data)}", soft_wrap=True)
    elif result["tool"] == "ncu":
        for name, data in done.items():
            console.print(_ncu_table(name, data["kernels"]))
            if not data["matched"]:
                console.print(f"{name}: no profiled kernel matches a top torch-trace kernel's launch "
                              "configuration; these are the longest profiled kernels.")
    elif done:
        for name, data in done.items():
            console.print(f"{name}: {data['report']}", soft_wrap=True)  # a path is never wrapped


def _host_table(name: str, data: dict[str, Any]) -> Table:
    """One variant's py-spy summary: where its samples were (self time), then each process's share."""
    table = Table("where the host's samples were", "share", title=f"{name}: {data['samples']:,} samples (py-spy)")
    for frame, share in data["top_self"]:
        table.add_row(frame, _pct(share))
    for process, share in data["processes"]:
        table.add_row(f"[dim]{process}[/dim]", _pct(share))
    return table


def _memory_table(name: str, data: dict[str, Any]) -> Table:
    """One variant's allocations live at its peak, grouped by the line in the repository that made
    them, with their share of the peak."""
    from aisp.profile.memory import format_bytes

    peak = data["peak_bytes"]
    title = f"{name}: live at the peak {format_bytes(peak)} ({format_bytes(data['start_bytes'])} at the start)"
    table = Table("where (first frame in the repository)", "bytes", "allocations", "share", title=title)
    for row in data["at_peak"]:
        table.add_row(row["where"], format_bytes(row["bytes"]), f"{row['count']:,}",
                      _pct(row["bytes"] / peak if peak else None))
    return table


def _per_rank_peak(summary: dict[str, Any]) -> str:
    """``r0 486.6 MiB / r1 276.9 MiB (at the start r0 268.0 MiB / r1 268.0 MiB)``: every rank's peak
    and the bytes live when its recorded window began."""
    from aisp.profile.memory import format_bytes

    ranks = summary["ranks"]
    peaks = " / ".join(f"r{r['rank']} {format_bytes(r['peak_bytes'])}" for r in ranks)
    starts = " / ".join(f"r{r['rank']} {format_bytes(r['start_bytes'])}" for r in ranks)
    return f"{peaks} (at the start {starts})"


def _side_by_side(summaries: dict[str, dict[str, Any]]) -> Table:
    table = Table("metric", *summaries, title="torch.profiler summary")
    rows = {
        "device": lambda s: s["device"],
        "window per iteration": lambda s: f"{s['window_us'] / s['profiled_iterations'] / 1e3:.3f} ms",
        "goodput (kernel time / wall)": lambda s: _pct(s["goodput"]),
        "GPU busy": lambda s: _pct(s["gpu_busy_fraction"]),
        "kernels / launches": lambda s: f"{s['kernel_count']} / {s['launch_count']}",
        "host gaps (count, total)": lambda s: f"{s['gaps']['count']}, {s['gaps']['total_us']:.1f} µs",
        "ATen ops cover (host)": lambda s: _pct(s["host_op_fraction"]),
        "aten::empty_strided share": lambda s: _pct(s["empty_strided_share"]),
    }
    on_gpu = any(s["device"] == "cuda" for s in summaries.values())
    for label, cell in rows.items():
        if on_gpu or label not in GPU_ROWS:
            table.add_row(label, *(cell(s) for s in summaries.values()))
    if any("ranks" in s for s in summaries.values()):  # a pair of several ranks: the table is rank 0's
        table.add_row("window per iteration, each rank", *(_per_rank(s) for s in summaries.values()))
    return table


def _per_rank(summary: dict[str, Any]) -> str:
    """``r0 1.234 / r1 1.301 ms``: every rank's window per profiled iteration."""
    each = [f"r{r['rank']} {r['window_us'] / summary['profiled_iterations'] / 1e3:.3f}" for r in summary.get("ranks", [])]
    return " / ".join(each) + " ms" if each else "-"


def _ncu_table(name: str, kernels: dict[str, dict[str, Any]]) -> Table:
    table = Table("kernel <<<grid, block>>>", "µs", "occupancy %", "DRAM %", "memory %", "SM %",
                  "top stalls (warps per issue)", title=f"ncu: {name}")
    for kernel, m in kernels.items():
        stalls = ", ".join(f"{r} {v:.2f}" for r, v in m["top_stalls"])
        table.add_row(kernel, f"{m['duration_us']:.1f}", _num(m["occupancy"]), _num(m["dram_pct"]),
                      _num(m["memory_pct"]), _num(m["sm_pct"]), stalls)
    return table


def _print_summary(s: TraceSummary) -> None:
    console.print(f"{s.path}: {s.device}, window {s.window_us / 1e3:.3f} ms, iterations {s.iterations or '?'}")
    stats, title = (s.top_kernels, "top kernels") if s.device == "cuda" else (s.top_cpu_ops, "top CPU ops (self)")
    table = Table("name", "count", "total µs", "%", title=title)
    for st in stats:
        table.add_row(st.name[:80], str(st.count), f"{st.total_us:.1f}", f"{st.pct:.1f}")
    console.print(table)
    if s.device == "cuda":
        g = s.gaps
        console.print(f"launches: {s.launch_count} (graph launches {s.graph_launch_count}), kernels: {s.kernel_count}")
        console.print(f"host gaps > {g.threshold_us:g} µs: {g.count}, total {g.total_us:.1f} µs, largest {g.max_us:.1f} µs")
        console.print(f"GPU busy: {_pct(s.gpu_busy_fraction)}, goodput: {_pct(s.goodput)}")
    console.print(f"aten::empty_strided: {s.empty_strided_us:.1f} µs ({_pct(s.empty_strided_share)})")
    for line in s.findings or ("no findings",):
        console.print(f"- {line}")


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"
