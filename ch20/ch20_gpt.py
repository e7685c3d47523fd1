"""What the ``gpt_training_e2e`` stages share: the GPT, its workload, the AdamW training step that
every stage runs, and the model FLOPs utilization (MFU) each stage reports.

The model is the kit's GPT (:mod:`aisp.kits.gpt`: pre-norm blocks, GELU MLP, untied head) at
GPT-2-medium width and 8 blocks: width 1024, 16 heads, 1,024 tokens, 32k vocabulary (169M
parameters, embeddings included). ``run()`` restores the parameters from a snapshot and zeroes AdamW's moments, then
takes ``steps`` steps, so every call does the same work from the same start; it returns each
step's loss and the last step's logits for one sequence's last 64 positions (they carry the first
update).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

import aisp
from aisp.kits.gpt import GPT, Attention, GPTConfig, init_weights_, token_batches

MODEL = GPTConfig(vocab=32768, seq=1024, dim=1024, heads=16, layers=8)
PEAK_BF16_DENSE = 989.4e12
"""H100 SXM / H200 dense bf16 tensor-core peak (spec), the usual MFU denominator."""
LOGIT_ROWS = 64
"""Positions of the last step's logits returned (one sequence's last ones): enough to see the update."""


@dataclass(frozen=True, kw_only=True)
class TrainWorkload(aisp.Workload):
    model: GPTConfig = field(default_factory=lambda: MODEL)
    """The model trained."""
    batch: int = 8
    """Sequences per step."""
    steps: int = 2
    """AdamW steps per run() (the second step's loss shows the first step's update)."""
    lr: float = 3e-4
    """AdamW learning rate (weight decay 0.1)."""


def train_workload(**kw: object) -> TrainWorkload:
    """A TrainWorkload with its FLOPs (6 per weight per token, plus causal attention) and tokens."""
    w = TrainWorkload(**kw)
    return TrainWorkload(**kw, flops=w.steps * w.model.train_flops(w.batch, w.model.seq),
                         items=w.steps * w.batch * w.model.seq, item_unit="tokens")


class MathAttention(Attention):
    """Causal attention written out: scores, mask, softmax, weighted sum (the (seq, seq) scores and
    probabilities go through HBM, and are kept for backward)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).transpose(1, 3).unbind(2)
        scores = q @ k.transpose(-2, -1) * (d // self.heads) ** -0.5
        causal = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
        y = F.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, s, d))


class TrainStep(aisp.Benchmark):
    """``steps`` AdamW steps of the GPT from a fixed start; stages set how a step runs."""

    workload: TrainWorkload
    inputs = ("idx", "targets")
    scratch = ("model", "params", "states")
    autocast: torch.dtype | None = None
    """Autocast dtype for forward and loss (None: fp32)."""
    sdpa = False
    """Flash attention through SDPA (else :class:`MathAttention`)."""
    fused_adamw = False
    """``AdamW(fused=True)``: one kernel per parameter group (else PyTorch's default, foreach)."""

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        with self.device:
            model = GPT(w.model)
            if not self.sdpa:
                for block in model.blocks:
                    block.attn = MathAttention(w.model)  # same parameters, registered in the same order
        self.model = init_weights_(model, gen)
        self.params = list(self.model.parameters())
        self.start = [p.detach().clone() for p in self.params]
        self.idx, self.targets = token_batches(w.model, (w.steps, w.batch, w.model.seq), gen, self.device)
        self.opt = torch.optim.AdamW(self.params, lr=w.lr, weight_decay=0.1,
                                     **({"fused": True} if self.fused_adamw else {}))
        self.events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
        self.prepare()
        self.run()  # AdamW's state exists from here on (run() zeroes it); compiles, where a stage compiles
        self.states = [t for st in self.opt.state.values() for t in st.values()]

    def prepare(self) -> None:
        """Untimed hook after the model exists (compile)."""

    def amp(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext() if self.autocast is None else torch.autocast(self.device.type, self.autocast)

    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        timer = self.timer()
        with torch.no_grad():
            torch._foreach_copy_(self.params, self.start)
            for st in self.opt.state.values():
                for t in st.values():
                    t.zero_()
        losses = []
        for s in range(self.workload.steps):
            self.opt.zero_grad(set_to_none=True)
            with self.amp():
                logits, loss = self.model(self.idx[s], self.targets[s])
            loss.backward()
            self.opt.step()
            losses.append(loss.detach().float())
        if timer:
            timer[1].record()
        return torch.stack(losses), logits[0, -LOGIT_ROWS:].detach().float()

    def timer(self) -> tuple[torch.cuda.Event, torch.cuda.Event] | None:
        """CUDA events around this call (for :meth:`metrics`); None on a CPU."""
        if self.device.type != "cuda":
            return None
        pair = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        pair[0].record()
        self.events = [*self.events[-63:], pair]
        return pair

    def metrics(self) -> dict[str, float]:
        """MFU: the model's FLOPs over the median call time, as a share of the dense bf16 peak."""
        if not self.events:
            return {}
        torch.cuda.synchronize(self.device)
        ms = sorted(a.elapsed_time(b) for a, b in self.events)[len(self.events) // 2]
        return {"mfu": self.workload.flops / (ms / 1e3) / PEAK_BF16_DENSE}
