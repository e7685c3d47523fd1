"""The MCP server: aisp's tools with typed inputs and outputs, on the official SDK's ``MCPServer``,
served over stdio. Nothing a tool takes changes how a check judges: no tolerance, no inputs, no
seed; run and verify jobs are the ``aisp bench`` commands with their own rules."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Literal

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from aisp.harness.discovery import all_pairs, normalize_chapter, repo_root
from aisp.mcp import models as m
from aisp.mcp.jobs import Jobs
from aisp.mcp.policy import SandboxPolicy
from aisp.mcp.sandbox import KernelRequest, check_source

AUDIT_TIMEOUT_S = 120.0
INSTRUCTIONS = ("aisp judges GPU performance work: list_targets, then start_job (run or verify a pair; poll "
                "job_status, then job_result), compare_runs on two run folders, check_kernel to verify and time "
                "your kernel's source against a reference (cheats such as cached answers, lower precision, "
                "aliasing and unjoined streams fail), summarize_profile on a Chrome trace, host_audit.")


@dataclass(frozen=True)
class ServerConfig:
    """The server's own settings (its command line's), never a tool call's."""

    work_dir: Path = Path("artifacts/mcp")
    """Jobs' artifacts and checked kernels' files go here."""
    policy: SandboxPolicy = field(default_factory=SandboxPolicy)


@contextmanager
def anticipated() -> Iterator[None]:
    """A bad call (unknown target or job, missing folder, unreadable file) as a tool error whose
    message the client reads; anything else stays a crash, logged by the SDK."""
    try:
        yield
    except (KeyError, ValueError, OSError, subprocess.SubprocessError) as exc:
        raise ToolError(exc.args[0] if isinstance(exc, KeyError) else str(exc)) from None


def build(config: ServerConfig, jobs: Jobs) -> MCPServer:
    """The server with every tool registered."""
    server = MCPServer("aisp", instructions=INSTRUCTIONS)

    @server.tool()
    def list_targets(chapter: Annotated[str | None, Field(description="Only this chapter, e.g. ch20")] = None
                     ) -> m.TargetList:
        """Every benchmark pair: its target name and optimized variants."""
        pairs = all_pairs(repo_root())
        if chapter:
            pairs = [p for p in pairs if p.group == normalize_chapter(chapter)]
        return m.TargetList(targets=[m.Target(target=p.target, variants=[o.stem for o in p.optimized],
                                              problem=p.problem or None) for p in pairs])

    @server.tool()
    def start_job(action: Annotated[Literal["run", "verify"], Field(description="run: verify then time; "
                                                                    "verify: correctness only")],
                  target: Annotated[str, Field(description="ch20, or one pair: ch01:batch_size")],
                  device: Literal["auto", "cpu", "cuda"] = "auto") -> m.JobStatus:
        """Start `aisp bench run|verify` on a target in the background; poll job_status, then job_result."""
        with anticipated():
            return jobs.start(action, target, device)

    @server.tool()
    def job_status(job_id: str) -> m.JobStatus:
        """A job's state (running, done, failed, timeout), exit code and last log lines."""
        with anticipated():
            return jobs.status(job_id)

    @server.tool()
    def job_result(job_id: str) -> m.JobResult:
        """Each pair's verdict and speedup [95% interval] once the job ended, and its run folder."""
        with anticipated():
            return jobs.result(job_id)

    @server.tool()
    def compare_runs(run_a: Annotated[str, Field(description="The earlier run folder")],
                     run_b: Annotated[str, Field(description="The later run folder")]) -> m.RunComparison:
        """Each pair of run B against run A: faster, same or slower, with significance."""
        from aisp.judge.compare_runs import compare_runs as compare

        with anticipated():
            doc = compare(Path(run_a), Path(run_b))
        pairs = [m.PairComparison(target=p["target"], status=p["status"],
                                  variants=[m.VariantComparison(**{k: v.get(k) for k in ("variant", "status", "a_ms",
                                                                                           "b_ms")})
                                            for v in p["variants"]]) for p in doc["pairs"]]
        return m.RunComparison(run_a=run_a, run_b=run_b, environment_changes=list(doc["environment_changes"]),
                               pairs=pairs)

    @server.tool()
    async def check_kernel(
        source: Annotated[str, Field(description="Python source defining the kernel function")],
        function: Annotated[str, Field(description="The kernel's function name in source")],
        reference: Annotated[str, Field(description="The reference: a function name in reference_source, or "
                                        "MODULE:FUNCTION importable from the repository root")],
        shapes: Annotated[list[str], Field(description="One call's input shapes per entry, e.g. MxK,KxN")],
        dims: Annotated[dict[str, int] | None, Field(description="Sizes of the names in shapes, e.g. "
                                                     "{\"M\": 512}")] = None,
        dtypes: Annotated[list[Literal["float32", "bfloat16", "float16", "float64"]] | None,
                          Field(description="Input dtypes (default float32)")] = None,
        reference_source: Annotated[str | None, Field(description="Python source defining the reference")] = None,
    ) -> m.KernelCheck:
        """Verify a kernel against a reference in a worker process (timeout, process-group kill), then
        time both: edge and random sizes, inputs refilled between calls, the harness's tolerance."""
        request = KernelRequest(source, function, reference, reference_source, shapes, dict(dims or {}),
                                list(dtypes or ["float32"]))
        return await anyio.to_thread.run_sync(check_source, request, config.work_dir, config.policy)

    @server.tool()
    def summarize_profile(trace: Annotated[str, Field(description="A Chrome trace JSON (aisp profile run)")]
                          ) -> m.ProfileSummary:
        """The numbers to read first in a trace: kernel time, launches, GPU busy share, findings."""
        from aisp.profile.trace_summary import summarize_trace

        with anticipated():
            s = summarize_trace(Path(trace))
        names = lambda stats: [m.NameTime(name=x.name, count=x.count, total_us=x.total_us, pct=x.pct)  # noqa: E731
                               for x in stats]
        return m.ProfileSummary(path=s.path, device=s.device, window_us=s.window_us, kernel_count=s.kernel_count,
                                kernel_us=s.kernel_us, launch_count=s.launch_count,
                                gpu_busy_fraction=s.gpu_busy_fraction, top_kernels=names(s.top_kernels),
                                top_cpu_ops=names(s.top_cpu_ops), findings=list(s.findings))

    @server.tool()
    async def host_audit(profile: Literal["training", "inference"] = "training") -> m.HostAudit:
        """The read-only host audit (`aisp system audit --json`): OS, driver and GPU settings."""
        return await anyio.to_thread.run_sync(_audit, profile)

    return server


def _audit(profile: str) -> m.HostAudit:
    with anticipated():
        return _read_audit(profile)


def _read_audit(profile: str) -> m.HostAudit:
    proc = subprocess.run([sys.executable, "-m", "aisp", "system", "audit", "--json", "--profile", profile],
                          capture_output=True, text=True, timeout=AUDIT_TIMEOUT_S, cwd=repo_root())
    doc = json.loads(proc.stdout)
    findings = [m.AuditFinding(**{k: f.get(k) for k in ("check", "grade", "observed", "recommended", "fix",
                                                          "hardware")}) for f in doc["findings"]]
    return m.HostAudit(exit_code=proc.returncode, counts=doc["summary"]["counts"], findings=findings)


def serve(config: ServerConfig) -> None:
    """Serve over stdio until the client leaves; running jobs end with their process groups."""
    config = replace(config, work_dir=config.work_dir.resolve())
    jobs = Jobs(config.work_dir / "jobs")
    try:
        build(config, jobs).run("stdio")
    finally:
        jobs.close()
