"""What torch.compile did to a model: graphs, graph breaks, recompiles, guard failures, kernels.

    python ch14/compile_report.py                  # the demo model, on CUDA when present
    python ch14/compile_report.py --device cpu     # the same on a CPU (Inductor writes C++)

``report(model, calls)`` works on any model: ``calls`` is a list of argument tuples, one per
call. The first call is traced by ``torch._dynamo.explain`` (graphs, breaks with their reasons,
ops per graph); then the model is compiled afresh and called with every tuple, and the report
counts recompiles (with the guard that failed, from ``torch._dynamo.utils.guard_failures``),
kernels Inductor generated (``torch._inductor.metrics``) and the kernel names of the first
call's generated code. The demo model has a deliberate graph break (``.item()`` feeding a
Python ``if``) and is called with two sequence lengths, so it recompiles once.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from typing import Any

import torch
import torch._dynamo.utils as dynamo_utils
from torch import nn
from torch._inductor import metrics
from torch._inductor.utils import run_and_get_code

KERNEL_NAME = re.compile(r"\b(?:triton_(?:poi|red|per|tem|for)_|cpp_)fused\w*")


@dataclass(frozen=True)
class CompileReport:
    graphs: int
    graph_breaks: int
    break_reasons: tuple[str, ...]
    ops_per_graph: tuple[int, ...]
    recompiles: int
    guard_failures: tuple[str, ...]
    kernels_generated: int
    kernel_names: tuple[str, ...]
    """Kernels in the code generated for the first call, in order of first appearance."""

    def rows(self) -> list[tuple[str, str]]:
        rows = [("graphs", str(self.graphs)), ("graph breaks", str(self.graph_breaks))]
        rows += [(f"  break {i + 1}", r) for i, r in enumerate(self.break_reasons)]
        rows += [("ops per graph", ", ".join(map(str, self.ops_per_graph))), ("recompiles", str(self.recompiles))]
        rows += [(f"  guard failure {i + 1}", g) for i, g in enumerate(self.guard_failures)]
        rows += [("kernels generated (all compiles)", str(self.kernels_generated))]
        return rows + [(f"  kernel {i + 1}", k) for i, k in enumerate(self.kernel_names)]

    def table(self) -> str:
        width = max(len(k) for k, _ in self.rows())
        lines = [f"| {'what':<{width}} | value |", f"|{'-' * (width + 2)}|-------|"]
        return "\n".join(lines + [f"| {k:<{width}} | {v} |" for k, v in self.rows()])


def _first_line(text: str) -> str:
    return " ".join(text.strip().splitlines()[0].split()) if text.strip() else ""


def explain(model: nn.Module, args: tuple[Any, ...]) -> tuple[int, int, tuple[str, ...], tuple[int, ...]]:
    """(graphs, graph breaks, break reasons, ops per graph) of one traced call."""
    torch._dynamo.reset()
    out = torch._dynamo.explain(model)(*args)
    reasons = tuple(_first_line(r.reason) for r in out.break_reasons)
    return out.graph_count, out.graph_break_count, reasons, tuple(len(ops) for ops in out.ops_per_graph)


def compile_and_call(model: nn.Module, calls: list[tuple[Any, ...]]) -> tuple[int, tuple[str, ...], int, tuple[str, ...]]:
    """(recompiles, guard failures, kernels generated, kernel names of the first call)."""
    torch._dynamo.reset()
    dynamo_utils.guard_failures.clear()
    metrics.reset()
    compiled = torch.compile(model, dynamic=False)
    _, code = run_and_get_code(compiled, *calls[0])
    for args in calls[1:]:
        compiled(*args)
    failures = tuple(f for fails in dynamo_utils.guard_failures.values() for f in map(str, fails))
    names = tuple(dict.fromkeys(KERNEL_NAME.findall("\n".join(code))))
    return len(failures), failures, metrics.generated_kernel_count, names


@torch.no_grad()
def report(model: nn.Module, calls: list[tuple[Any, ...]]) -> CompileReport:
    return CompileReport(*explain(model, calls[0]), *compile_and_call(model, calls))


class DemoModel(nn.Module):
    """A small MLP with a data-dependent branch: ``.item()`` ends the graph."""

    def __init__(self, dim: int = 64) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.nn.functional.gelu(self.fc1(x))
        if h.mean().item() > 0:  # deliberate graph break: Python needs the value
            h = h * 2
        return self.fc2(h).relu()


def demo_calls(device: torch.device, dim: int = 64) -> list[tuple[torch.Tensor]]:
    """Two sequence lengths: the second one fails the first graph's size guard (a recompile)."""
    gen = torch.Generator(device=device).manual_seed(0)
    return [(torch.randn(n, dim, generator=gen, device=device),) for n in (32, 48)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu", help="where the demo model runs (default: cuda when present)")
    device = torch.device(parser.parse_args(argv).device)
    print(report(DemoModel().to(device), demo_calls(device)).table())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
