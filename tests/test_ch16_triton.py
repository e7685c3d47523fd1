"""Chapter 16's Triton pairs without a GPU: ``fp8_kv_cache`` and ``fp8_weight_decode`` (both its
variants) verify on a CPU under TRITON_INTERPRET=1 (two seeds, another seed rejected, refilled
inputs), the fp8 attention kernel matches SDPA over the dequantized cache, the fp8 GEMV matches
fp64 at ragged shapes, and their sm_90 code (compiled without a GPU) widens two e4m3 values per
instruction and multiplies on the tensor cores (the GEMV: 16-byte asynchronous copies, no spills;
the attention kernel: V in dim-major blocks read without the byte loads row-major V needs)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from ci_triton_scripts import assert_ran, run_scripts
from triton_cpu import INTERPRETER_FIX, SMEM_PER_BLOCK, compile_sm90, cuobjdump, fits_sm90, resource_usage

from aisp.harness.loader import import_module_at

ROOT = Path(__file__).resolve().parents[1]
CH16 = ROOT / "ch16"

INTERPRETED = """
import dataclasses, sys
from pathlib import Path
import torch
import torch.nn.functional as F
sys.path[:0] = [{ch16!r}, {tests!r}]
from conftest import variant_modules
from refill_check import check_pair as seeds_and_refill
from aisp.harness.loader import import_module_at
from aisp.kits.llm import LLMConfig
from ch16_fp8_kv import block_values, fp8_decode_attention, quantize_heads

# the cache: 2 slices of 2 key blocks each; the decode: 2 steps a call, the second fed the first's tokens
SMALL = {{"fp8_kv_cache": dict(rows=2, kv_heads=2, context=256, splits=2, element_tol=0.15),
          "fp8_weight_decode": dict(model=LLMConfig(vocab=256, dim=128, layers=2, heads=2, kv_heads=1, ffn=128),
                                    batch=3, prompt=10, steps=3)}}
def check_pair(name, sizes, mods, variant):
    def build(mod, seed):
        bench = mod.get_benchmark()
        bench.device, bench.seed = torch.device("cpu"), seed
        bench.workload = dataclasses.replace(bench.workload, **sizes)
        return bench

    seeds_and_refill(build, mods[0], mods[1])
    print('verified', variant)

for name, sizes in SMALL.items():
    variants = [opt for base, opt in variant_modules(Path({ch16!r})) if base == "baseline_" + name]
    assert len(variants) == {{"fp8_kv_cache": 2, "fp8_weight_decode": 3}}[name], variants
    for variant in variants:
        check_pair(name, sizes, [import_module_at(Path({ch16!r}) / f"{{module}}.py")
                                 for module in ("baseline_" + name, variant)], variant)


gen = torch.Generator().manual_seed(3)
q = torch.randn(3, 2, 3, 64, generator=gen)
k, v = (torch.randn(3, 2, 256, 64, generator=gen) * s for s in (2.0, 0.5))
(k8, ks), (v8, vs) = quantize_heads(k), quantize_heads(v)
e4m3 = torch.float8_e4m3fn
ref = F.scaled_dot_product_attention(q, k8.view(e4m3).float() * ks[:, None, None],
                                     v8.view(e4m3).float() * vs[:, None, None])
out = fp8_decode_attention(q, k8.view(e4m3), v8.view(e4m3), ks, vs, 2)
torch.testing.assert_close(out, ref, rtol=2e-3, atol=2e-3)
out = fp8_decode_attention(q, k8.view(e4m3), block_values(v8).view(e4m3), ks, vs, 2)
torch.testing.assert_close(out, ref, rtol=2e-3, atol=2e-3)
untransposed = v8.reshape(3, 2, 4, 64, 64).contiguous().view(e4m3)  # blocks, not dim-major: a planted fault
assert (fp8_decode_attention(q, k8.view(e4m3), untransposed, ks, vs, 2) - ref).abs().max() > 0.05
print("interpreted ok")
"""


@pytest.fixture(scope="module")
def interpreted() -> dict[str, subprocess.CompletedProcess]:
    """The module's four interpreted scripts (each after INTERPRETER_FIX), in forks of one process that
    imported torch and triton once for them (tests/ci_triton_scripts.py)."""
    pytest.importorskip("triton")
    scripts = {"pairs": INTERPRETED.format(ch16=str(CH16), tests=str(ROOT / "tests")), "gemv": GEMV.format(ch16=str(CH16)),
               "fused": FUSED.format(ch16=str(CH16)), "push": PUSH}
    return run_scripts({name: INTERPRETER_FIX + script for name, script in scripts.items()})


def test_fp8_pairs_verify_under_the_triton_interpreter(interpreted: dict) -> None:
    assert_ran(interpreted, "pairs", "interpreted ok")
    proc = interpreted["pairs"]
    for variant in ("optimized_fp8_kv_cache_v_blocks", "optimized_fp8_weight_decode_gemv",
                    "optimized_fp8_weight_decode_fused"):
        assert f"verified {variant}" in proc.stdout, proc.stdout


ATTEND_SIG = {"q_ptr": "*bf16", "k_ptr": "*fp8e4nv", "v_ptr": "*fp8e4nv", "ks_ptr": "*fp32", "o_ptr": "*fp32",
              "ml_ptr": "*fp32", "ctx": "i32", "qk_scale": "fp32"}


def attention_kernel(v_blocks: bool):
    """The split-K attention kernel as the pair specializes it (V row-major or in dim-major
    blocks), compiled for sm_90 without a GPU."""
    sys.path.insert(0, str(CH16))
    try:
        from ch16_fp8_kv import BLOCK_N, G_PAD
    finally:
        sys.path.remove(str(CH16))
    consts = {"SPLIT_LEN": 512, "KV_HEADS": 8, "GROUPS": 4, "G_PAD": G_PAD, "D": 128, "BLOCK_N": BLOCK_N,
              "V_BLOCKS": v_blocks}
    return compile_sm90("ch16/ch16_fp8_kv:_attend", ATTEND_SIG, consts, {"num_warps": 4, "num_stages": 3},
                        divisible=("ctx",))


@pytest.mark.parametrize("v_blocks", [False, True])
def test_sm90_attention_widens_e4m3_pairs_on_the_tensor_cores(v_blocks: bool) -> None:
    sass = cuobjdump(attention_kernel(v_blocks), "-sass")
    assert "F2FP.F16.E4M3.UNPACK_B" in sass, "e4m3 -> fp16x2 conversion (two values per instruction) missing"
    assert "HMMA" in sass, "the products do not run on the tensor cores"


def test_sm90_attention_reads_blocked_v_without_byte_loads() -> None:
    """Row-major V (the planted contrast): 64 single-byte shared-memory loads a thread per 64-key
    step and 8-byte copies from HBM; V in dim-major blocks: neither, and few enough registers for 5
    programs of 4 warps an SM."""
    row_major, blocked = cuobjdump(attention_kernel(False), "-sass"), attention_kernel(True)
    assert row_major.count("LDS.U8") >= 64 and "LDGSTS.E.64" in row_major
    assert not {"LDS.U8", "LDGSTS.E.64"} & set(re.findall(r"[A-Z0-9_.]+", cuobjdump(blocked, "-sass")))
    regs = fits_sm90(blocked)["REG"]
    assert regs * 128 * 5 <= 65536 and 5 * (blocked.metadata.shared + 1024) <= 228 * 1024, regs


GEMV = """
import sys
import torch
sys.path[:0] = [{ch16!r}]
from ch16_fp8_gemv import GemvConfig, fp8_gemv, k_splits
from aisp.kits.fp8 import quantize_rows

torch.manual_seed(0)
small = GemvConfig(block_n=32, block_k=32, stages=2, max_split=4)
# (M, N, K): N ragged (a last block part outside); K split in 4, in 2, not at all (K not a whole
# number of steps per split; enough output blocks); 1, 8 and 13 rows
for m, n, k in ((1, 100, 256), (8, 100, 256), (13, 70, 128), (8, 40, 96), (8, 200, 64), (8, 300, 256)):
    split = k_splits(n, k, small, sms=8)
    w8, scale = quantize_rows(torch.randn(n, k) * torch.logspace(-1, 1, n)[:, None])
    w = w8.view(torch.float8_e4m3fn)
    x = (torch.randn(m, k) * 3).half().float()  # fp16-exact, as the kernel casts it
    ref = x.double() @ (w.double() * scale.double()[:, None]).T
    out = fp8_gemv(x, w, scale, small)
    assert out.shape == (m, n) and out.dtype == x.dtype
    err = ((out.double() - ref).abs().max() / ref.abs().max()).item()
    assert err < 1e-5, (m, n, k, split, err)
    print("gemv", m, n, k, "split", split, "err", err)
"""


def test_fp8_gemv_matches_fp64_at_ragged_shapes_under_the_interpreter(interpreted: dict) -> None:
    """The GEMV against x @ (w8 * scale)^T in fp64: N not a multiple of the block, 1, 8 and 13 rows
    (8 and 16 MMA columns), K split over 4 and 2 programs (partials summed by the second kernel)
    and not split (small blocks and a 8-SM machine, so that the test's shapes take every path)."""
    assert_ran(interpreted, "gemv")
    proc = interpreted["gemv"]
    splits = [line.split()[5] for line in proc.stdout.splitlines() if line.startswith("gemv")]
    assert splits == ["4", "4", "4", "1", "2", "1"], proc.stdout  # every path taken


def gemv_module():
    return import_module_at(CH16 / "ch16_fp8_gemv.py")


def test_fp8_gemv_splits_only_layers_that_leave_sms_idle() -> None:
    mod = gemv_module()
    shapes = {"qkv": (6144, 4096), "out": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336),
              "head": (32000, 4096)}
    splits = {name: mod.k_splits(n, k) for name, (n, k) in shapes.items()}
    assert splits == {"qkv": 8, "out": 8, "gate_up": 1, "down": 8, "head": 1}, splits
    assert mod.k_splits(4096, 3 * 128) == 1  # no split that leaves a fraction of a K step


def test_fp8_gemv_refuses_what_it_cannot_tile() -> None:
    import torch
    mod = gemv_module()
    w, s = torch.zeros(256, 256, dtype=torch.float8_e4m3fn), torch.ones(256)
    for x, wt in ((torch.zeros(17, 256), w), (torch.zeros(8, 200), w[:, :200].contiguous()),
                  (torch.zeros(8, 512)[:, ::2], w), (torch.zeros(8, 128), w)):
        with pytest.raises(ValueError, match="fp8_gemv"):
            mod.fp8_gemv(x, wt, s)


GEMV_SIG = {"x_ptr": "*bf16", "w_ptr": "*fp8e4nv", "s_ptr": "*fp32", "y_ptr": "*bf16", "M": "i32", "N": "i32",
            "K": "i32", "K_SPLIT": "i32"}


@pytest.mark.parametrize(("rows", "partial"), [(8, False), (8, True), (16, False), (16, True)])
def test_sm90_fp8_gemv_compiles_without_spills(rows: int, partial: bool) -> None:
    """The GEMV as the decode step launches it (N, K and the split a multiple of 16, as Triton's
    launcher specializes them): no local memory or stack, shared memory within a block's limit; the
    tuned 8-row path copies the weights 16 bytes at a time asynchronously (cp.async, pipelined),
    widens two e4m3 per instruction and runs mma.sync with 8 token columns (HMMA.16816), in little
    enough shared memory for 3 programs an SM. (9-16 rows compile to wgmma with 86 KB: correct, not
    tuned; the decode step has 8.)"""
    cfg = gemv_module().CONFIG
    sig = GEMV_SIG | {"y_ptr": "*fp32" if partial else "*bf16"}
    consts = {"ROWS": rows, "PARTIAL": partial, "BLOCK_N": cfg.block_n, "BLOCK_K": cfg.block_k}
    compiled = compile_sm90("ch16/ch16_fp8_gemv:_gemv_fp8", sig, consts,
                            {"num_warps": cfg.warps, "num_stages": cfg.stages}, divisible=("N", "K", "K_SPLIT"))
    fits_sm90(compiled)
    if rows == 8:
        assert compiled.metadata.shared <= SMEM_PER_BLOCK / 3, compiled.metadata.shared  # 3 programs an SM
        sass = cuobjdump(compiled, "-sass")
        assert "LDGSTS.E.BYPASS.128" in sass and "LDG.E.U8" not in sass, "weights not copied 16 bytes at a time"
        assert "F2FP.F16.E4M3.UNPACK_B" in sass and "HMMA.16816.F32" in sass


def test_sm90_split_sum_compiles_without_spills() -> None:
    sig = {"p_ptr": "*fp32", "s_ptr": "*fp32", "y_ptr": "*bf16", "MN": "i32", "N": "i32"}
    compiled = compile_sm90("ch16/ch16_fp8_gemv:_sum_splits", sig, {"SPLITS": 8, "BLOCK": 1024}, {"num_warps": 4},
                            divisible=("MN", "N"))
    fits_sm90(compiled)


FUSED = """
import math, sys
import torch
import torch.nn.functional as F
sys.path[:0] = [{ch16!r}]
from torch.profiler import ProfilerActivity, profile
from triton.runtime import interpreter
from aisp.kits.fp8 import quantize_rows
from aisp.kits.fp8_layers import to_fp8
from aisp.kits.llm import TOP, DenseKVCache, LLMConfig, build_decoder, greedy_top, prefill
from ch16_decode import GraphedDecode
from ch16_fp8_gemv import GemvFP8Linear, gemv_launch
from ch16_fp8_kv import _combine
from ch16_fused_decode import _attend, _top_feedback
from optimized_fp8_weight_decode_fused import FusedStep

NOT_KERNELS = {{"aten::copy_", "aten::set_", "aten::new_empty", "aten::empty", "aten::empty_like", "aten::view",
               "aten::select", "aten::slice", "aten::split", "aten::split_with_sizes", "aten::reshape",
               "aten::unsqueeze", "aten::transpose", "aten::expand", "aten::expand_as", "aten::t", "aten::permute",
               "aten::alias", "aten::chunk", "aten::_unsafe_view", "aten::as_strided", "aten::lift_fresh"}}
launches = []
_call = interpreter.GridExecutor.__call__
def counted(self, *args, **kwargs):
    launches.append(self.fn.__name__)
    return _call(self, *args, **kwargs)
interpreter.GridExecutor.__call__ = counted

# the kit's step (GEMV layers) and the fused one, decoding from the same prefilled cache; in fp32 and
# in bf16 (the GPU's dtype: the fused kernels round where the eager step rounds)
cfg = LLMConfig(vocab=300, dim=128, layers=2, heads=4, kv_heads=2, ffn=128)  # no K split: 21 kernels
for dtype, top_tol in ((torch.float32, 2e-3), (torch.bfloat16, 0.2)):
    rows, prompt, slots = 3, 150, 160  # 160 keys: two attention slices, a ragged one and an empty one
    outs = []
    for step_type in (GraphedDecode, FusedStep):
        model = build_decoder(cfg, 0, torch.device("cpu"), dtype)
        cache = DenseKVCache(cfg, rows, slots, torch.device("cpu"), dtype)
        prompts = torch.randint(cfg.vocab, (rows, prompt), generator=torch.Generator().manual_seed(1))
        first = greedy_top(prefill(model, cache, list(prompts)), TOP)[0]
        to_fp8(model, layer=GemvFP8Linear)
        step = step_type(model, cache, rows, slots, *(() if step_type is GraphedDecode else (TOP,)))
        step.tok.copy_(first)
        step.pos.copy_(torch.tensor([prompt, prompt - 40, prompt + 2]))  # rows at other positions
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            launches.clear()
            step()
        kernels = list(launches)
        aten = [e.name for e in prof.events() if e.name.startswith("aten::") and not (
            e.cpu_parent is not None and e.cpu_parent.name.startswith("aten::"))]
        tokens, tops = [step.next_tok.clone()], [step.top.clone()]
        for _ in range(2):  # 3 steps compared: each after the previous one's token and position
            step()
            tokens.append(step.next_tok.clone())
            tops.append(step.top.clone())
        outs.append((torch.stack(tokens), torch.stack(tops), step.pos.clone(), cache.k.float(), cache.v.float(), kernels, aten))
    kit, fused = outs
    assert torch.equal(kit[0], fused[0]) and torch.equal(kit[2], fused[2]), (kit[0], fused[0])
    err = (kit[1] - fused[1]).abs().max().item()
    assert err < top_tol, (dtype, err)
    for a, b in zip(kit[3:5], fused[3:5]):  # the new keys and values (fp16 inputs of the GEMVs in both)
        print("cache err", ((a - b).abs().max() / a.abs().max()).item())
        assert (a - b).abs().max() < (2e-3 if dtype == torch.float32 else 0.02) * a.abs().max()
    print("fused", dtype, "top err", err, "kit aten ops", len(kit[6]), "fused kernels", len(fused[5]))
    assert len(fused[5]) == 3 + 9 * cfg.layers, fused[5]
    # aten ops besides the interpreter's own (copy_, set_, new_empty), allocations and views
    kit_ops, fused_ops = ([name for name in ops if name not in NOT_KERNELS] for ops in (kit[6], fused[6]))
    print("aten ops a step: kit", len(kit_ops), "fused", fused_ops)
    assert not fused_ops and len(kit_ops) >= 45, (fused_ops, len(kit_ops))

# attention: masked to each row's position (the keys after it hold garbage), against SDPA
gen = torch.Generator().manual_seed(2)
for dtype in (torch.float32, torch.bfloat16):
    rows, kvh, groups, dim, slots = 3, 2, 4, 64, 300
    q = torch.randn(rows, kvh * groups, dim, generator=gen).to(dtype)
    k, v = (torch.randn(rows, kvh, slots, dim, generator=gen).to(dtype) for _ in range(2))
    pos = torch.tensor([5, 299, 170])
    def attend(pos):
        parts, ml = torch.empty(rows * kvh * groups * 4, dim), torch.empty(rows * kvh * groups * 4, 2)
        _attend[(rows * kvh, 4)](q, k, v, pos, parts, ml, slots, math.log2(math.e) / dim**0.5, KV_HEADS=kvh,
                                 GROUPS=groups, G_PAD=16, D=dim, SPLIT_LEN=128, BLOCK_N=64)
        out = torch.empty(rows, kvh * groups, dim, dtype=dtype)
        _combine[(rows * kvh * groups,)](parts, ml, torch.ones(kvh), out, KV_HEADS=kvh, SPLITS=4, GROUPS=groups, D=dim)
        return out.float().view(rows, kvh, groups, dim)
    visible = torch.arange(slots)[None, :] <= pos[:, None]
    ref = F.scaled_dot_product_attention(q.float().view(rows, kvh, groups, dim), k.float(), v.float(),
                                         attn_mask=visible[:, None, None])
    torch.testing.assert_close(attend(pos), ref, rtol=0.02, atol=0.02)
    assert (attend(torch.full((rows,), slots - 1)) - ref).abs().max() > 0.1  # unmasked: another answer

# top-k with feedback against torch.topk (distinct values)
logits = torch.randperm(1000, generator=gen).float().view(2, 500) / 7
top, nxt, tok, pos = torch.zeros(2, 4), torch.zeros(2, dtype=torch.long), torch.zeros(2, dtype=torch.long), torch.tensor([3, 9])
_top_feedback[(2,)](logits, top, nxt, tok, pos, 500, TOP=4, BLOCK=512)
values, indices = logits.topk(4)
assert torch.equal(top, values) and torch.equal(nxt, indices[:, 0]) and torch.equal(tok, nxt) and pos.tolist() == [4, 10]

# SwiGLU in the GEMV's x load, K split and not
for n, k in ((64, 256), (384, 128)):
    w8, scale = quantize_rows(torch.randn(n, k, generator=gen))
    x = torch.randn(8, 2 * k, generator=gen)
    act = (F.silu(x[:, :k]) * x[:, k:]).half().float()
    ref = act.double() @ (w8.view(torch.float8_e4m3fn).double() * scale.double()[:, None]).T
    out = gemv_launch(x, w8.view(torch.float8_e4m3fn), scale, True, glu=True)
    assert out.dim() == 3 and out.dtype == torch.float32
    got = out.sum(0).double() * scale.double()
    assert ((got - ref).abs().max() / ref.abs().max()).item() < 1e-3, (n, k)
print("interpreted ok")
"""


def test_fused_decode_step_matches_the_kits_step_under_the_interpreter(interpreted: dict) -> None:
    """``_fused``'s step against the kit's (the ``_gemv`` variant's) from the same prefilled cache, rows
    at different positions, in fp32 (to ~1e-4) and bf16 (the same tokens, cache and positions; top
    logits within bf16 rounding): 21 kernels a step against >= 60 aten ops; the masked attention
    against SDPA (and not the unmasked one), the top-k kernel against torch.topk, the SwiGLU GEMV
    against fp64."""
    assert_ran(interpreted, "fused", "interpreted ok")


BF16 = "*bf16"
FUSED_KERNELS = {  # kernel: (signature, constexprs, options, integer arguments the launcher sees as multiples of 16)
    "_add_norm": ({"p_ptr": "*fp32", "s_ptr": "*fp32", "x_ptr": BF16, "tok_ptr": "*i64", "w_ptr": BF16, "xo_ptr": BF16,
                   "xn_ptr": BF16, "MN": "i32", "N": "i32", "eps": "fp32"}, {"SPLITS": 8, "EMBED": False, "BLOCK": 4096},
                  {"num_warps": 8}, ("MN", "N")),
    "_rope_cache": ({"p_ptr": "*fp32", "s_ptr": "*fp32", "pos_ptr": "*i64", "q_ptr": BF16, "k_ptr": BF16, "v_ptr": BF16,
                     "MN": "i32", "N": "i32", "max_len": "i32", "log2_base": "fp32"},
                    {"SPLITS": 8, "HEADS": 32, "KV_HEADS": 8, "D": 128}, {"num_warps": 1}, ("MN", "N")),
    "_attend": ({"q_ptr": BF16, "k_ptr": BF16, "v_ptr": BF16, "pos_ptr": "*i64", "o_ptr": "*fp32", "ml_ptr": "*fp32",
                 "max_len": "i32", "qk_scale": "fp32"},
                {"KV_HEADS": 8, "GROUPS": 4, "G_PAD": 16, "D": 128, "SPLIT_LEN": 128, "BLOCK_N": 64},
                {"num_warps": 4, "num_stages": 2}, ()),
    "_top_feedback": ({"logits_ptr": BF16, "top_ptr": "*fp32", "next_ptr": "*i64", "tok_ptr": "*i64", "pos_ptr": "*i64",
                       "V": "i32"}, {"TOP": 4, "BLOCK": 32768}, {"num_warps": 16}, ("V",)),
}


@pytest.mark.parametrize("name", sorted(FUSED_KERNELS))
def test_sm90_fused_decode_kernels_compile_without_spills(name: str) -> None:
    """The ``_fused`` step's kernels as the pair launches them (width 4096, 32 + 2 x 8 heads of 128,
    529 cache slots, 32,000 logits): no local memory; no stack except RoPE's 32 bytes, libdevice's
    cosf/sinf slow path for arguments beyond pi (the kernel reduces the angles into [-pi, pi] first)."""
    sig, consts, options, divisible = FUSED_KERNELS[name]
    compiled = compile_sm90(f"ch16/ch16_fused_decode:{name}", sig, consts, options, divisible=divisible)
    if name == "_rope_cache":
        usage = resource_usage(compiled)
        assert usage["LOCAL"] == 0 and usage["STACK"] <= 32, usage
    else:
        fits_sm90(compiled)


def test_sm90_swiglu_gemv_keeps_the_weight_path() -> None:
    """The down projection's GEMV with SwiGLU in its x load: the same 16-byte weight copies, e4m3
    widening and 8-column MMAs as without, no spills, and at most half a block's shared memory (two
    programs an SM: its 256 programs in one wave on 132 SMs)."""
    cfg = gemv_module().CONFIG
    consts = {"ROWS": 8, "PARTIAL": True, "BLOCK_N": cfg.block_n, "BLOCK_K": cfg.block_k, "GLU": True}
    compiled = compile_sm90("ch16/ch16_fp8_gemv:_gemv_fp8", GEMV_SIG | {"y_ptr": "*fp32"}, consts,
                            {"num_warps": cfg.warps, "num_stages": cfg.stages}, divisible=("N", "K", "K_SPLIT"))
    fits_sm90(compiled)
    assert compiled.metadata.shared <= SMEM_PER_BLOCK / 2, compiled.metadata.shared
    sass = cuobjdump(compiled, "-sass")
    assert "LDGSTS.E.BYPASS.128" in sass and "F2FP.F16.E4M3.UNPACK_B" in sass and "HMMA.16816.F32" in sass


PUSH = """
import sys, torch
sys.path.insert(0, "ch16")
from ch16_tp_push import _push_norm, _push_top, SPINS
torch.manual_seed(0)
rows, dim, vocab, lo, hi = 3, 40, 300, 150, 300
part, theirs, x0, w = torch.randn(rows, dim), torch.randn(rows, dim), torch.randn(rows, dim), torch.randn(dim)
box, peer_box, x, xn = theirs.clone(), torch.zeros(rows, dim), x0.clone(), torch.empty(rows, dim)
pads, peer_pads = torch.ones(rows, dtype=torch.int32), torch.zeros(rows, dtype=torch.int32)  # the peer has pushed
err = torch.zeros(1, dtype=torch.int32)
_push_norm[(rows,)](part, box, peer_box, pads, peer_pads, err, x, w, xn, dim, 1e-5, SPINS=SPINS, BLOCK=64)
ref = x0 + (part + theirs)
assert torch.equal(peer_box, part) and torch.equal(x, ref), (x - ref).abs().max()
torch.testing.assert_close(xn, torch.nn.functional.rms_norm(ref, (dim,), w, 1e-5), rtol=1e-5, atol=1e-5)
assert pads.tolist() == [0] * rows and peer_pads.tolist() == [1] * rows and err.item() == 0  # flags consumed, sent

logits, peer_logits = torch.randn(rows, vocab), torch.zeros(rows, vocab)  # peer's columns [0, 150) pushed here
pads.fill_(1)
peer_pads.zero_()
tops, nxt, tok, pos = torch.empty(rows, 4), torch.empty(rows, dtype=torch.long), torch.empty(rows, dtype=torch.long), torch.full((rows,), 7)
_push_top[(rows,)](logits, peer_logits, pads, peer_pads, err, tops, nxt, tok, pos, vocab, lo, hi, SPINS=SPINS, TOP=4, BLOCK=512)
assert torch.equal(peer_logits[:, lo:hi], logits[:, lo:hi]) and not peer_logits[:, :lo].any()  # only its own columns
values, index = logits.topk(4)
assert torch.equal(tops, values) and torch.equal(nxt, index[:, 0]) and torch.equal(tok, nxt) and pos.tolist() == [8] * rows
assert pads.tolist() == [0] * rows and peer_pads.tolist() == [1] * rows and err.item() == 0

pads.zero_()
peer_pads.zero_()  # a flag that never comes: the programs give up, set err; later waits are skipped
_push_norm[(rows,)](part, box, peer_box, pads, peer_pads, err, x, w, xn, dim, 1e-5, SPINS=50, BLOCK=64)
assert err.item() == 1
print("interpreted ok")
"""


def test_push_all_reduce_kernels_under_the_interpreter(interpreted: dict) -> None:
    """``ch16_tp_push``'s kernels on one process, the peer's side staged as it leaves it (its partial in
    this rank's inbox, its flags set): the push lands in the peer's buffer (the head: only this rank's
    columns), the sum + residual + RMSNorm and the top 4 match torch, each flag is consumed and the
    peer's sent; a flag that never comes sets ``err`` instead of spinning forever."""
    assert_ran(interpreted, "push", "interpreted ok")


TP_KERNELS = {  # "module:kernel": (signature, constexprs, options, divisible), as the tp pair's 2-way step launches them
    "ch16_tp_push:_push_norm": ({"part_ptr": BF16, "box_ptr": BF16, "peer_box_ptr": BF16, "pad_ptr": "*i32",
                                 "peer_pad_ptr": "*i32", "err_ptr": "*i32", "x_ptr": BF16, "w_ptr": BF16, "xn_ptr": BF16,
                                 "N": "i32", "eps": "fp32"}, {"SPINS": 1 << 23, "BLOCK": 8192}, {"num_warps": 8}, ("N",)),
    "ch16_tp_push:_push_top": ({"logits_ptr": BF16, "peer_ptr": BF16, "pad_ptr": "*i32", "peer_pad_ptr": "*i32",
                                "err_ptr": "*i32", "top_ptr": "*fp32", "next_ptr": "*i64", "tok_ptr": "*i64",
                                "pos_ptr": "*i64", "V": "i32", "lo": "i32", "hi": "i32"},
                               {"SPINS": 1 << 23, "TOP": 4, "BLOCK": 32768}, {"num_warps": 16}, ("V", "lo", "hi")),
    "ch16_fused_decode:_add_norm": (FUSED_KERNELS["_add_norm"][0], {"SPLITS": 1, "EMBED": True, "BLOCK": 8192},
                                    {"num_warps": 8}, ("MN", "N")),
    "ch16_fused_decode:_rope_cache": (FUSED_KERNELS["_rope_cache"][0], {"SPLITS": 1, "HEADS": 32, "KV_HEADS": 4, "D": 128},
                                      {"num_warps": 1}, ("MN", "N")),
    "ch16_fused_decode:_attend": (FUSED_KERNELS["_attend"][0], FUSED_KERNELS["_attend"][1] | {"KV_HEADS": 4, "GROUPS": 8},
                                  {"num_warps": 4, "num_stages": 2}, ()),
    "ch16_fp8_kv:_combine": ({"o_ptr": "*fp32", "ml_ptr": "*fp32", "vs_ptr": "*fp32", "out_ptr": BF16},
                             {"KV_HEADS": 4, "SPLITS": 8, "GROUPS": 8, "D": 128}, {"num_warps": 4}, ()),
    "ch16_tp_fused:_glu": ({"gu_ptr": BF16, "out_ptr": BF16, "F": "i32"}, {"BLOCK": 1024}, {"num_warps": 4}, ("F",)),
}


def tp_kernel(name: str, pdl: bool = False):
    """A kernel of the tp pair's 2-way step (``TP_KERNELS``) compiled for sm_90; ``pdl``: as ``_push_pdl``
    launches it (PDL=True, launch_pdl)."""
    sig, consts, options, divisible = TP_KERNELS[name]
    if pdl:
        consts, options = consts | {"PDL": True}, options | {"launch_pdl": True}
    return compile_sm90(f"ch16/{name}", sig, consts, options, divisible=divisible)


def test_push_kernels_compile_for_sm90_with_system_scope_flags() -> None:
    """The push kernels at the pair's shapes compile for sm_90 without spills; their flags are
    system-scope atomics (release to the peer, acquire on its own), polled by one thread."""
    for kernel in (tp_kernel("ch16_tp_push:_push_norm"), tp_kernel("ch16_tp_push:_push_top")):
        fits_sm90(kernel)
        ptx = kernel.asm["ptx"]
        assert "atom.global.release.sys.cas.b32" in ptx and "atom.global.acquire.sys.cas.b32" in ptx


def pre_wait_loads(ptx: str, params: list[str]) -> list[set[str]]:
    """For each global load before ``griddepcontrol.wait`` in ``ptx``, the kernel parameters (names from
    ``params``, the runtime arguments in order) its address derives from, by following each register
    back to the ``ld.param`` it came from. Asserts the wait is there, ``launch_dependents`` before it,
    and no global store or atomic before it."""
    assert "griddepcontrol.wait" in ptx and "griddepcontrol.launch_dependents" in ptx
    head = ptx[:ptx.index("griddepcontrol.wait")]
    assert "griddepcontrol.launch_dependents" in head and not re.search(r"\b(st|atom|red)\.global", head)
    roots: dict[str, set[str]] = {}
    loads = []
    for op, args in re.findall(r"^\s*(?:@!?%p\d+\s+)?([a-z][\w.]*)\s+([^;]*);", head, re.M):
        regs = re.findall(r"%\w+", args)
        if op.startswith("ld.param"):
            roots[regs[0]] = {params[int(re.search(r"_param_(\d+)", args).group(1))]}
        elif op.startswith("ld.global"):
            loads.append(roots.get(re.search(r"\[\s*(%\w+)", args).group(1), {"?"}))
        elif regs:
            roots[regs[0]] = set().union(*(roots.get(r, set()) for r in regs[1:]))
    return loads


@pytest.mark.parametrize("name", sorted(TP_KERNELS))
def test_pdl_kernels_wait_before_they_read_a_predecessors_output(name: str) -> None:
    """``_push_pdl``'s kernels compiled as it launches them (PDL=True): each lets its successor launch
    (``griddepcontrol.launch_dependents``, SASS PREEXIT) before its wait (``griddepcontrol.wait``,
    ACQBULK); before the wait it loads only the norm weights (``w_ptr``: no kernel writes them; the
    two norm kernels) and stores, pushes, sets or polls nothing, and ptxas moved no load above it; no
    spills (RoPE: its 32 bytes of libdevice stack, as without PDL). At PDL=False (every other pair's
    launch) neither instruction is there."""
    compiled = tp_kernel(name, pdl=True)
    usage = resource_usage(compiled)
    assert usage["LOCAL"] == 0 and usage["STACK"] <= (32 if name.endswith("_rope_cache") else 0), usage
    loads = pre_wait_loads(compiled.asm["ptx"], list(TP_KERNELS[name][0]))
    weights = name.endswith(("_push_norm", "_add_norm"))
    assert loads and all(roots == {"w_ptr"} for roots in loads) if weights else not loads, loads
    sass = cuobjdump(compiled, "-sass")
    head = sass[:sass.index("ACQBULK")]
    assert "PREEXIT" in head and not re.search(r"\b(STG|ATOMG|ATOM|RED)\b", head)
    assert len(re.findall(r"\bLDG\b", head)) == len(loads), head
    plain = tp_kernel(name).asm["ptx"]
    assert "griddepcontrol" not in plain
