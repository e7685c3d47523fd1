"""What chapter 4's multi-rank pairs share: the world they run in, seeded tensors every rank builds
alike, a small MLP, and a data-parallel training step's accounting.

Every pair here runs as one rank per GPU (NCCL) and, for the tests, as gloo ranks on a CPU; without
a process group the code runs as a world of one rank. Tensors built from ``shared(...)`` are equal
on every rank (weights, the global batch); ``own(...)`` differs per rank (a rank's local gradients).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

import aisp
from aisp.kits.multirank import world_and_rank

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
TWO_RANKS = aisp.Requirements(cuda=True, ranks=2)
"""On GPUs: two ranks, one GPU each. The logic also runs on gloo; tests/test_ch04_pairs.py runs it there
at small sizes (at these sizes a CPU would take minutes per pair, so a CPU run skips them)."""


def shared(bench: aisp.Benchmark, salt: int = 0) -> torch.Generator:
    """A generator seeded alike on every rank (weights, the global batch)."""
    gen = torch.Generator(device=bench.device)
    gen.manual_seed(bench.seed * 7919 + salt)
    return gen


def own(bench: aisp.Benchmark) -> torch.Generator:
    """A generator seeded per rank (what differs between ranks, e.g. local gradients)."""
    gen = torch.Generator(device=bench.device)
    gen.manual_seed(bench.seed * 1009 + world_and_rank()[1] + 1)
    return gen


def rank_device(bench: aisp.Benchmark) -> torch.device:
    """This rank's device with its index (``cuda:LOCAL_RANK`` after the harness's init)."""
    if bench.device.type == "cuda" and bench.device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return bench.device


def mlp(width: int, layers: int, gen: torch.Generator, device: torch.device,
        dtype: torch.dtype = torch.float32) -> nn.Sequential:
    """``layers`` x (Linear(width, width) + GELU), weights drawn from ``gen`` (alike on every rank)."""
    blocks: list[nn.Module] = []
    for _ in range(layers):
        lin = nn.Linear(width, width, device=device, dtype=dtype)
        with torch.no_grad():
            lin.weight.copy_(torch.randn(width, width, generator=gen, device=device) / width**0.5)
            lin.bias.copy_(torch.randn(width, generator=gen, device=device) * 0.1)
        blocks += [lin, nn.GELU()]
    return nn.Sequential(*blocks)


def flat_grads(module: nn.Module) -> torch.Tensor:
    """Every parameter's gradient, concatenated (a fresh tensor)."""
    return torch.cat([p.grad.reshape(-1) for p in module.parameters()])


def all_reduce_mean_(t: torch.Tensor, async_op: bool = False) -> dist.Work | None:
    """Average ``t`` over ranks in place (``ReduceOp.AVG``: NCCL scales while it sums); nothing to do
    in a world of one. With ``async_op`` returns the work to wait on."""
    if world_and_rank()[0] == 1:
        return None
    return dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=async_op)


def gather_into(full: torch.Tensor, part: torch.Tensor, async_op: bool = False,
                group: dist.ProcessGroup | None = None) -> dist.Work | None:
    """Every rank's ``part``, in rank order, into ``full`` (a copy in a world of one)."""
    if world_and_rank()[0] == 1:
        full.copy_(part)
        return None
    return dist.all_gather_into_tensor(full, part, async_op=async_op, group=group)


def scatter_reduced(out: torch.Tensor, full: torch.Tensor, op: dist.ReduceOp = dist.ReduceOp.SUM,
                    async_op: bool = False, group: dist.ProcessGroup | None = None) -> dist.Work | None:
    """This rank's 1/world slice of ``full`` reduced over ranks (a copy in a world of one)."""
    if world_and_rank()[0] == 1:
        out.copy_(full)
        return None
    return dist.reduce_scatter_tensor(out, full, op=op, async_op=async_op, group=group)


def wait(work: dist.Work | None) -> None:
    """Wait for an async collective (on NCCL: the current stream waits, not the host)."""
    if work is not None:
        work.wait()


@dataclass(frozen=True, kw_only=True)
class StepWorkload(aisp.Workload):
    """One data-parallel training step of an MLP: forward, loss, backward, gradients averaged."""

    batch: int = 8192
    """Samples in the global batch; each of ``world`` ranks takes batch / world of them."""
    width: int = 2048
    layers: int = 8
    world: int = 2
    autocast: bool = True
    """bf16 autocast for the GEMMs (fp32 weights and gradients), as mixed-precision training does."""


def step_workload(requires: aisp.Requirements = TWO_RANKS, **kw: object) -> StepWorkload:
    """A step's accounting over the global batch, i.e. summed over the ranks (held to world x one GPU's
    peak), samples as items: per weight per sample forward 2 FLOPs and the weight gradient 2, and the
    input gradient 2 for every layer but the first (the batch x needs none): 2 x batch x width^2 x
    (3 x layers - 1), 46 of the 48 FLOPs per weight a 6-per-weight count would give at 8 layers."""
    w = StepWorkload(**kw)
    return StepWorkload(**kw, flops=2.0 * w.batch * w.width**2 * (3 * w.layers - 1), items=w.batch,
                        item_unit="samples", precision="bf16" if w.autocast else "fp32",
                        requires=requires, timeout_s=300)


class TrainingStep(aisp.Benchmark):
    """The global batch (``x``, ``y``) on every rank, as a sampler sees it; a rank trains on its slice."""

    workload: StepWorkload
    inputs = ("x", "y")

    def setup(self) -> None:
        w, gen = self.workload, shared(self)
        self.world, self.rank = world_and_rank()
        self.device = rank_device(self)
        self.x = torch.randn(w.batch, w.width, generator=gen, device=self.device)
        self.y = torch.randn(w.batch, w.width, generator=gen, device=self.device)
        self.model = mlp(w.width, w.layers, gen, self.device)
        self.prepare()

    def prepare(self) -> None:
        """Untimed hook after the model exists (wrappers, buffers)."""

    def local_slice(self) -> slice:
        per = self.workload.batch // self.world
        return slice(self.rank * per, (self.rank + 1) * per)

    def loss(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Mean squared error of ``model(x)`` against ``y`` (autocast per the workload)."""
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.workload.autocast):
            out = model(x)
        return nn.functional.mse_loss(out.float(), y)
