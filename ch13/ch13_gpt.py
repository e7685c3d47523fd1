"""The training-step benchmark that chapter 13's training pairs share, on the kit's small GPT
(:mod:`aisp.kits.gpt`). Weights are drawn from the benchmark's seeded generator, so baseline and
optimized variants start from the same parameters.

``TrainBench.run()`` first restores the parameters from the snapshot taken in ``setup()`` and
then takes ``steps`` SGD steps, so every call does the same work from the same start: outputs
(per-step losses and the last step's logits) are comparable across variants and survive the
harness poisoning the model between iterations.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch

import aisp
from aisp.kits.gpt import GPT, GPTConfig, init_weights_, token_batches


@dataclass(frozen=True, kw_only=True)
class TrainWorkload(aisp.Workload):
    model: GPTConfig = field(default_factory=GPTConfig)
    """The model trained."""
    batch: int = 16
    """Sequences per step."""
    steps: int = 2
    """SGD steps per run() (the second step's loss shows the first step's update)."""
    lr: float = 0.1
    """SGD learning rate."""


def train_workload(**kw: object) -> TrainWorkload:
    """A TrainWorkload with its FLOPs and token count filled in from its sizes."""
    w = TrainWorkload(**kw)
    flops = w.steps * w.model.train_flops(w.batch, w.model.seq)
    tokens = w.steps * w.batch * w.model.seq
    return TrainWorkload(**kw, flops=flops, items=tokens, item_unit="tokens")


class TrainBench(aisp.Benchmark):
    """``steps`` SGD steps of a GPT from a fixed start; subclasses change how a step runs."""

    workload: TrainWorkload
    inputs = ("idx", "targets")
    scratch = ("model", "params")
    autocast: torch.dtype | None = None
    checkpoint_blocks = False

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        model = GPT(w.model, self.checkpoint_blocks).to(self.device)
        self.model = init_weights_(model, gen)
        self.params = list(self.model.parameters())
        self.start = [p.detach().clone() for p in self.params]
        self.idx, self.targets = token_batches(w.model, (w.steps, w.batch, w.model.seq), gen, self.device)
        self.prepare()

    def prepare(self) -> None:
        """Untimed hook after the model exists: compile, warm up, capture graphs."""

    def amp(self) -> contextlib.AbstractContextManager:
        if self.autocast is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast)

    def forward_backward(self, idx: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with self.amp():
            logits, loss = self.model(idx, targets)
        loss.backward()
        return loss.detach(), logits.detach()

    def step(self, idx: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        for p in self.params:
            p.grad = None
        loss, logits = self.forward_backward(idx, targets)
        with torch.no_grad():
            torch._foreach_add_(self.params, [p.grad for p in self.params], alpha=-self.workload.lr)
        return loss, logits

    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad():
            torch._foreach_copy_(self.params, self.start)
        losses = []
        for s in range(self.workload.steps):
            loss, logits = self.step(self.idx[s], self.targets[s])
            losses.append(loss)
        return torch.stack(losses), logits.float()
