"""``aisp mcp``: serve aisp's tools to an agent over MCP on stdio (needs the ``mcp`` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from aisp.mcp.policy import SandboxPolicy


def mcp(
    work_dir: Annotated[Path, typer.Option(help="Where jobs' artifacts and checked kernels go.")] = Path("artifacts/mcp"),
    check_timeout: Annotated[float, typer.Option(help="Seconds a check_kernel worker may run before it is "
                                                 "killed with its process group.")] = SandboxPolicy.timeout_s,
    device: Annotated[Literal["auto", "cpu", "cuda"], typer.Option(
        help="check_kernel's device: CUDA when present (auto), or forced.")] = SandboxPolicy.device,
    reference: Annotated[list[str] | None, typer.Option(help="MODULE:FUNCTION: check_kernel may only compare with "
                                                        "these (repeatable; default: any, or sent as source).")] = None,
) -> None:
    """Serve the tools (list_targets, start_job, job_status, job_result, compare_runs, check_kernel,
    summarize_profile, host_audit) over stdio. Exit 2 without the MCP SDK (pip install 'aisp[mcp]')."""
    try:
        from aisp.mcp.server import ServerConfig, serve
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "mcp":
            raise
        typer.secho("error: aisp mcp needs the MCP SDK: pip install 'aisp[mcp]'", err=True, fg="red")
        raise typer.Exit(2) from None
    policy = SandboxPolicy(timeout_s=check_timeout, device=device, references=tuple(reference or ()))
    serve(ServerConfig(work_dir, policy))
