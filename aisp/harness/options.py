"""A run's options: one frozen dataclass, the only place their defaults are defined."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from aisp.harness.scheduler import parse_gpus, parse_shard

ProfileLevel = Literal["none", "minimal", "full"]
Device = Literal["auto", "cpu", "cuda"]
Timing = Literal["per-call", "sustained", "graph"]
PROFILE_LEVELS: tuple[str, ...] = get_args(ProfileLevel)
DEVICES: tuple[str, ...] = get_args(Device)
TIMINGS: tuple[str, ...] = get_args(Timing)


@dataclass(frozen=True)
class RunOptions:
    """How to run pairs."""

    iterations: int = 20
    """Timed iterations per variant."""
    warmup: int = 5
    """Untimed iterations per variant before timing (at least; see warmup_s)."""
    warmup_s: float = 0.5
    """And warm up for this many seconds: an H100 running a large GEMM from idle stays at boost ~50 ms
    until its power cap pulls the clock down; per-call times settle within 0.5% after 0.5 s."""
    timing: Timing = "per-call"
    """per-call: a device-wide sync around each call; sustained: calls back to back, one sync a sample;
    graph (CUDA): run() captured once into a CUDA graph after warmup, one replay a sample, synced like
    per-call (a pair that cannot be captured is timed per call, with a note)."""
    seed: int = 0
    """Seed of the main pass; verification repeats on a seed drawn at random for each run."""
    device: Device = "auto"
    """Where to run: CUDA when present (auto), or forced."""
    timeout_multiplier: float = 1.0
    """Scales each workload's timeout_s."""
    suite_timeout: float | None = None
    """Seconds for the whole suite; pairs not started by then are recorded as timeouts."""
    reproducible: bool = False
    """Fixed seeds and deterministic algorithms; a nondeterministic op fails its pair."""
    cold_start: bool = False
    """Each variant timed in a fresh process (no interleaving; GC and allocator reset)."""
    cold_runs: int = 3
    """With cold_start: fresh processes per variant; the interval includes their spread."""
    flush_l2: bool = False
    """Evict the GPU's L2 before each timed iteration (outside the timed window)."""
    profile: ProfileLevel = "none"
    """none, minimal (torch.profiler trace) or full (plus Nsight where present)."""
    verify_only: bool = False
    """Import and verify, no timing."""
    update_expectations: bool = False
    """Rewrite chNN/expectations_<key>.json with this run's measurements."""
    artifacts_dir: Path = field(default=Path("artifacts"))
    """Where run folders are created."""
    gpus: str = "1"
    """GPUs of this node used together: all, a count (4) or ordinals (0,2,3); 1: one pair at a time."""
    shard: str | None = None
    """I/N: run only this machine's part of the selected pairs (a cluster job's task; merged after)."""
    reuse_workers: bool = False
    """Run each GPU's pairs one after another in one long-lived worker (state put back between pairs;
    multi-rank pairs, --cold-start's runs and re-runs still get fresh processes) instead of a fresh
    process per pair: saves the process start and imports of every pair but the first."""
    fork_workers: bool = False
    """Fork each pair's fresh worker from one process that has imported Python's, torch's and the
    harness's modules (aisp.harness.zygote) instead of starting Python anew: the same isolation (a
    new process per pair, CUDA first initialized in it) without each pair's start."""
    confirm_runs: int = 2
    """A pair flagged regressed is re-run at once this many times in fresh processes, and stays
    regressed only if the mean of the re-runs is worse too (aisp.judge.regression.confirm); 0: no re-run."""
    host_peaks: bool = False
    """Measure this host's memory, page-cache, first-touch and dispatch rates (~10 s) and its launch and
    sync floors on the run's first GPU (a subprocess; else the cached ones) before the pairs run, and price
    the host links and those counts at them, not at the cached peaks of another host with the same GPUs;
    kept in the run folder (host_peaks.json), which a resumed run reuses."""

    def __post_init__(self) -> None:
        if self.iterations < 2:
            raise ValueError("--iterations must be at least 2 (a spread needs two samples)")
        if self.warmup < 0 or self.warmup_s < 0:
            raise ValueError("--warmup and --warmup-s must be 0 or more")
        if self.confirm_runs < 0:
            raise ValueError("--confirm-runs must be 0 or more")
        if self.cold_runs < 1:
            raise ValueError("--cold-runs must be at least 1")
        if self.timeout_multiplier <= 0:
            raise ValueError("--timeout-multiplier must be positive")
        for flag, value, allowed in (("--timing", self.timing, TIMINGS), ("--device", self.device, DEVICES),
                                     ("--profile", self.profile, PROFILE_LEVELS)):
            if value not in allowed:
                raise ValueError(f"{flag} must be one of {', '.join(allowed)}, not '{value}'")
        if self.suite_timeout is not None and self.suite_timeout <= 0:
            raise ValueError(f"--suite-timeout must be positive, not {self.suite_timeout:g}")
        parse_gpus(self.gpus)
        if self.shard is not None:
            parse_shard(self.shard)
        if not (existing := next(p for p in (self.artifacts_dir, *self.artifacts_dir.parents) if p.exists())).is_dir():
            raise ValueError(f"--artifacts-dir {self.artifacts_dir}: {existing} is a file, not a folder")

    def to_dict(self) -> dict[str, Any]:
        return {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunOptions:
        data = dict(data)
        data["artifacts_dir"] = Path(data.get("artifacts_dir", "artifacts"))
        return cls(**data)
