"""Compiled autograd, a runnable tutorial: capturing the whole backward pass despite graph breaks.

``torch.compile`` captures the forward with Dynamo. A graph break (here: one after every block,
standing for the logging, ``.item()`` or library calls training code often has) splits the forward into
several graphs, and AOTAutograd then builds one backward graph per forward piece; the autograd
engine runs those pieces, plus any tensor hooks, eagerly in between. With
``torch._dynamo.config.compiled_autograd = True`` (in effect when ``torch.compile`` wraps the
function: the wrapper keeps the config it was created under) the engine itself is traced when
``backward()`` runs: the whole backward, hooks included (here a gradient-scaling hook on the LM
head), becomes one graph that the backend compiles, whatever the forward's breaks were.

The script trains the same small GPT three ways from the same weights: eager, compiled, and
compiled with compiled autograd. It prints the graphs each way produced, checks that the
gradients match eager's, and times a step. Expect: several forward graphs with compile (one
more per break), 0 compiled-autograd captures without it and one per ``backward()`` call with it
(the engine's graph is traced on each call and its compiled code reused from a cache), and
gradients equal to eager's to fp32 rounding.

Run: python ch13/compiled_autograd.py  [--backend inductor|aot_eager] [--steps 10]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch._dynamo.utils import counters

from aisp.kits.gpt import GPT, GPTConfig, init_weights_, token_batches


class BrokenBlock(nn.Module):
    """Wraps a block and breaks the graph after it, as logging, ``.item()`` or an untraceable
    library call would (a no-op in eager mode)."""

    def __init__(self, block: nn.Module) -> None:
        super().__init__()
        self.block = block

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        torch._dynamo.graph_break()
        return y


@dataclass(frozen=True)
class Outcome:
    grads: list[torch.Tensor]
    step_ms: float
    forward_graphs: int
    backward_captures: int


def build(cfg: GPTConfig, device: torch.device, seed: int) -> GPT:
    gen = torch.Generator(device=device).manual_seed(seed)
    model = init_weights_(GPT(cfg).to(device), gen)
    model.blocks = nn.ModuleList(BrokenBlock(b) for b in model.blocks)
    model.head.weight.register_hook(lambda g: g * 0.5)
    return model


def train_step(model: GPT, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Forward, loss, backward: the function that is compiled."""
    _, loss = model(idx, targets)
    loss.backward()
    return loss.detach()


def measure(step: Callable, model: GPT, batch: tuple[torch.Tensor, torch.Tensor], steps: int) -> Outcome:
    counters.clear()
    model.zero_grad(set_to_none=True)
    step(model, *batch)
    grads = [p.grad.detach().clone() for p in model.parameters()]
    sync = torch.cuda.synchronize if batch[0].is_cuda else (lambda: None)
    sync()
    start = time.perf_counter()
    for _ in range(steps):
        model.zero_grad(set_to_none=True)
        step(model, *batch)
    sync()
    ms = (time.perf_counter() - start) * 1e3 / steps
    return Outcome(grads, ms, counters["stats"]["unique_graphs"], counters["compiled_autograd"]["captures"])


def max_error(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    return max(float((x - y).abs().max()) for x, y in zip(a, b, strict=True))


def tutorial(cfg: GPTConfig, batch: int, device: torch.device, backend: str,
             steps: int) -> dict[str, Outcome]:
    data = token_batches(cfg, (batch, cfg.seq), torch.Generator(device=device).manual_seed(1), device)
    results = {}
    for mode in ("eager", "compile", "compile+compiled_autograd"):
        torch._dynamo.reset()
        model = build(cfg, device, seed=0)
        with torch._dynamo.config.patch(compiled_autograd=mode.endswith("autograd")):
            step = train_step if mode == "eager" else torch.compile(train_step, backend=backend)
            results[mode] = measure(step, model, data, steps)
    return results


def report(results: dict[str, Outcome], atol: float) -> bool:
    eager = results["eager"]
    ok = True
    print(f"{'mode':<27} {'fwd graphs':>10} {'bwd captures':>13} {'step ms':>8} {'max |grad err|':>15}")
    for mode, r in results.items():
        err = max_error(eager.grads, r.grads)
        ok &= err <= atol
        print(f"{mode:<27} {r.forward_graphs:>10} {r.backward_captures:>13} {r.step_ms:>8.2f} {err:>15.2e}")
    print("gradients match eager" if ok else f"GRADIENTS DIFFER from eager by more than {atol:g}")
    return ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="inductor", help="torch.compile backend (aot_eager: no codegen)")
    p.add_argument("--steps", type=int, default=10, help="training steps per mode")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto", help="auto (CUDA when present), cpu or cuda")
    p.add_argument("--dim", type=int, default=256, help="hidden size of the MLP")
    p.add_argument("--layers", type=int, default=3, help="linear layers of the MLP")
    a = p.parse_args(argv)
    cuda = a.device == "cuda" or (a.device == "auto" and torch.cuda.is_available())
    device = torch.device("cuda" if cuda else "cpu")
    cfg = GPTConfig(vocab=1024, seq=128, dim=a.dim, heads=4, layers=a.layers)
    results = tutorial(cfg, 8, device, a.backend, a.steps)
    return 0 if report(results, atol=1e-5) else 1


if __name__ == "__main__":
    sys.exit(main())
