"""Optimized fp8 MoE: the same routing and expert loop with row-wise scaled fp8 GEMMs.

Baseline (baseline_fp8_moe.py): bf16 expert GEMMs over tokens sorted by expert.
Optimized: at load time (setup) each expert's weights become e4m3 with one fp32 scale per output
channel. Per call: each expert's group of sorted tokens is padded to a multiple of 16 rows (padding
rows repeat token 0 with gate 0; 16 x 8 = 128 rows in all, 0.4% more, the slack at the end so that
the shapes never change), so every group, and its slice of the row scales, starts aligned. The first
H200 run failed with CUBLAS_STATUS_NOT_SUPPORTED on the second expert (1056 rows from row 1033)
after the first (1033 rows from row 0) ran: the only operand whose alignment differed is the
row-scale slice (4 x 1033 bytes in: not 16-byte aligned), which cuBLASLt's row-wise fp8 GEMM needs
aligned. The gathered tokens are quantized to e4m3 with one scale per row (one compiled pass: row
amax, scale, cast); per expert ``_scaled_mm(x8[group], w8[e].t(), scale_a=sx[group] (rows, 1),
scale_b=sw[e] (1, N), out_dtype=bf16)`` runs on the fp8 tensor cores; the up-projection's output
goes through GELU and row-wise quantization in one compiled pass; the down-projection is another
row-wise ``_scaled_mm`` per expert. Row-wise scales keep each token's own range (an outlier token
does not coarsen the others: rowwise_scaling.py) at no GEMM cost: the epilogue applies them. The
padding (index building and the extra rows) is inside the timed call.
Expect (measured, H200, 2026-11-27): 8.660 -> 7.327 ms, 1.18x (median ratio), 600.3 TFLOP/s, 42% of the
fp8 peak (estimated 1.3-1.6x); the grouped Triton variant won (6.929 ms, 1.25x). On 2026-11-26: 8.771
-> 7.788 ms, 1.13x [1.12, 1.14], 564.7 TFLOP/s, 39%, with the expert GEMMs on fast fp8 accumulation
(``use_fast_accum=True``; they had PyTorch's default False, which on sm_90 selects the CUTLASS
row-wise kernel that promotes partial sums to fp32 on the CUDA cores). That change bought nothing:
the first measurement (after the padding fix; the first run errored before timing) was 8.613 ->
7.776 ms, 1.11x [1.07, 1.15], so the accumulation mode is not what holds the GEMMs back; how the
time splits is not profiled. This is a forward-only pass, where fp8_linear_training uses fast
accumulation too (pitfall 5). Arithmetic: 4.40 TFLOP take 3.07 ms at the fp8 peak; the passes around
the GEMMs (gather, quantize x and GELU(h), combine: ~2.5 GB, ~0.7 ms at HBM rate) leave ~7.1 ms of
GEMMs in the measured 7.79 ms, ~620 TFLOP/s (43% of the peak) for 16 GEMMs of ~4100 x 8192 x 4096.
Every sample of both variants ran under sw_power_cap.
Run: python ch19/optimized_fp8_moe.py  |  aisp bench run -t ch19:fp8_moe
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import accumulate

import torch
import torch.nn.functional as F
from baseline_fp8_moe import Bf16ExpertLoop, combine, route
from ch19_fp8 import E4M3, FP8_MAX

import aisp

ALIGN = 16
"""Rows per group step: every expert's group starts at a multiple of 16 rows, so its row-scale slice
starts 64-byte aligned (cuBLASLt rejects a row-wise scale pointer that is not 16-byte aligned:
CUBLAS_STATUS_NOT_SUPPORTED on the H200 for a slice starting at row 1033) and its row count is a
multiple of 16."""


def padded_layout(token: torch.Tensor, gate: torch.Tensor, counts: list[int]
                  ) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """Each expert's group padded to a multiple of ALIGN rows: (token per row, gate per row, rows per
    group). Padding rows repeat token 0 with gate 0: their GEMM rows are computed and add zero. The
    last group takes the slack up to a fixed total, so every call (refilled inputs too) has the same
    shapes and the compiled quantization passes never recompile."""
    padded = [-(-c // ALIGN) * ALIGN for c in counts]
    padded[-1] += -(-token.numel() // ALIGN) * ALIGN + ALIGN * len(counts) - sum(padded)
    shift = [p - c for p, c in zip(accumulate([0, *padded[:-1]]), accumulate([0, *counts[:-1]]), strict=True)]
    dev, n = token.device, token.numel()
    dest = torch.arange(n, device=dev) + torch.tensor(shift, device=dev).repeat_interleave(
        torch.tensor(counts, device=dev), output_size=n)
    token_pad = token.new_zeros(sum(padded)).index_copy_(0, dest, token)
    return token_pad, gate.new_zeros(sum(padded)).index_copy_(0, dest, gate), padded


def quantize_rows(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(t as e4m3, fp32 dequant scale per row, shape (rows, 1))."""
    scale = t.abs().amax(dim=-1, keepdim=True).float().clamp_min(1e-12) / FP8_MAX[E4M3]
    return (t.float() / scale).clamp(-FP8_MAX[E4M3], FP8_MAX[E4M3]).to(E4M3), scale


def gelu_quantize_rows(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return quantize_rows(F.gelu(t))


class Fp8ExpertLoop(Bf16ExpertLoop):
    def prepare(self) -> None:
        up = [quantize_rows(w) for w in self.w_up]
        down = [quantize_rows(w) for w in self.w_down]
        self.up_bits = [q.view(torch.uint8) for q, _ in up]
        self.down_bits = [q.view(torch.uint8) for q, _ in down]
        self.up_scale = [s.t().contiguous() for _, s in up]
        self.down_scale = [s.t().contiguous() for _, s in down]
        cuda = self.device.type == "cuda"
        self.quantize: Callable = torch.compile(quantize_rows) if cuda else quantize_rows
        self.gelu_quantize: Callable = torch.compile(gelu_quantize_rows) if cuda else gelu_quantize_rows
        self.run()

    def grouped(self, q: torch.Tensor, scale: torch.Tensor, counts: list[int], bits: list[torch.Tensor],
                w_scale: list[torch.Tensor]) -> torch.Tensor:
        """One row-wise scaled fp8 GEMM per expert over its contiguous slice of rows."""
        outs = []
        for e, (rows, s) in enumerate(zip(torch.split(q, counts), torch.split(scale, counts), strict=True)):
            if rows.shape[0]:
                outs.append(torch._scaled_mm(rows, bits[e].view(E4M3).t(), scale_a=s,
                                             scale_b=w_scale[e], out_dtype=torch.bfloat16, use_fast_accum=True))
        return torch.cat(outs)

    def experts(self, xs: torch.Tensor, counts: list[int]) -> torch.Tensor:
        x8, sx = self.quantize(xs)
        h = self.grouped(x8, sx, counts, self.up_bits, self.up_scale)
        h8, sh = self.gelu_quantize(h)
        return self.grouped(h8, sh, counts, self.down_bits, self.down_scale)

    def run(self) -> torch.Tensor:
        token, gate, counts = padded_layout(*route(self.x, self.router, self.workload.top_k))
        return combine(self.experts(self.x[token], counts), token, gate, self.workload.tokens)


def get_benchmark() -> aisp.Benchmark:
    return Fp8ExpertLoop()


if __name__ == "__main__":
    aisp.main(get_benchmark)
