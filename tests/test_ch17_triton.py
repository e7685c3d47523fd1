"""ch17:decode_batching_roofline's Triton ops (ch17/ch17_decode.py) without a GPU: under
TRITON_INTERPRET=1 the decode attention matches the kit's write and masked SDPA (GQA, rows at
positions 0, tile edges and the cache's last slot, strided q/k/v views, the cache written only at
each row's slot), the top-k matches ``topk`` on ties, and the ``_compiled_triton`` variant verifies
against the baseline; the attention kernel compiles for sm_90 without spilling, its tiles loaded by
cp.async (pipelined) and multiplied on the tensor cores."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import pytest
import torch
from ci_triton_scripts import run_scripts
from test_ch17_pairs import build
from torch._inductor.utils import run_and_get_code
from torch.utils._python_dispatch import TorchDispatchMode
from triton_cpu import INTERPRETER_FIX, compile_sm90, fits_sm90

ROOT = Path(__file__).resolve().parents[1]
INTERPRETED = INTERPRETER_FIX + """
import sys
import torch
sys.path[:0] = [{ch17!r}, {tests!r}]
import ch17_decode as d
from refill_check import check_two_seeds
from test_ch17_pairs import build
assert d.INTERPRET
gen = torch.Generator().manual_seed(0)
layers, rows, kv_heads, max_len, dim, heads = 2, 6, 2, 150, 32, 8
ck, cv = (torch.randn(layers, rows, kv_heads, max_len, dim, generator=gen) for _ in range(2))
positions = torch.tensor([[0], [63], [64], [149], [100]])
q, k, v = torch.randn(5, heads + 2 * kv_heads, dim, generator=gen).split([heads, kv_heads, kv_heads], dim=1)
want_k, want_v = ck.clone(), cv.clone()
d.INTERPRET = False
want = d.decode_attend(want_k, want_v, 1, positions, q, k, v)
d.INTERPRET = True
got = d.decode_attend(ck, cv, 1, positions, q, k, v)
torch.testing.assert_close(got, want)
assert torch.equal(ck, want_k) and torch.equal(cv, want_v) and torch.equal(ck[1, 0, :, 0], k[0])
for dtype in (torch.float32, torch.float16):  # the interpreter mishandles bf16
    x = torch.randint(0, 60, (7, 3000), generator=gen).to(dtype)  # ties everywhere
    x[2, 2999] = x[4, 0] = 99  # a row's maximum in its last and its first chunk
    token, top = d.top_logits(x, 4)
    assert torch.equal(top, x.topk(4).values.float()) and top.dtype == torch.float32, (top, x.topk(4).values)
    assert torch.equal(x.float().gather(1, token[:, None])[:, 0], top[:, 0]) and token[2] == 2999 and token[4] == 0
check_two_seeds(build, "baseline_decode_batching_roofline", "optimized_decode_batching_roofline_compiled_triton")
print("interpreted ok")
"""


def test_decode_ops_match_their_references_under_the_interpreter() -> None:
    pytest.importorskip("triton")
    script = INTERPRETED.format(ch17=str(ROOT / "ch17"), tests=str(ROOT / "tests"))
    proc = run_scripts({"script": script}, timeout=900)["script"]
    assert proc.returncode == 0 and "interpreted ok" in proc.stdout, proc.stderr[-3000:]


def test_decode_attention_compiles_for_sm90_pipelined_without_spills() -> None:
    """At the pair's shapes (8 K/V heads of 8 query heads, head dim 128) as the op launches it."""
    sig = dict.fromkeys(("q_ptr", "k_ptr", "v_ptr", "ck_ptr", "cv_ptr"), "*bf16") | {"pos_ptr": "*i64",
                                                                                      "out_ptr": "*bf16"}
    sig |= dict.fromkeys(("layer", "rows", "max_len", "q_row", "k_row", "v_row", "pos_row"), "i32") | {"qk_scale": "fp32"}
    consts = {"KV_HEADS": 8, "GROUPS": 8, "G_PAD": 16, "D": 128, "BLOCK_N": 64}
    compiled = compile_sm90("ch17/ch17_decode:decode_attend_kernel", sig, consts, {"num_warps": 4, "num_stages": 4},
                            divisible=("q_row", "k_row", "v_row"))
    fits_sm90(compiled)
    ptx = compiled.asm["ptx"]
    assert "cp.async.cg" in ptx and "mma.sync" in ptx, "K/V tiles not loaded asynchronously, or no tensor-core products"
    assert 3 * 64 * 128 * 2 * 2 <= compiled.metadata.shared, "fewer than three K/V tiles in flight"


def test_triton_variant_step_runs_one_attention_op_a_layer_and_no_kit_write() -> None:
    """The ``_compiled_triton`` step, run eagerly: one ``ch17::decode_attend`` a layer (cache write
    included), one ``ch17::top_logits``, no ``ch17::write_kv``, no SDPA, no ``topk``."""
    class Ops(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.names: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
            self.names.append(str(func.overloadpacket))
            return func(*args, **(kwargs or {}))

    bench = build("optimized_decode_batching_roofline_compiled_triton", 0)
    bench.setup()
    with Ops() as ops:
        bench.batched_step()
    count = {name: ops.names.count(name) for name in set(ops.names)}
    assert count.get("ch17.decode_attend") == bench.workload.model.layers and count.get("ch17.top_logits") == 1, count
    assert not any(n in count for n in ("ch17.write_kv", "aten.topk", "aten.index_put_")), count
    assert not any("attention" in n for n in count), count


def test_compiled_triton_step_keeps_the_cache_in_place() -> None:
    """As test_ch17_pairs' check of ``_compiled``: Inductor's code for the step allocates nothing the
    size of a layer's cache (the op mutates the cache where it is), and matches the eager step."""
    bench = build("optimized_decode_batching_roofline_compiled_triton", 0)
    bench.workload = dataclasses.replace(bench.workload, context=200)  # the cache outgrows activations
    bench.setup()
    torch._dynamo.reset()
    out, codes = run_and_get_code(torch.compile(bench.batched_step, dynamic=False))
    torch.testing.assert_close(out, bench.batched_step())
    shapes = [s for code in codes for s in re.findall(r"empty_strided_\w+\(\(([\d, ]+)\)", code)]
    largest = max(math.prod(int(d) for d in s.split(",") if d.strip()) for s in shapes)
    assert largest < bench.cache.k[0].numel(), (largest, bench.cache.k[0].numel())
    assert "decode_attend" in "".join(codes) and "index_put" not in "".join(codes)
