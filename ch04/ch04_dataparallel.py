"""Data-parallel training steps of the chapter's MLP: single-process ``nn.DataParallel``, gradients
all-reduced after backward, and DDP (bucketed all-reduce during backward).

Each step computes the gradients of the mean loss over the global batch; every rank holds the same
global batch and trains on its slice (rank r: rows r*B/W to (r+1)*B/W): the same gradients.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from ch04_common import TrainingStep, all_reduce_mean_, flat_grads
from torch import nn
from torch.nn.parallel import DistributedDataParallel

BUCKET_MB = 25
"""DDP's default bucket cap: gradients are all-reduced in ~25 MB groups as backward produces them."""


class AllReduceAfterBackward(TrainingStep):
    """Forward and backward on this rank's slice, then one all-reduce of the flattened gradients."""

    def run(self) -> torch.Tensor:
        self.model.zero_grad(set_to_none=True)
        part = self.local_slice()
        self.loss(self.model, self.x[part], self.y[part]).backward()
        grads = flat_grads(self.model)
        all_reduce_mean_(grads)
        return grads


def average_hook(group, bucket):  # no annotations: DDP inspects them, and this file's are strings
    """A DDP comm hook: the bucket (a ``dist.GradBucket``) averaged over ranks in one collective
    (``ReduceOp.AVG`` on NCCL; gloo lacks it and divides first); returns the Future DDP waits on."""
    buffer = bucket.buffer()
    if dist.get_backend(group) == "nccl":
        work = dist.all_reduce(buffer, op=dist.ReduceOp.AVG, group=group, async_op=True)
    else:
        work = dist.all_reduce(buffer.div_(dist.get_world_size(group)), group=group, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])


class DDPStep(TrainingStep):
    """The same step through DDP: autograd hooks all-reduce each bucket as soon as its gradients exist,
    while backward goes on computing earlier layers' gradients."""

    bucket_view = False
    """Gradients as views into DDP's buckets (no copy between them)."""
    average_in_nccl = False
    """Buckets all-reduced with ``ReduceOp.AVG`` (NCCL scales as it sums) instead of DDP's default
    hook, which first divides each bucket by the world size: one more pass over every gradient."""

    def prepare(self) -> None:
        self.ddp: nn.Module = self.model
        if self.world > 1:
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.ddp = DistributedDataParallel(self.model, device_ids=ids, bucket_cap_mb=BUCKET_MB,
                                               gradient_as_bucket_view=self.bucket_view)
            if self.average_in_nccl:
                self.ddp.register_comm_hook(None, average_hook)

    def step(self) -> torch.Tensor:
        """Gradients averaged over ranks into ``.grad``; returns this rank's loss (detached)."""
        self.ddp.zero_grad(set_to_none=True)
        part = self.local_slice()
        loss = self.loss(self.ddp, self.x[part], self.y[part])
        loss.backward()
        return loss.detach()

    def run(self) -> torch.Tensor:
        self.step()
        return flat_grads(self.model)


class HostLoss:
    """A gloo group beside the default one, for the loss a training loop reports to the host.

    ``nn.DataParallel``'s rank 0 also drives the other ranks' GPUs; a collective kernel that another
    rank left spinning there would contend with its work, so the loss crosses on the host (after a
    sync a loop that logs the loss pays anyway), in both variants of the pair.
    """

    def __init__(self, world: int) -> None:
        self.group = dist.new_group(backend="gloo") if world > 1 else None

    def broadcast(self, loss: torch.Tensor | None) -> torch.Tensor:
        """Rank 0's loss on every rank's host (``loss`` is None elsewhere)."""
        host = torch.zeros(()) if loss is None else loss.float().cpu()
        if self.group is not None:
            dist.broadcast(host, 0, group=self.group)
        return host

    def mean(self, loss: torch.Tensor) -> torch.Tensor:
        """The mean over ranks of each rank's loss, on every rank's host."""
        host = loss.float().cpu()
        if self.group is not None:
            dist.all_reduce(host, group=self.group)
            host /= dist.get_world_size()
        return host


class BF16Forward(nn.Module):
    """``module`` under bf16 autocast inside its own forward. ``nn.DataParallel``'s replica threads
    inherit autocast's on/off but not its dtype (thread-local, fp16 by default): autocast around the
    DataParallel call runs the replicas in fp16, whose range flushes this MLP's small gradients
    (measured on 2 x H200: 85% of the gradient elements off by more than 5%). Entering autocast in
    forward, inside the thread, keeps bf16."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            return self.module(x)


class DataParallelStep(TrainingStep):
    """Rank 0 runs the whole global batch through ``nn.DataParallel`` over all ranks' GPUs (each
    call: scatter the batch, replicate the model, one thread per GPU, gather the outputs to GPU 0,
    reduce the gradients to GPU 0); the other ranks wait for the loss. Returns (loss,) and, on rank 0
    where DataParallel keeps them, the gradients."""

    def prepare(self) -> None:
        if self.rank == 0:
            gpus = list(range(self.world)) if self.device.type == "cuda" else None
            inner = BF16Forward(self.model) if self.workload.autocast else self.model
            self.dp = nn.DataParallel(inner, device_ids=gpus)
        self.host = HostLoss(self.world)

    def run(self) -> tuple[torch.Tensor, ...]:
        if self.rank != 0:
            return (self.host.broadcast(None),)
        self.model.zero_grad(set_to_none=True)
        loss = self.loss(self.dp, self.x, self.y)
        loss.backward()
        return self.host.broadcast(loss.detach()), flat_grads(self.model)


class DDPReportingStep(DDPStep):
    """DDP, returning what DataParallelStep returns: the global loss, and the gradients on rank 0."""

    def prepare(self) -> None:
        super().prepare()
        self.host = HostLoss(self.world)

    def run(self) -> tuple[torch.Tensor, ...]:
        loss = self.host.mean(self.step())
        return (loss, flat_grads(self.model)) if self.rank == 0 else (loss,)


def bf16_layers(model: nn.Module) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each Linear's (weight, bias) cast to bf16, as bf16 autocast casts them for its GEMM."""
    return [(m.weight.to(torch.bfloat16), m.bias.to(torch.bfloat16)) for m in model.modules()
            if isinstance(m, nn.Linear)]


def forward_saved(layers: list[tuple[torch.Tensor, torch.Tensor]],
                  x: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor]:
    """The MLP's bf16 forward, as autocast runs it (``addmm`` with the bias, then exact GELU), keeping
    what backward needs: each layer's input and pre-activation, and the output."""
    h, inputs, pre = x.to(torch.bfloat16), [], []
    for w, b in layers:
        inputs.append(h)
        pre.append(nn.functional.linear(h, w, b))
        h = nn.functional.gelu(pre[-1])
    return inputs, pre, h


def backward_into(layers: list[tuple[torch.Tensor, torch.Tensor]], inputs: list[torch.Tensor],
                  pre: list[torch.Tensor], out: torch.Tensor, y: torch.Tensor,
                  grads: list[tuple[torch.Tensor, torch.Tensor]], on_layer) -> None:
    """The mean squared error's backward through the MLP, the ops autograd runs for the autocast step
    (mse_loss_backward, cast to bf16, gelu_backward, then per Linear the weight gradient as
    ``grad.t() @ input``, the bias's as ``grad.sum(0)``, the input's as ``grad @ weight``), last layer
    first. Layer l's bf16 (weight, bias) gradients are written into ``grads[l]``; ``on_layer(l)``
    runs after layer l (its input gradient issued too)."""
    one = torch.ones((), dtype=torch.float32, device=out.device)
    g = torch.ops.aten.mse_loss_backward(one, out.float(), y, 1).to(torch.bfloat16)  # 1: mean
    for i in reversed(range(len(layers))):
        g = torch.ops.aten.gelu_backward(g, pre[i])
        torch.mm(g.t(), inputs[i], out=grads[i][0])
        torch.sum(g, 0, out=grads[i][1])
        if i:
            g = torch.mm(g, layers[i][0])
        on_layer(i)
