"""What the ``ddp_training_e2e_multigpu`` stages share: the GPT, the two-rank workload, and the
training step every stage runs, with the switches the stages turn on one by one. Two AdamW steps
of the kit's GPT (169M parameters, 676 MB of fp32 gradients) on 8 sequences of 512 tokens. Every
rank holds the global batch; ``nn.DataParallel`` runs it all from rank 0, DDP gives rank r
sequences r*B/W to (r+1)*B/W. ``run()`` restores the parameters and zeroes AdamW's moments first.

Output, per rank: both steps' global mean losses (on the host); on rank 0 each parameter's gradient
RMS and all 169M averaged gradients of the last step (in units of their parameter's RMS), on other
ranks 4,096 of those from *their own* replica, so verification shows each rank holds rank 0's
gradients (``nn.DataParallel``'s rank 1 gets them from rank 0 on the host).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from ch20_gpt import PEAK_BF16_DENSE, TrainWorkload, train_workload
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import aisp
from aisp.kits.gpt import GPT, GPTConfig, init_weights_, token_batches
from aisp.kits.multirank import world_and_rank

MODEL = GPTConfig(vocab=32768, seq=512, dim=1024, heads=16, layers=8)
TWO_GPUS = aisp.Requirements(cuda=True, ranks=2)  # the logic also runs on 2 gloo CPU ranks (the tests)
DIGEST = 4096  # gradient values at fixed positions that ranks other than 0 return


def ddp_workload(requires: aisp.Requirements = TWO_GPUS, **kw: object) -> TrainWorkload:
    """Two AdamW steps of 8 x 512 tokens (~6.8 TFLOP); the tolerance is the baseline header's."""
    return train_workload(precision="bf16", element_tol=2**-5, rtol=0.05, max_rel_l2=0.05, requires=requires,
                          timeout_s=600, **{"model": MODEL, "batch": 8, "steps": 2, **kw})


def digest_positions(total: int, device: torch.device) -> torch.Tensor:
    """DIGEST positions evenly over 0..total-1 in int64 (a float32 linspace over 169M overshoots)."""
    return (torch.arange(DIGEST, device=device) * (total - 1) // (DIGEST - 1)).unique()


class LossOf(nn.Module):
    """The GPT returning only its loss, shaped (1,): DataParallel gathers a value, not logits."""

    def __init__(self, gpt: GPT) -> None:
        super().__init__()
        self.gpt = gpt

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return self.gpt(idx, targets)[1].reshape(1)


class DataParallelTraining(aisp.Benchmark):
    """The baseline: rank 0 trains through ``nn.DataParallel`` over every rank's GPU; other ranks wait."""

    workload: TrainWorkload
    inputs = ("idx", "targets")
    scratch = ("model", "net", "params", "states")
    dataparallel = True
    autocast = False  # bf16 autocast around forward and loss (fp32 weights, gradients and AdamW)
    bucket_view = False  # DDP's gradient_as_bucket_view + static_graph: gradients live in the buckets
    fused_adamw = False  # AdamW(fused=True): one kernel for the update (else the default, foreach)

    def setup(self) -> None:
        w = self.workload
        self.world, self.rank = world_and_rank()
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        gen = torch.Generator(device=self.device).manual_seed(self.seed * 7919 + 1)  # alike on every rank
        with self.device:
            self.model = init_weights_(GPT(w.model), gen)
        self.idx, self.targets = token_batches(w.model, (w.steps, w.batch, w.model.seq), gen, self.device)
        self.params = list(self.model.parameters())
        self.start = [p.detach().clone() for p in self.params]
        self.sizes = torch.tensor([p.numel() for p in self.params], device=self.device).float().sqrt()
        self.picks = digest_positions(sum(p.numel() for p in self.params), self.device)
        self.driver = self.rank == 0 or not self.dataparallel  # who runs forward, backward and AdamW
        self.net = LossOf(self.model) if self.driver else None
        if self.dataparallel and self.driver:
            self.net = nn.DataParallel(self.net, device_ids=list(range(self.world)) if self.device.type == "cuda" else None)
        elif not self.dataparallel and self.world > 1:
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.net = DistributedDataParallel(self.net, device_ids=ids, gradient_as_bucket_view=self.bucket_view,
                                               static_graph=self.bucket_view)
        self.host = dist.new_group(backend="gloo") if self.world > 1 else None
        self.opt = torch.optim.AdamW(self.params, lr=w.lr, weight_decay=0.1, **({"fused": True} if self.fused_adamw else {}))
        self.events: list[list[torch.cuda.Event]] = []
        self.run()  # AdamW's state exists from here on (run() zeroes it)
        self.states = [t for st in self.opt.state.values() for t in st.values()]

    def run(self) -> tuple[torch.Tensor, ...]:
        steps, cuda = self.workload.steps, self.device.type == "cuda"
        if not self.driver:  # DataParallel's other ranks: rank 0's figures, on the host
            report = torch.zeros(steps + len(self.picks))
            dist.broadcast(report, 0, group=self.host)
            return report[:steps], report[steps:]
        if cuda:  # events around the GPU work, for the MFU
            self.events = [*self.events[-63:], [torch.cuda.Event(enable_timing=True) for _ in range(2)]]
            self.events[-1][0].record()
        with torch.no_grad():
            torch._foreach_copy_(self.params, self.start)
            if self.opt.state:  # (none before the first step)
                torch._foreach_zero_([t for st in self.opt.state.values() for t in st.values()])
        per = self.workload.batch // self.world
        part = slice(None) if self.dataparallel else slice(self.rank * per, (self.rank + 1) * per)
        losses = []
        for s in range(steps):
            self.opt.zero_grad(set_to_none=True)
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
                loss = self.net(self.idx[s, part], self.targets[s, part]).mean()
            loss.backward()
            self.opt.step()
            losses.append(loss.detach().float())
        grads = [p.grad for p in self.params]
        rms = torch.stack(torch._foreach_norm(grads)) / self.sizes
        flat = torch.cat([g.reshape(-1) for g in torch._foreach_div(grads, list(rms.clamp_min(1e-30).unbind()))])
        if cuda:
            self.events[-1][1].record()
        report = torch.cat([torch.stack(losses), flat[self.picks]]).cpu()
        if self.host is not None and self.dataparallel:
            dist.broadcast(report, 0, group=self.host)
        elif self.host is not None:  # each DDP rank's loss is its own slice's: the mean over ranks
            dist.all_reduce(means := report[:steps].clone(), group=self.host)
            report[:steps] = means / self.world
        return (report[:steps], rms, flat) if self.rank == 0 else (report[:steps], report[steps:])

    def metrics(self) -> dict[str, float]:
        """MFU: FLOPs over this rank's median call time, as a share of every GPU's dense bf16 peak."""
        if not self.events:
            return {}
        torch.cuda.synchronize(self.device)
        ms = sorted(a.elapsed_time(b) for a, b in self.events)[len(self.events) // 2]
        return {"mfu": self.workload.flops / (ms / 1e3) / (PEAK_BF16_DENSE * self.world)}


class DDPTraining(DataParallelTraining):
    """One process per GPU, each on its slice; DDP all-reduces 25 MB buckets during backward."""

    dataparallel = False
