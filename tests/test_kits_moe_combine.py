"""The MoE gather combine (aisp/kits/moe_combine.py, chapters 17 and 20) without a GPU: under the Triton
interpreter against the scatter it replaces, and compiled for sm_90 as the pairs launch it."""

from __future__ import annotations

import re

from triton_cpu import compile_sm90, fits_sm90, run_interpreted

SCRIPT = """
import torch
from aisp.kits.moe_combine import gather_combine
torch.manual_seed(0)
tokens, k, dim = 37, 4, 300  # a column block that ends mid-block (300 of 2 x 256)
order = torch.randperm(tokens * k)  # the flat (token, slot) assignments in expert order
gates = torch.rand(tokens, k)
y = torch.randn(tokens * k, dim).to(torch.bfloat16)  # row i is assignment order[i]'s expert output
out = gather_combine(y, order, gates, block=256)
want = torch.zeros(tokens, dim).index_add_(0, order // k, y.float() * gates.reshape(-1)[order, None])
assert out.dtype == torch.bfloat16 and out.shape == (tokens, dim)
assert torch.allclose(out.float(), want.bfloat16().float(), rtol=1e-2, atol=1e-2), (out.float() - want).abs().max()
assert ((out.float() - want).abs() <= want.abs() * 2 ** -7 + 1e-6).all()  # within one bf16 ulp of the fp32 sum
print("interpreted ok")
"""


def test_gather_combine_sums_each_tokens_gated_rows_like_the_scatter() -> None:
    run_interpreted(SCRIPT)


def test_gather_combine_compiles_for_sm90_to_vector_loads_without_spills() -> None:
    """As the pairs launch it (dim 2,048 in 1,024-column blocks, top-8, bf16 rows, 4 warps): each thread
    loads its 8 columns of each of the 8 rows as one 16-byte load, no 2-byte load, stores 16 bytes once,
    no spills."""
    sig = {"y_ptr": "*bf16", "row_ptr": "*i64", "gate_ptr": "*fp32", "out_ptr": "*bf16", "dim": "i32"}
    k = compile_sm90("aisp/kits/moe_combine:_gather_combine", sig, {"K": 8, "BLOCK": 1024},
                     {"num_warps": 4, "num_stages": 3}, divisible=("dim",))
    fits_sm90(k)
    ptx = k.asm["ptx"]
    assert ptx.count("ld.global.v4.b32") == 8 and ptx.count("st.global.v4.b32") == 1, "not 16-byte accesses"
    assert not re.search(r"ld\.global(\.\w+)*\.[bu]16", ptx), "2-byte loads"
