"""Pipeline parallelism: one stage of ``layers_per_stage`` x (Linear + GELU) per rank, ``micro_batches``
micro-batches per step, activations sent forward and gradients back between neighbouring ranks
(a send and the receive it must not wait behind go in one ``batch_isend_irecv``). The last stage's
loss is the mean square of its output, averaged over micro-batches. Two schedules, one gradient:

- GPipe: all forwards, then all backwards; each stage holds every micro-batch's activations.
- 1F1B (non-interleaved, as Megatron-LM runs it): stage s runs p - s - 1 forwards, then alternates
  one forward and one backward, then drains; it holds at most p - s micro-batches' activations.

Both leave the same idle time: the bubble, (p - 1) / (m + p - 1) of the step. 1F1B's gain is
memory; interleaved stages (not shown) would shrink the bubble itself.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import torch
import torch.distributed as dist
from ch04_common import DTYPES, TWO_RANKS, mlp, rank_device, shared

import aisp
from aisp.kits.multirank import world_and_rank


@dataclass(frozen=True, kw_only=True)
class PipelineWorkload(aisp.Workload):
    width: int = 4096
    layers_per_stage: int = 4
    micro_batches: int = 8
    micro_batch: int = 512
    dtype: str = "bf16"


def pp_workload(requires: aisp.Requirements = TWO_RANKS, **kw: object) -> PipelineWorkload:
    """FLOPs summed over the ranks: forward and backward of every stage (one a rank) over every
    micro-batch, held to world x one GPU's peak, so the bubble shows: per weight per sample forward 2,
    weight gradient 2 and input gradient 2, less the first stage's first layer's input gradient (the
    batch x needs none): 2 x samples x width^2 x (3 x layers - 1) over all the stages' layers.
    Memory headline, its capacity floor per rank (:func:`stage_resident_bytes`)."""
    w = PipelineWorkload(**kw)
    samples, layers = w.micro_batches * w.micro_batch, requires.world_size * w.layers_per_stage
    return PipelineWorkload(**kw, flops=2.0 * samples * w.width**2 * (3 * layers - 1), items=samples,
                            item_unit="samples", precision=w.dtype, headline="memory", requires=requires,
                            resident_bytes=stage_resident_bytes(w), timeout_s=240)
    # Judged by capacity only on runs whose peaks count the gradients an earlier call left and this one
    # frees first (peak_method, since 2026-11-29): before, the stored peak read 97% where ~65% is right.


def stage_resident_bytes(w: PipelineWorkload) -> float:
    """The least bytes one rank must hold at once, per rank as the run stores peak bytes (the largest
    rank's): its stage's weights and their gradients (the step's output), which coexist from the last
    backward to the end of the step. Activations are not counted (recompute or a schedule of one
    micro-batch in flight could shrink them), nor the batch ``x`` (a design could stream micro-batches
    in). Every stage is the same size, so the busiest rank's floor is any stage's."""
    stage_params = w.layers_per_stage * (w.width * w.width + w.width)
    return 2.0 * stage_params * DTYPES[w.dtype].itemsize


def bubble(stages: int, micro_batches: int) -> float:
    """Share of a step each stage idles in GPipe and non-interleaved 1F1B."""
    return (stages - 1) / (micro_batches + stages - 1)


class PipelineStage(aisp.Benchmark):
    """This rank's stage; ``x`` is the step's batch (every rank holds it, the first stage reads it).
    Returns this stage's parameter gradients."""

    workload: PipelineWorkload
    inputs = ("x",)

    def setup(self) -> None:
        w, dtype = self.workload, DTYPES[self.workload.dtype]
        self.device = rank_device(self)
        self.world, self.rank = world_and_rank()
        gen = shared(self)
        self.stage = [mlp(w.width, w.layers_per_stage, gen, self.device, dtype) for _ in range(self.world)][self.rank]
        self.x = torch.randn(w.micro_batches * w.micro_batch, w.width, generator=gen, device=self.device).to(dtype)
        self.first, self.last = self.rank == 0, self.rank == self.world - 1

    def metrics(self) -> dict[str, float]:
        return {"bubble_fraction": bubble(self.world, self.workload.micro_batches)}

    def exchange(self, send: torch.Tensor | None, peer: int, receive: bool) -> torch.Tensor | None:
        """Send ``send`` to ``peer`` and/or receive one micro-batch's tensor from it, in one batch."""
        w = self.workload
        got = torch.empty(w.micro_batch, w.width, device=self.device, dtype=self.x.dtype) if receive else None
        ops = [dist.P2POp(dist.isend, send, peer)] if send is not None else []
        ops += [dist.P2POp(dist.irecv, got, peer)] if got is not None else []
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        return got

    def next_input(self, send_grad: torch.Tensor | None = None) -> torch.Tensor:
        """The next micro-batch's input: a slice of ``x`` on the first stage, else received from the
        previous stage (with ``send_grad`` going back to it in the same batch)."""
        if self.first:
            i, self.fed = self.fed, self.fed + 1
            return self.x[i * self.workload.micro_batch:(i + 1) * self.workload.micro_batch]
        return self.exchange(send_grad, self.rank - 1, True).requires_grad_()

    def send_back(self, grad: torch.Tensor | None) -> None:
        """The gradient of a micro-batch's input back to the previous stage."""
        if not self.first:
            self.exchange(grad, self.rank - 1, False)

    def forward(self, inp: torch.Tensor, get_grad: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Run the stage on ``inp`` and send the output on; returns the output (with its graph, for the
        backward) and, with ``get_grad``, the next stage's gradient for the oldest micro-batch still
        held, received in the same batch as this send."""
        out = self.stage(inp)
        incoming = None
        if not self.last:
            incoming = self.exchange(out.detach(), self.rank + 1, get_grad)
        return out, incoming

    def backward(self, inp: torch.Tensor, out: torch.Tensor, grad: torch.Tensor | None) -> torch.Tensor | None:
        """Backward of one micro-batch; returns the gradient of its input (None on the first stage)."""
        if self.last:
            (out.float().pow(2).mean() / self.workload.micro_batches).backward()
        else:
            out.backward(grad)
        return None if self.first else inp.grad

    def begin(self) -> None:
        self.stage.zero_grad(set_to_none=True)
        self.fed = 0


class GPipe(PipelineStage):
    def run(self) -> list[torch.Tensor]:
        self.begin()
        held = []
        for _ in range(self.workload.micro_batches):
            inp = self.next_input()
            held.append((inp, self.forward(inp, False)[0]))
        for inp, out in held:
            grad = None if self.last else self.exchange(None, self.rank + 1, True)
            self.send_back(self.backward(inp, out, grad))
        return [p.grad for p in self.stage.parameters()]


class OneFOneB(PipelineStage):
    def run(self) -> list[torch.Tensor]:
        self.begin()
        m = self.workload.micro_batches
        warmup = min(self.world - self.rank - 1, m)
        held: deque[tuple[torch.Tensor, torch.Tensor]] = deque()
        for _ in range(warmup):
            inp = self.next_input()
            held.append((inp, self.forward(inp, False)[0]))
        inp = self.next_input() if m > warmup else None
        for i in range(m - warmup):
            out, incoming = self.forward(inp, True)
            held.append((inp, out))
            grad = self.backward(*held.popleft(), incoming)
            if i == m - warmup - 1:
                self.send_back(grad)
            else:
                inp = self.next_input(grad)
        for _ in range(warmup):
            grad = self.exchange(None, self.rank + 1, True)
            self.send_back(self.backward(*held.popleft(), grad))
        return [p.grad for p in self.stage.parameters()]
