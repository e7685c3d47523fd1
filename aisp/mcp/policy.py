"""How the server's ``check_kernel`` judges: set by the server's command line, never by a tool call
(and free of the SDK's imports, so ``aisp mcp --help`` works without it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SandboxPolicy:
    """The server's fixed check settings (its command line may change them; a tool call cannot)."""

    timeout_s: float = 300.0
    """The worker's limit, then it is killed with its process group."""
    random: int = 3
    """Random cases per shape spec."""
    iterations: int = 20
    warmup: int = 5
    device: str = "auto"
    references: tuple[str, ...] = ()
    """When set, the only references a call may name (MODULE:FUNCTION), and none may be sent as
    source: the agent under judgement then cannot pick what it is compared with."""
