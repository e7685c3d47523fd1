"""Chapter 17's gather combine (ch17_combine.py) under the Triton interpreter on a CPU: every token's
top_k expert rows, gate-weighted and summed in fp32, against the scatter (index_add_) it replaces."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from conftest import REPO

SCRIPT = """
import sys, torch
sys.path.insert(0, "ch17")
from ch17_combine import gather_combine
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
"""


def test_gather_combine_sums_each_tokens_gated_rows_like_the_scatter() -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
