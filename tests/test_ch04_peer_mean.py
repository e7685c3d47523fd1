"""optimized_gradient_bucketing_multigpu_fused's kernel on a CPU: the mean of two fp32 buffers (Triton,
TRITON_INTERPRET=1 in a fresh process) against ``torch.mean`` over the two stacked rows, bit for bit,
on a ragged tail and in either operand order (each rank passes its own buffer first); the kernel
through Triton's real compiler for sm_90 (no GPU): 16-byte loads and stores, no spills. The variant's
two-rank path runs on gloo in test_ch04_pairs.py (the buckets) and on two GPUs in its gpu test."""

from __future__ import annotations

from triton_cpu import compile_sm90, fits_sm90, run_interpreted

SCRIPT = """
import sys, torch
sys.path.insert(0, "ch04")
from ch04_peer_mean import BLOCK, mean_pair_
gen = torch.Generator().manual_seed(0)
n = 2 * BLOCK + 37  # a masked last program
a, b = torch.randn(n, generator=gen), torch.randn(n, generator=gen) * 1e3
a[:5] = torch.tensor([3.4e38, 1e-45, -0.0, float("inf"), 1.0])  # overflow, subnormal, signed zero
b[:5] = torch.tensor([3.4e38, 2e-45, 0.0, 1.0, 2.0**-24])  # rounding of the sum
want = torch.mean(torch.stack([a, b]), 0)
for x, y in ((a, b), (b, a)):
    out = torch.full((n + 8,), float("nan"))
    mean_pair_(x, y, out[:n])
    assert torch.equal(out[:n], want), (out[:n] - want).abs().max()
    assert out[n:].isnan().all()  # nothing written past the end
try:
    mean_pair_(a, b[:-1], torch.empty(n))
except AssertionError:
    pass
else:
    raise SystemExit("a peer buffer of another length was accepted")
print("interpreted ok")
"""


def test_mean_matches_torch_mean_bit_for_bit_and_stays_in_bounds() -> None:
    run_interpreted(SCRIPT)


def test_kernel_compiles_for_sm90_with_16_byte_accesses_and_no_spills() -> None:
    compiled = compile_sm90("ch04/ch04_peer_mean:mean_pair_kernel", {"own": "*fp32", "peer": "*fp32",
                            "out": "*fp32", "n": "i32"}, {"BLOCK": 4096}, {"num_warps": 8}, divisible=("n",))
    ptx = compiled.asm["ptx"]
    assert ptx.count("ld.global.v4.b32") == 8  # 16 values a thread: four 16-byte loads of each buffer
    assert ptx.count("st.global.v4.b32") == 4
    assert "fma" not in ptx.split("ld.global")[-1]  # (a + b) * 0.5: an add, then a multiply
    usage = fits_sm90(compiled)
    assert usage["REG"] <= 64, usage  # 8 blocks of 256 threads fit an SM: loads in flight for NVLink
