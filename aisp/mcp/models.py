"""The typed outputs of the MCP tools (their JSON schemas are what a client sees)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

JobState = Literal["running", "done", "failed", "timeout"]


class Target(BaseModel):
    target: str = Field(description="chNN:name, what run/verify jobs take")
    variants: list[str] = Field(description="The optimized files' names")
    problem: str | None = Field(None, description="Why the pair cannot run (a missing file), if so")


class TargetList(BaseModel):
    targets: list[Target]


class JobStatus(BaseModel):
    job_id: str
    action: Literal["run", "verify"]
    target: str
    state: JobState = Field(description="running; done (exit 0); failed (another exit code); timeout (killed)")
    exit_code: int | None = Field(None, description="aisp bench's exit code (see its --help)")
    elapsed_s: float
    log_tail: str = Field(description="The last lines of the job's output")


class Speedup(BaseModel):
    value: float
    low: float
    high: float


class PairOutcome(BaseModel):
    target: str
    verdict: str = Field(description="ok, inconclusive, slower, verify-failed, error, timeout, skipped, ...")
    reason: str = ""
    speedup: Speedup | None = None
    best: str | None = Field(None, description="The optimized variant with the best interval")


class JobResult(BaseModel):
    status: JobStatus
    run_dir: str | None = Field(None, description="The run's artifact folder (for compare_runs)")
    pairs: list[PairOutcome] = Field(default_factory=list)


class VariantComparison(BaseModel):
    variant: str
    status: str
    a_ms: float | None = None
    b_ms: float | None = None


class PairComparison(BaseModel):
    target: str
    status: str = Field(description="faster, same, slower, ambiguous, added, removed, not-compared")
    variants: list[VariantComparison]


class RunComparison(BaseModel):
    run_a: str
    run_b: str
    environment_changes: list[Any]
    pairs: list[PairComparison]


class CaseOutcome(BaseModel):
    label: str = Field(description="Input shapes and dtype")
    verdict: Literal["ok", "verify-failed", "error"]
    check: str = Field(description="Which check fired: mismatch, cached-answer, precision, aliasing, nan, "
                                   "mutated-input, unjoined-stream, raised (empty when ok)")
    reason: str
    speedup: Speedup | None = None


class KernelCheck(BaseModel):
    verdict: Literal["ok", "verify-failed", "error", "timeout", "usage"]
    reason: str = Field("", description="Why, when the verdict is not ok")
    device: str | None = None
    speedup: Speedup | None = Field(None, description="Reference time / kernel time at the first case, 95% interval")
    cases: list[CaseOutcome] = Field(default_factory=list)


class NameTime(BaseModel):
    name: str
    count: int
    total_us: float
    pct: float


class ProfileSummary(BaseModel):
    path: str
    device: str
    window_us: float
    kernel_count: int
    kernel_us: float
    launch_count: int
    gpu_busy_fraction: float | None
    top_kernels: list[NameTime]
    top_cpu_ops: list[NameTime]
    findings: list[str]


class AuditFinding(BaseModel):
    check: str
    grade: str = Field(description="PASS, WARN, FAIL, UNKNOWN or SKIP")
    observed: str
    recommended: str
    fix: str
    hardware: bool


class HostAudit(BaseModel):
    exit_code: int = Field(description="0 no FAIL; 1 a FAIL; 3 a hardware fault")
    counts: dict[str, int]
    findings: list[AuditFinding]
