"""Baseline fp8 weight decode: a graphed bf16 decode step, bound by reading its bf16 weights.

Baseline: a wider decoder (2 blocks of an 8B-class layer: width 4096, 32 query heads on 8 K/V
heads, SwiGLU 14,336; 32k vocabulary) decodes 16 greedy tokens for 8 sequences whose 512-token
prompts were prefilled at setup (the cache is the server's state; each call rewrites positions
512..527 from the call's first tokens). Each step is a CUDA graph replay (as in decode_cuda_graph),
so the GPU's time is the step's kernels, and their cost is reading 1.13 GB of bf16 weights (QKV,
output, SwiGLU, LM head: ~0.27 ms at 4.2 TB/s) plus ~34 MB of cache; at 8 tokens each weight byte
feeds 8 FLOPs, far below the bf16 ridge (~190 FLOP/byte).
Optimized (optimized_fp8_weight_decode.py): the same step with every linear layer's weights in
e4m3 with a scale per output channel, through the kit's weight-only fp8 Triton kernel
(``aisp.kits.fp8``, written for ch13:quantization): half the weight bytes.
Expect (measured, H200, 2026-11-26): 1.23x [1.23, 1.23] (estimated 1.4-1.7x; 2026-11-23: 9.45 ->
7.79 ms, 1.21x): 8.541 ms bf16 vs 6.964 ms fp8 for 16 graphed steps (~0.53 vs ~0.44 ms per step).
The bf16 step streams ~1.16 GB at ~2.2 TB/s (~51% of HBM); the fp8 step reads half the bytes at 1.38
TB/s (33% of HBM; ch13 measured 2.5 TB/s for this kernel), so it is ~0.44 ms against a ~0.14 ms HBM
floor. The workload's bytes are the optimized variant's (fp8 weights + cache): its GB/s is its share
of HBM. Measured again (H200, 2026-11-29, weights drawn on the GPU): 8.558 ms bf16 -> 6.496 ms for the
``_gemv`` variant (the best), 1.32x [1.32, 1.32], 35.1% of HBM; the kit's kernel 6.932 ms, 1.23x (32.9%).
Tolerance: fp8 defaults. Emulated on a CPU in fp32 (weights quantized and dequantized) at this
size: the greedy tokens are identical and the top-4 logits differ by at most 0.30 (rms 7.8;
relative L2 0.013), inside the fp8 default (0.05 x rms + 0.15 x |r|); another seed's weights
change the tokens. On a GPU the weights are drawn there (``draw_on_device``: another draw of the
same distributions; drawing 0.57 B weights on one CPU thread took ~13 s a variant).
Run: python ch16/baseline_fp8_weight_decode.py  |  aisp bench run -t ch16:fp8_weight_decode
"""

from __future__ import annotations

import torch
from ch16_decode import DecodeWorkload, GraphedDecode, dtype_on

import aisp
from aisp.kits.llm import TOP, DenseKVCache, LLMConfig, build_decoder, greedy_top, prefill

WIDE = LLMConfig(vocab=32000, dim=4096, layers=2, heads=32, kv_heads=8, ffn=14336)


def _workload() -> DecodeWorkload:
    w = DecodeWorkload(model=WIDE, batch=8, prompt=512, steps=17)
    return DecodeWorkload(model=WIDE, batch=8, prompt=512, steps=17, flops=w.step_flops(),
                          bytes=w.step_bytes(weight_itemsize=1.0), items=w.batch * (w.steps - 1), item_unit="tokens",
                          ceiling_note="profiled (ncu, _gemv): fp8 GEMVs at 69-77% of DRAM, ~0.195 ms of _fused's 0.262 ms a step; "
                                       "its 12 other kernels and launches ~0.067 ms (not profiled)",
                          precision="fp8", requires=aisp.Requirements(cuda=True, packages=("triton",)))


WORKLOAD = _workload()


class BF16Decode(aisp.Benchmark):
    """``steps - 1`` graphed decode steps from the prefilled cache, starting at each row's ``first``
    token; returns (tokens, top logits (TOP per step))."""

    workload: DecodeWorkload = WORKLOAD
    inputs = ("first",)
    state = ("cache_k", "cache_v")

    def setup(self) -> None:
        w = self.workload
        self.model = build_decoder(w.model, self.seed, self.device, dtype_on(self.device),
                                   draw_on_device=self.device.type == "cuda")  # 0.57 B weights: ~13 s a variant on one CPU thread
        prompts = torch.randint(w.model.vocab, (w.batch, w.prompt), generator=self.generator(), device=self.device)
        self.cache = DenseKVCache(w.model, w.batch, w.prompt + w.steps, self.device, dtype_on(self.device))
        self.cache_k, self.cache_v = self.cache.k, self.cache.v
        with torch.no_grad():
            self.first = greedy_top(prefill(self.model, self.cache, list(prompts)), TOP)[0]
        self.prepare()
        self.step = self.make_step()

    def prepare(self) -> None:
        """Model-load-time weight preparation (none for bf16)."""

    def make_step(self) -> GraphedDecode:
        """The graphed step (the kit decoder's forward, greedy top-k and feedback)."""
        return GraphedDecode(self.model, self.cache, self.workload.batch, self.workload.prompt + self.workload.steps)

    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        w, step = self.workload, self.step
        tokens = torch.empty(w.batch, w.steps - 1, dtype=torch.long, device=self.device)
        top = torch.empty(w.batch, w.steps - 1, TOP, device=self.device)
        step.tok.copy_(self.first)
        step.pos.fill_(w.prompt)
        for t in range(w.steps - 1):
            step()
            tokens[:, t], top[:, t] = step.next_tok, step.top
        return tokens, top


def get_benchmark() -> aisp.Benchmark:
    return BF16Decode()


if __name__ == "__main__":
    aisp.main(get_benchmark)
