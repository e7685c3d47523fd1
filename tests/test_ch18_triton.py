"""Chapter 18's Triton pairs without a GPU (flash_attention_triton, split_kv_decode,
paged_attention_decode, fused_rope_kv_write, mla_absorption's fused variants and flex_document_mask's
Triton variant): every variant
matches its baseline on a CPU under TRITON_INTERPRET=1 at small fp32 sizes (two seeds, another
seed's answer rejected, refilled inputs); the kernels match fp64 references on the cases the pairs
do not reach (non-causal, one split, ragged page tails, slices past a row's end, a skipped latent
slice rejected); every pair file documents itself and skips on a CPU with the reason; and the
kernels' sm_90 code (compiled without a GPU) multiplies on the tensor cores (wgmma for the prefill
kernel) and the latent kernel fits without spills.

The interpreted scripts first apply triton_cpu.INTERPRETER_FIX (the Triton 3.6 interpreter's int()
of one-element numpy arrays), so loops whose bounds depend on the program id run there."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path
from types import ModuleType

import pytest
import torch
from ci_triton_scripts import assert_ran, run_scripts
from conftest import variant_modules
from triton_cpu import (
    INTERPRETER_FIX,
    SMEM_PER_BLOCK,
    assert_tma_and_wgmma,
    compile_sm90,
    cuobjdump,
    ex2_while_wgmma_in_flight,
    fits_sm90,
    key_loop_events,
    ptxas_advisories,
    wgmma_serialized,
)

from aisp.harness.benchmark import unmet_requirements
from aisp.harness.loader import import_module_at

triton = pytest.importorskip("triton")
ROOT = Path(__file__).resolve().parents[1]
CH18 = ROOT / "ch18"
PAIRS = ("flash_attention_triton", "split_kv_decode", "paged_attention_decode", "fused_rope_kv_write")
OTHER_PAIRS = tuple(("baseline_mla_absorption", f"optimized_mla_absorption{v}") for v in ("_fused", "_fused_qo", "_graph",
                                                                                                  "_wgmma"))
OTHER_PAIRS += tuple(("baseline_flex_document_mask", f"optimized_flex_document_mask_triton{v}") for v in ("", "_grouped"))
"""Triton variants of the chapter's PyTorch pairs (whose other variants test_ch18_pairs.py checks)."""
OWN_FILES = ("ch18_attention", "ch18_decode", "ch18_rope", *(f"{s}_{p}" for p in PAIRS for s in ("baseline", "optimized")),
             "optimized_flash_attention_triton_sdpa", "optimized_flash_attention_triton_cudnn", "ch18_attention_tma",
             "optimized_flash_attention_triton_tma", "ch18_attention_pipelined", "optimized_flash_attention_triton_pipelined",
             "ch18_attention_ws", "optimized_flash_attention_triton_ws", "ch18_attention_pvwait",
             "optimized_flash_attention_triton_pvwait", "ch18_attention_ahead", "optimized_flash_attention_triton_ahead",
             "ch18_attention_hostdesc", "optimized_flash_attention_triton_hostdesc",
             "ch18_mla_kernel", "ch18_mla_query", "ch18_mla_wgmma", *(o for _, o in OTHER_PAIRS))

PRELUDE = INTERPRETER_FIX + f"""
import dataclasses, sys
import torch
import torch.nn.functional as F
CH18 = {str(CH18)!r}
sys.path[:0] = [CH18, {str(ROOT / "tests")!r}]
"""

PAIR_SCRIPT = PRELUDE + """
from pathlib import Path
import pytest
import aisp
from refill_check import check_pair
from aisp.harness.loader import import_module_at

SMALL = {"flash_attention_triton": dict(batch=1, heads=2, seq=64, head_dim=32),
         "split_kv_decode": dict(rows=2, kv_heads=2, groups=3, head_dim=32, context=256, splits=4),
         "paged_attention_decode": dict(rows=3, kv_heads=2, groups=3, head_dim=32, shortest=70, longest=300,
                                        split_len=128),
         "fused_rope_kv_write": dict(tokens=4, heads=4, kv_heads=2, head_dim=32, max_len=64),
         "mla_absorption": dict(batch=2, context=200, dim=128, heads=4, latent=64, nope=32, rope=16, v_dim=32),
         # two 128-row blocks a row (the kit's tiles), documents of ~64 tokens up to the whole row
         "flex_document_mask": dict(batch=2, seq=256, heads=2, head_dim=32, median_doc=64, longest=256)}

def build(module, seed):
    bench = import_module_at(Path(CH18) / f"{module}.py").get_benchmark()
    bench.device, bench.seed = torch.device("cpu"), seed
    name = next(p for p in SMALL if p in module)
    bench.workload = dataclasses.replace(bench.workload, **SMALL[name])
    return bench

for base, opt in PAIRS:
    if opt.endswith("_cudnn"):
        with pytest.raises(aisp.Unavailable):
            build(opt, 0).setup()
        continue
    check_pair(build, base, opt)
    print("verified", opt)
print("interpreted ok")
"""

KERNEL_SCRIPT = PRELUDE + """
from aisp.kits.llm.rope import apply_rope, rope_tables, rotation
from aisp.kits.llm import LLMConfig
from ch18_attention import flash_attention
from ch18_decode import decode_attention, paged_decode_attention
from ch18_rope import rope_kv_write
gen = torch.Generator().manual_seed(7)
def close(out, ref, tol=2e-5):
    err = (out.double() - ref).abs().max().item()
    assert err < tol, err

for causal, blocks in ((False, (32, 16)), (True, (64, 32)), (True, (32, 32))):
    q, k, v = (torch.randn(2, 2, 128, 32, generator=gen) for _ in range(3))
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
    close(flash_attention(q, k, v, causal, blocks), ref)

q = torch.randn(2, 2, 5, 32, generator=gen)
k, v = (torch.randn(2, 2, 256, 32, generator=gen) for _ in range(2))
ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double())
for splits in (1, 2):
    close(decode_attention(q, k, v, splits), ref)

lens = torch.tensor([300, 17, 64], dtype=torch.int32)  # a ragged tail, one row inside a page, one exact tile
need = [(int(n) + 15) // 16 for n in lens]
pages = (torch.randperm(sum(need), generator=gen) + 1).tolist()
table = torch.zeros(3, max(need), dtype=torch.long)
for r, n in enumerate(need):
    table[r, :n] = torch.tensor(pages[sum(need[:r]):sum(need[:r + 1])])
kp, vp = (torch.randn(1 + sum(need), 2, 16, 32, generator=gen) for _ in range(2))
q = torch.randn(3, 2, 5, 32, generator=gen)
out = paged_decode_attention(q, kp, vp, table, lens, split_len=128)  # rows 1 and 2 leave slices empty
for r, n in enumerate(lens.tolist()):
    kk, vv = (p[table[r, :need[r]]].transpose(0, 1).reshape(2, -1, 32)[:, :n].double() for p in (kp, vp))
    close(out[r], F.scaled_dot_product_attention(q[r].double(), kk, vv))

cfg = LLMConfig(dim=4 * 32, heads=4, kv_heads=2, layers=1)
qkv = torch.randn(3, 8 * 32, generator=gen)
pos = torch.tensor([5, 0, 63])
cos, sin = rotation(cfg, torch.arange(64), torch.float32)
kc, vc = torch.zeros(3, 2, 64, 32), torch.zeros(3, 2, 64, 32)
qo = rope_kv_write(qkv, pos, cos, sin, kc, vc, heads=4)
heads = qkv.view(3, 8, 32)
c, s = rope_tables(cfg, pos[None])
rot = apply_rope(heads[None, :, :6], c, s)[0]
close(qo, rot[:, :4])
close(kc[torch.arange(3), :, pos], rot[:, 4:])
close(vc[torch.arange(3), :, pos], heads[:, 6:])
assert kc.count_nonzero() == 3 * 2 * 32, "wrote outside the tokens' slots"
print("kernels ok")
"""


MLA_SCRIPT = PRELUDE + """
import math
import pytest
from ch18_decode import _merge
from ch18_mla_kernel import BLOCK_N, H_PAD, SliceConfig, _slice, latent_attention
from ch18_mla_query import absorbed_query
gen = torch.Generator().manual_seed(5)
def reference(q, cache, rope, scale):
    p = torch.softmax(q.double() @ cache.double().transpose(1, 2) * scale, -1)
    return p @ cache.double()[..., :cache.shape[2] - rope]
def error(out, ref):
    return (out.double() - ref).abs().max().item()
def inputs(b, h, lat, rope, ctx):
    return torch.randn(b, h, lat + rope, generator=gen), torch.randn(b, ctx, lat + rope, generator=gen)

# (batch, heads, latent, rope, context, splits): the pair's 16 heads of 512 + 64; a ragged last tile and
# empty slices; one slice; fewer heads than the padded tile; a context shorter than one tile
for b, h, lat, rope, ctx, splits in ((2, 16, 512, 64, 96, 2), (3, 4, 64, 16, 200, 16), (2, 5, 64, 32, 256, 1),
                                     (1, 3, 32, 16, 7, 4)):
    q, cache = inputs(b, h, lat, rope, ctx)
    err = error(latent_attention(q, cache, rope, 0.3, splits), reference(q, cache, rope, 0.3))
    assert err < 2e-5, (b, h, lat, rope, ctx, splits, err)
# the sweep's other tile heights (kernel_sweep.mla_settings): slices, ragged tails and empty slices in their units
q, cache = inputs(3, 4, 64, 16, 200)
for config in (SliceConfig(16, 4, 4), SliceConfig(64, 2, 8)):
    for splits in (1, 2, 16):
        err = error(latent_attention(q, cache, 16, 0.3, splits, config), reference(q, cache, 16, 0.3))
        assert err < 2e-5, (config, splits, err)

# the kernels' own launch, then the last slice's partial emptied (max -inf, sum 0), as if never run:
# the merge of all slices matches, the merge without the last one is rejected
b, h, lat, rope, splits = 2, 4, 64, 16, 4
q, cache = inputs(b, h, lat, rope, splits * BLOCK_N)
parts, ml = torch.empty(b * splits * h, lat), torch.empty(b * splits * h, 2)
_slice[(b, splits)](q, cache, parts, ml, cache.shape[1], 0.3 * math.log2(math.e), SPLIT_LEN=BLOCK_N, HEADS=h,
                    H_PAD=H_PAD, LATENT=lat, ROPE=rope, BLOCK_N=BLOCK_N)
ref = reference(q, cache, rope, 0.3)
for skip in (False, True):
    if skip:
        last = parts.view(b, splits, h, lat)[:, -1], ml.view(b, splits, h, 2)[:, -1]
        last[0].zero_()
        last[1].copy_(torch.tensor([float("-inf"), 0.0]))
    out = torch.empty(b, h, lat)
    _merge[(b * h,)](parts, ml, out, SPLITS=splits, GROUPS=h, D=lat)
    assert (error(out, ref) > 1e-2) == skip, (skip, error(out, ref))

# the wgmma kernel (keys as the tile's rows, a 3-D TMA descriptor): the same cases at 64 and 16 keys a tile;
# a context past the last tile (TMA rows past ctx read as 0, never the next sequence's), one slice, empty slices
from ch18_mla_wgmma import TokenConfig, latent_attention_t
for b, h, lat, rope, ctx, splits in ((2, 16, 512, 64, 96, 2), (3, 4, 64, 16, 200, 16), (2, 5, 64, 32, 256, 1),
                                     (1, 3, 32, 16, 7, 4)):
    q, cache = inputs(b, h, lat, rope, ctx)
    for config in (TokenConfig(), TokenConfig(16, 1, 4)):
        err = error(latent_attention_t(q, cache, rope, 0.3, splits, config), reference(q, cache, rope, 0.3))
        assert err < 2e-5, (b, h, lat, rope, ctx, splits, config, err)
q, cache = inputs(2, 4, 64, 16, 100)
cache[1, :28] = float("nan")  # the second sequence's first rows: the first's ragged last tile must not read them
one = latent_attention_t(q, cache, 16, 0.3, 2)[0]
assert error(one, reference(q[:1], cache[:1], 16, 0.3)[0]) < 2e-5
with pytest.raises(ValueError, match="latent_attention_t"):
    latent_attention_t(torch.randn(1, 4, 80), torch.randn(1, 64, 80), 16, 0.3, 3)

for bad in ((torch.randn(1, 17, 80), torch.randn(1, 64, 80), 16, 3), (torch.randn(1, 4, 80), torch.randn(1, 64, 80), 16, 3),
            (torch.randn(1, 4, 88), torch.randn(1, 64, 88), 24, 2)):
    with pytest.raises(ValueError, match="latent_attention"):
        latent_attention(bad[0], bad[1], bad[2], 0.3, bad[3])  # 17 heads; 3 slices; a 24-wide rope

# the absorbed query: (batch, heads, nope, rope, latent) the pair's heads of 128 + 64 into 512 over two batch
# blocks (a short second one), 2 of its 16 (each head's programs run the same code at another offset); a small
# one; one head, one row, one latent block
for b, h, nope, rope, lat in ((40, 2, 128, 64, 512), (3, 4, 32, 16, 64), (1, 1, 16, 16, 128)):
    q, w_uk = torch.randn(b, h * (nope + rope), generator=gen), torch.randn(h, nope, lat, generator=gen)
    cos, sin = torch.randn(rope, generator=gen), torch.randn(rope, generator=gen)
    q_nope, q_rope = q.double().view(b, h, -1).split([nope, rope], -1)
    swapped = torch.cat([-q_rope[..., rope // 2:], q_rope[..., :rope // 2]], -1)
    ref = torch.cat([torch.einsum("bhk,hkl->bhl", q_nope, w_uk.double()), q_rope * cos.double() + swapped * sin.double()], -1)
    assert error(absorbed_query(q, w_uk, cos, sin, rope), ref) < 1e-4, (b, h, nope, rope, lat)
    assert error(absorbed_query(q, w_uk, sin, cos, rope), ref) > 1e-2  # cos and sin swapped: rejected
with pytest.raises(ValueError, match="absorbed_query"):
    absorbed_query(torch.randn(2, 4 * 48), torch.randn(4, 32, 64), torch.randn(16), torch.randn(16), 24)

print("mla ok")
"""


TMA_SCRIPT = PRELUDE + """
import pytest
from ch18_attention_tma import head_group
from {module} import {function} as attention
gen = torch.Generator().manual_seed(11)
# (causal, blocks, shape, heads a group): a short last group (6 heads by 4), one head a group, the default,
# one key tile (the pipelined loop's peeled steps alone)
for causal, blocks, shape, group in ((False, (32, 16), (2, 3, 128, 32), 4), (True, (64, 32), (2, 3, 128, 32), 4),
                                     (True, (32, 32), (1, 2, 128, 32), None), (True, (32, 16), (3, 1, 64, 32), 1),
                                     (False, (32, 32), (1, 2, 32, 32), None)):
    q, k, v = (torch.randn(*shape, generator=gen) for _ in range(3))
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
    err = (attention(q, k, v, causal, blocks, group).double() - ref).abs().max().item()
    assert err < 2e-5, (causal, blocks, shape, group, err)
assert head_group(torch.empty(4, 32, 4096, 128, dtype=torch.bfloat16, device="meta")) == 8
assert head_group(torch.empty(1, 2, 64, 32, device="meta")) == 2
with pytest.raises(ValueError, match="{function}: .*16 bytes"):
    attention(*(torch.randn(1, 1, 64, 2) for _ in range(3)))  # 8-byte rows: no TMA
print("tma ok")
"""
TMA_KERNELS = {"tma": ("ch18_attention_tma", "flash_attention_tma", "_key_tiles"),
               "pipelined": ("ch18_attention_pipelined", "flash_attention_pipelined", "_key_tiles_pipelined"),
               "ws": ("ch18_attention_ws", "flash_attention_ws", "_key_tiles_ws"),
               "pvwait": ("ch18_attention_pvwait", "flash_attention_pvwait", "_key_tiles_pvwait"),
               "ahead": ("ch18_attention_ahead", "flash_attention_ahead", "_key_tiles_ahead")}
"""The descriptor kernel's variants: module, public function, key loop."""
ONE_LOOP = {"ws", "ahead"}
"""Variants whose key loop walks the causal diagonal block too (``KeyLoop.one_loop``)."""


def own_pairs() -> list[tuple[str, str]]:
    found = variant_modules(CH18)
    return [(b, o) for b, o in found if b.removeprefix("baseline_") in PAIRS] + [p for p in OTHER_PAIRS if p in found]


def test_every_variant_is_discovered() -> None:
    found = {o for _, o in own_pairs()}
    assert found == {f"optimized_{p}" for p in PAIRS} | {"optimized_flash_attention_triton_sdpa",
                                                          "optimized_flash_attention_triton_cudnn",
                                                          "optimized_flash_attention_triton_tma",
                                                          "optimized_flash_attention_triton_pipelined",
                                                          "optimized_flash_attention_triton_ws",
                                                          "optimized_flash_attention_triton_pvwait",
                                                          "optimized_flash_attention_triton_ahead",
                                                          "optimized_flash_attention_triton_hostdesc",
                                                          *(o for _, o in OTHER_PAIRS)}


def test_pairs_verify_under_the_triton_interpreter(interpreted: dict) -> None:
    assert_ran(interpreted, "pairs", "interpreted ok")


def test_kernels_match_fp64_references(interpreted: dict) -> None:
    assert_ran(interpreted, "kernels", "kernels ok")


def test_latent_kernel_matches_fp64_reference_and_a_skipped_slice_is_rejected(interpreted: dict) -> None:
    assert_ran(interpreted, "mla", "mla ok")


def tma_script(variant: str) -> str:
    module, function, _ = TMA_KERNELS[variant]
    return TMA_SCRIPT.replace("{module}", module).replace("{function}", function)


@pytest.mark.parametrize("variant", TMA_KERNELS)
def test_tma_kernel_matches_fp64_reference_under_the_interpreter(variant: str, interpreted: dict) -> None:
    """The descriptor kernel with each key loop, causal or not, in grouped launch orders that include a
    short last group, and over a single key tile."""
    assert_ran(interpreted, f"tma[{variant}]", "tma ok")


HOSTDESC_SCRIPT = TMA_SCRIPT.replace("{module}", "ch18_attention_hostdesc").replace(
    "{function}", "flash_attention_hostdesc").replace('print("tma ok")', """
from ch18_attention_ahead import flash_attention_ahead
for causal, blocks, shape, group in ((True, (64, 32), (2, 3, 128, 32), 4), (False, (32, 16), (1, 2, 64, 32), None)):
    q, k, v = (torch.randn(*shape, generator=gen) for _ in range(3))
    assert torch.equal(attention(q, k, v, causal, blocks, group), flash_attention_ahead(q, k, v, causal, blocks, group))
    wrong = attention(q, k, v, not causal, blocks, group)  # the other mask's answer is told apart
    assert not torch.allclose(wrong, flash_attention_ahead(q, k, v, causal, blocks, group), atol=1e-3)
print("tma ok")
""")


def test_hostdesc_kernel_matches_fp64_and_aheads_bits_under_the_interpreter(interpreted: dict) -> None:
    """The ahead kernel over host-made descriptors: ``TMA_SCRIPT``'s cases against fp64 (causal or not, a
    short last head group, one head a group, one key tile), then bit for bit ``_ahead``'s output (causal in
    head groups, and non-causal), the other mask's output rejected."""
    assert_ran(interpreted, "hostdesc", "tma ok")


@pytest.fixture(scope="module")
def interpreted() -> dict[str, subprocess.CompletedProcess]:
    """The scripts above under the interpreter, in forks of one process that imported torch and triton once
    for all nine (tests/ci_triton_scripts.py)."""
    scripts = {"pairs": f"PAIRS = {own_pairs()!r}\n" + PAIR_SCRIPT, "kernels": KERNEL_SCRIPT, "mla": MLA_SCRIPT,
               **{f"tma[{variant}]": tma_script(variant) for variant in TMA_KERNELS}, "hostdesc": HOSTDESC_SCRIPT}
    return run_scripts(scripts, timeout=600)


@pytest.mark.parametrize(("baseline", "optimized"), own_pairs())
def test_gpu_sized_pairs_skip_on_a_cpu_with_the_reason(baseline: str, optimized: str) -> None:
    workload = import_module_at(CH18 / f"{baseline}.py").WORKLOAD
    reason = unmet_requirements(workload.requires, torch.device("cpu"))
    assert reason and "CUDA" in reason
    assert workload.items > 0 and workload.flops > 0
    assert workload.bytes > 0 or baseline.removeprefix("baseline_") not in PAIRS  # the document pair declares FLOPs only


@pytest.mark.parametrize("stem", OWN_FILES)
def test_pair_file_documents_itself(stem: str) -> None:
    text = (CH18 / f"{stem}.py").read_text()
    # the TMA kernel's module also holds what its variants share (KeyLoop, launch, the softmax steps)
    assert len(text.splitlines()) < (200 if stem == "ch18_attention_tma" else 150)
    doc = ast.get_docstring(ast.parse(text)) or ""
    if stem.startswith(("baseline_", "optimized_")):
        for line in ("Baseline", "Optimized", "Expect", "Run:"):
            assert line in doc, f"{stem} docstring lacks '{line}'"
        assert "not yet measured" in doc or "measured, H200" in doc, f"{stem}: Expect is neither measured nor marked"
        assert not stem.startswith("baseline_") or "Tolerance:" in doc


def sass(kernel: str, sig: dict[str, str], consts: dict[str, int | bool], warps: int, stages: int) -> str:
    """SASS of a ch18 kernel compiled for sm_90 without a GPU."""
    return cuobjdump(compile_sm90(f"ch18/{kernel}", sig, consts, {"num_warps": warps, "num_stages": stages}), "-sass")


def test_sm90_flash_kernel_issues_wgmma() -> None:
    sig = {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "o_ptr": "*bf16", "seq": "i32", "qk_scale": "fp32"}
    code = sass("ch18_attention:_flash_fwd", sig, {"D": 128, "CAUSAL": True, "BLOCK_M": 128, "BLOCK_N": 64}, 8, 3)
    assert "HGMMA" in code, "the flash kernel's products do not use Hopper's wgmma"


TMA_SIG = {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "o_ptr": "*bf16", "n_heads": "i32", "seq": "i32",
           "qk_scale": "fp32"}


def tma_kernel(variant: str, config):
    """``_flash_fwd_tma`` with ``variant``'s key loop at the pair's shape and ``config``, compiled for sm_90."""
    module, _, loop = TMA_KERNELS[variant]
    consts = {"D": 128, "CAUSAL": True, "KEY_LOOP": getattr(import_module_at(CH18 / f"{module}.py"), loop),
              "HEAD_GROUP": 8, "ONE_LOOP": variant in ONE_LOOP} | config.kwargs
    options = {k: v for k, v in config.all_kwargs().items() if k in ("num_warps", "num_stages", "maxnreg") and v}
    return compile_sm90("ch18/ch18_attention_tma:_flash_fwd_tma", TMA_SIG, consts, options)


def tma_configs() -> list:
    return [(variant, config) for variant, (module, _, _) in TMA_KERNELS.items()
            for config in import_module_at(CH18 / f"{module}.py").CONFIGS]


SERIALIZED = {("tma", 64, 128)}
"""(variant, BLOCK_N, register cap) of the configs ptxas serializes (C7512): ``_tma``'s capped one, kept
as measured; ``test_sm90_pvwait_loop_keeps_its_wgmma_asynchronous_at_128_registers`` uses it as control."""


@pytest.mark.parametrize(("variant", "config"), tma_configs(), ids=str)
def test_sm90_tma_flash_kernel_config_compiles_to_wgmma_and_tma_without_spills(variant: str, config) -> None:
    """Each autotune candidate of each key loop at the pair's shape: wgmma (HGMMA), K/V by TMA
    (cp.async.bulk.tensor, no per-thread cp.async), no local memory (spills), within the register cap
    and the shared memory a block may take (a candidate over either fails at launch or crawls), and,
    but for the configs in ``SERIALIZED``, no ptxas advisory (no wgmma serialized)."""
    compiled = tma_kernel(variant, config)
    assert_tma_and_wgmma(compiled, "K/V")
    usage = fits_sm90(compiled)
    assert usage["REG"] <= (config.maxnreg or 255), usage
    advisories = ptxas_advisories(compiled)
    assert bool(advisories) == ((variant, config.kwargs["BLOCK_N"], config.maxnreg) in SERIALIZED), advisories


def test_sm90_pipelined_loop_keeps_the_pv_product_in_flight_across_the_softmax() -> None:
    """The pipelined key loop's point, read in its sm_90 code: Triton leaves the P V wgmma in flight
    while the next tile's exp2s run (PTX: ex2.approx between wgmma.commit_group and wgmma.wait_group),
    ptxas keeps it so (SASS: MUFU.EX2 between the HGMMAs of one group) and does not serialize the
    wgmma. ``_tma``'s loop at the same tiles is the control: its exp2s wait for every product."""
    config = import_module_at(CH18 / "ch18_attention_pipelined.py").CONFIGS[0]
    for variant, overlaps in (("pipelined", True), ("tma", False)):
        compiled = tma_kernel(variant, config)
        sass = cuobjdump(compiled, "-sass")
        assert not wgmma_serialized(sass), variant
        ptx = compiled.asm["ptx"]
        assert ex2_while_wgmma_in_flight(ptx, "wgmma.commit_group", "wgmma.wait_group", "ex2.approx") == overlaps, variant
        assert ex2_while_wgmma_in_flight(sass, "WARPGROUP.ARRIVE", "gsb0", "MUFU.EX2") == overlaps, variant


def test_sm90_ws_loop_splits_into_a_tma_producer_and_two_consumer_warpgroups() -> None:
    """The warp-specialized key loop's point, read in its sm_90 code, for each of its configs (4 warps):
    Triton 3.6 made three warpgroups (12 warps: the producer, two consumers of 64 rows), gave the
    producer fewer registers and the consumers more (setmaxnreg.dec, setmaxnreg.inc), and the
    consumers multiply 64-row tiles (wgmma m64). ``_tma``'s loop at the same config is the control:
    4 warps, no setmaxnreg."""
    for config in import_module_at(CH18 / "ch18_attention_ws.py").CONFIGS:
        compiled = tma_kernel("ws", config)
        ptx = compiled.asm["ptx"]
        assert re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+40;", ptx), config
        assert re.search(r"setmaxnreg\.inc\.sync\.aligned\.u32\s+232;", ptx), config
        assert "wgmma.mma_async.sync.aligned.m64n" in ptx, config
        assert compiled.metadata.num_warps == 12, config
        control = tma_kernel("tma", config)
        assert control.metadata.num_warps == 4 and "setmaxnreg" not in control.asm["ptx"], config


def test_sm90_tma_config_capped_at_128_registers_serializes_its_wgmma() -> None:
    """The serialization check fires: ``_tma``'s 128 x 64 config capped at 128 registers (the one its
    autotuner chose on an H200) makes ptxas wait for every wgmma (advisory C7512, too few registers),
    which the uncapped 128 x 128 config and the uncapped 128 x 64 one (added for that) do not."""
    by_tiles = {(c.kwargs["BLOCK_N"], c.maxnreg): c for c in import_module_at(CH18 / "ch18_attention_tma.py").CONFIGS}
    assert wgmma_serialized(cuobjdump(tma_kernel("tma", by_tiles[64, 128]), "-sass"))
    assert not wgmma_serialized(cuobjdump(tma_kernel("tma", by_tiles[64, None]), "-sass"))
    assert not wgmma_serialized(cuobjdump(tma_kernel("tma", by_tiles[128, None]), "-sass"))


def test_sm90_pvwait_loop_keeps_its_wgmma_asynchronous_at_128_registers() -> None:
    """The pvwait key loop's point, at ``_tma``'s measured config (128 x 64, capped at 128 registers):
    there ptxas reports C7512 for ``_tma``'s loop and serializes its wgmma (a wait after each HGMMA);
    for this loop it reports nothing, the PTX waits for the P V product right after its commit (the
    loop's 2 wgmma groups are waited for inside the iteration), and the SASS waits once a product:
    4 WARPGROUP.DEPBAR for the 24 HGMMAs of the causal kernel's two loops, in 128 registers."""
    config = import_module_at(CH18 / "ch18_attention_pvwait.py").CONFIGS[0]
    assert (config.kwargs["BLOCK_N"], config.maxnreg) == (64, 128)
    control = tma_kernel("tma", config)
    assert any("C7512" in a for a in ptxas_advisories(control))
    assert wgmma_serialized(cuobjdump(control, "-sass"))
    compiled = tma_kernel("pvwait", config)
    assert ptxas_advisories(compiled) == []
    code = cuobjdump(compiled, "-sass")
    assert not wgmma_serialized(code)
    assert code.count("HGMMA.") == 24 and code.count("WARPGROUP.DEPBAR") == 4, code.count("WARPGROUP.DEPBAR")
    assert fits_sm90(compiled)["REG"] <= 128
    lines = [ln.strip() for ln in compiled.asm["ptx"].splitlines() if "wgmma.commit_group" in ln or "wgmma.wait_group" in ln]
    assert lines == ["wgmma.commit_group.sync.aligned;", "wgmma.wait_group.sync.aligned 0;"] * 4, lines


def test_sm90_ahead_loop_waits_for_its_k_tile_after_a_softmax_and_a_product() -> None:
    """The ahead key loop's point, at ``_pvwait``'s config: the loop issues its TMA copies last (Triton's
    pipeliner), and the first copy it then waits for comes after the softmax (V) and the second after the
    P V product (K), where ``_pvwait``'s loop waits for K first thing after issuing it; both wait for each
    product inside the iteration, in 128 registers without a ptxas advisory. The flash sweep starts at
    that config, ``_pvwait``'s then ``_ahead``'s."""
    config = import_module_at(CH18 / "ch18_attention_ahead.py").CONFIGS[0]
    assert config.all_kwargs() == import_module_at(CH18 / "ch18_attention_pvwait.py").CONFIGS[0].all_kwargs()
    own = (config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"], config.num_warps, config.num_stages, config.maxnreg)
    assert sweep().flash_settings()[:2] == [sweep().FlashSetting(v, *own) for v in ("pvwait", "ahead")]
    compiled = tma_kernel("ahead", config)
    assert key_loop_events(compiled.asm["ptx"]) == ["ex2", "wait", "mma", "wait", "mma", "tma"]
    assert key_loop_events(tma_kernel("pvwait", config).asm["ptx"]) == ["wait", "mma", "ex2", "wait", "mma", "tma"]
    assert ptxas_advisories(compiled) == [] and fits_sm90(compiled)["REG"] <= 128


HOST_SIG = {"q_desc": "tensordesc<bf16[128, 128]>", "k_desc": "tensordesc<bf16[64, 128]>",
            "v_desc": "tensordesc<bf16[64, 128]>", "o_desc": "tensordesc<bf16[128, 128]>", "n_heads": "i32", "seq": "i32",
            "qk_scale": "fp32"}
"""``_flash_fwd_host``'s parameters at the pair's tiles (128 x 64), head_dim 128, bf16."""


def key_loops(sass: str) -> list[int]:
    """SASS instructions of each loop whose body holds an HGMMA and no EXIT (a backward branch's span), in
    code order: the key loops, not the mbarrier waits' retry branches (placed past the kernel's EXIT)."""
    at = {int(m.group(1), 16): m.group(2) for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", sass)}
    spans = [(int(m.group(2), 16), int(m.group(1), 16))
             for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\d\s+)?BRA\s+0x([0-9a-f]+)", sass)]
    return [(hi - lo) // 16 + 1 for lo, hi in spans
            if lo < hi and any("HGMMA" in ins for a, ins in at.items() if lo <= a <= hi)
            and not any("EXIT" in ins for a, ins in at.items() if lo <= a <= hi)]


def test_sm90_hostdesc_kernel_keeps_aheads_loop_and_makes_no_descriptor() -> None:
    """``_flash_fwd_host`` at the pair's shape and ``_ahead``'s launch settings: wgmma, Q/K/V by TMA, no
    spills or stack, at most 128 registers, shared memory for two programs an SM, no ptxas advisory, no
    serialized wgmma, ``_ahead``'s key-loop order; no descriptor written on the device (no
    ``tensormap.replace``, no tensormap fence: ``_ahead``, the control, has both), and its off-diagonal key
    loop within 5% of ``_ahead``'s SASS instructions a tile (325 there: 336 here, the parameter descriptors'
    addresses moved to uniform registers at each copy)."""
    hostdesc = import_module_at(CH18 / "ch18_attention_hostdesc.py")
    config = import_module_at(CH18 / "ch18_attention_ahead.py").CONFIGS[0]
    assert hostdesc.TILES == (128, 64) and hostdesc.LAUNCH == {"num_warps": config.num_warps,
                                                               "num_stages": config.num_stages, "maxnreg": config.maxnreg}
    consts = {"CAUSAL": True, "HEAD_GROUP": 8, "BLOCK_M": 128, "BLOCK_N": 64}
    compiled = compile_sm90("ch18/ch18_attention_hostdesc:_flash_fwd_host", HOST_SIG, consts, hostdesc.LAUNCH)
    assert_tma_and_wgmma(compiled, "Q/K/V")
    assert fits_sm90(compiled)["REG"] <= 128
    assert 2 * compiled.metadata.shared <= 228 * 1024, compiled.metadata.shared
    assert ptxas_advisories(compiled) == []
    ptx, code = compiled.asm["ptx"], cuobjdump(compiled, "-sass")
    assert not wgmma_serialized(code)
    assert key_loop_events(ptx) == ["ex2", "wait", "mma", "wait", "mma", "tma"]
    assert "tensormap.replace" not in ptx and "fence.proxy.tensormap" not in ptx
    control = tma_kernel("ahead", config)
    assert "tensormap.replace" in control.asm["ptx"] and "fence.proxy.tensormap" in control.asm["ptx"]
    own, ahead = key_loops(code)[0], key_loops(cuobjdump(control, "-sass"))[0]
    assert own <= 1.05 * ahead, (own, ahead)


def test_sm90_paged_kernel_multiplies_on_the_tensor_cores() -> None:
    sig = {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "table_ptr": "*i64", "lens_ptr": "*i32",
           "o_ptr": "*fp32", "ml_ptr": "*fp32", "max_pages": "i32", "qk_scale": "fp32"}
    consts = {"SPLIT_LEN": 1024, "KV_HEADS": 8, "PAGE": 16, "GROUPS": 4, "G_PAD": 16, "D": 128, "BLOCK_N": 64}
    code = sass("ch18_decode:_paged", sig, consts, 4, 4)
    assert "HMMA" in code or "HGMMA" in code, "the paged kernel's products do not run on the tensor cores"


DECODE_SIG = {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "o_ptr": "*fp32", "ml_ptr": "*fp32",
              "out_ptr": "*bf16", "ctx": "i32", "qk_scale": "fp32"}
ROPE_SIG = {"qkv_ptr": "*bf16", "pos_ptr": "*i64", "cos_ptr": "*bf16", "sin_ptr": "*bf16", "q_ptr": "*bf16",
            "k_ptr": "*bf16", "v_ptr": "*bf16", "max_len": "i32"}


@pytest.mark.parametrize(("kernel", "sig", "consts", "warps"), [
    ("ch18_decode:_contiguous", DECODE_SIG, {"SPLIT_LEN": 32768, "GROUPS": 4, "G_PAD": 16, "D": 128, "BLOCK_N": 64,
                                             "FINAL": True}, 4),
    ("ch18_decode:_contiguous", DECODE_SIG, {"SPLIT_LEN": 1024, "GROUPS": 4, "G_PAD": 16, "D": 128, "BLOCK_N": 64,
                                             "FINAL": False}, 4),
    ("ch18_decode:_merge", {"o_ptr": "*fp32", "ml_ptr": "*fp32", "out_ptr": "*bf16"},
     {"SPLITS": 32, "GROUPS": 4, "D": 128}, 4),
    ("ch18_rope:_rope_write", ROPE_SIG, {"HEADS": 32, "KV_HEADS": 8, "D": 128}, 1),
    ("ch18_decode:_merge", {"o_ptr": "*fp32", "ml_ptr": "*fp32", "out_ptr": "*bf16"},
     {"SPLITS": 16, "GROUPS": 16, "D": 512}, 4),
], ids=["decode_one_split", "decode_split", "merge", "rope_write", "mla_merge"])
def test_sm90_kernels_compile(kernel: str, sig: dict[str, str], consts: dict[str, int | bool], warps: int) -> None:
    code = sass(kernel, sig, consts, warps, 4)
    assert "EXIT" in code
    if kernel.endswith("_contiguous"):
        assert "HMMA" in code or "HGMMA" in code, "the decode kernel's products do not run on the tensor cores"


MLA_SIG = {"q_ptr": "*bf16", "cache_ptr": "*bf16", "o_ptr": "*fp32", "ml_ptr": "*fp32", "ctx": "i32", "qk_scale": "fp32"}


def test_sm90_absorbed_query_kernel_multiplies_on_the_tensor_cores_without_spills() -> None:
    """``_absorb`` at the pair's shape (16 heads of 128 + 64, latent 512 in 128-wide blocks, 32 rows)."""
    sig = {"q_ptr": "*bf16", "w_ptr": "*bf16", "cos_ptr": "*bf16", "sin_ptr": "*bf16", "out_ptr": "*bf16", "batch": "i32"}
    consts = {"HEADS": 16, "NOPE": 128, "ROPE": 64, "LATENT": 512, "BLOCK_B": 32, "BLOCK_L": 128}
    compiled = compile_sm90("ch18/ch18_mla_query:_absorb", sig, consts, {"num_warps": 4, "num_stages": 1})
    fits_sm90(compiled)
    code = cuobjdump(compiled, "-sass")
    assert "HMMA" in code or "HGMMA" in code, "the query absorption does not run on the tensor cores"


def test_sm90_latent_kernel_fits_two_programs_an_sm_without_spills() -> None:
    """The fused MLA kernel at the pair's shape (16 heads, 512 + 64, 512-row slices) and launch
    settings: its products on the tensor cores, no spills, shared memory for two programs an SM (the
    512 programs then take under two waves of an H200's 132 SMs), and each cache tile copied from
    global memory once for both products: the PTX's 16-byte cp.async copies are one tile's share a
    thread times STAGES (the loop's copy and its STAGES - 1 prologue copies)."""
    kernel = import_module_at(CH18 / "ch18_mla_kernel.py")
    consts = {"SPLIT_LEN": 512, "HEADS": 16, "H_PAD": kernel.H_PAD, "LATENT": 512, "ROPE": 64, "BLOCK_N": kernel.BLOCK_N}
    compiled = compile_sm90("ch18/ch18_mla_kernel:_slice", MLA_SIG, consts,
                            {"num_warps": kernel.WARPS, "num_stages": kernel.STAGES}, divisible=("ctx",))
    fits_sm90(compiled)
    assert 2 * compiled.metadata.shared <= SMEM_PER_BLOCK, compiled.metadata.shared
    per_thread = kernel.BLOCK_N * (512 + 64) * 2 // (32 * kernel.WARPS * 16)
    assert compiled.asm["ptx"].count("cp.async.cg.shared.global") == per_thread * kernel.STAGES
    code = cuobjdump(compiled, "-sass")
    assert "HMMA" in code or "HGMMA" in code, "the latent kernel's products do not run on the tensor cores"


def sweep() -> ModuleType:
    return import_module_at(CH18 / "kernel_sweep.py")


def lean_mla() -> ModuleType:
    return import_module_at(CH18 / "optimized_mla_absorption_fused_qo.py")


@pytest.mark.parametrize("setting", sweep().mla_settings((lean_mla().SLICE, lean_mla().SPLITS)), ids=str)
def test_sm90_latent_kernel_compiles_at_every_sweep_setting_without_spills(setting) -> None:
    """Each (``_slice`` setting, slices) kernel_sweep.py times compiles for sm_90 at the pair's shape
    without spills, within one block's shared memory, and with its products on the tensor cores: a
    row of the sweep is never a launch failure or a spilling kernel. The first is the variant's own."""
    (block_n, stages, warps), splits = setting
    consts = {"SPLIT_LEN": 8192 // splits, "HEADS": 16, "H_PAD": 16, "LATENT": 512, "ROPE": 64, "BLOCK_N": block_n}
    compiled = compile_sm90("ch18/ch18_mla_kernel:_slice", MLA_SIG, consts, {"num_warps": warps, "num_stages": stages},
                            divisible=("ctx",))
    fits_sm90(compiled)
    assert (8192 // splits) % block_n == 0 and splits & (splits - 1) == 0
    assert "HMMA" in cuobjdump(compiled, "-sass")


@pytest.mark.parametrize("setting", import_module_at(CH18 / "kernel_sweep.py").flash_settings(), ids=str)
def test_sm90_flash_kernel_compiles_at_every_sweep_setting_without_spills(setting) -> None:
    """Each (key loop, config) ``kernel_sweep.py flash`` times compiles for sm_90 at the pair's shape:
    wgmma, TMA, no spills, within its register cap and a block's shared memory, and no ptxas advisory
    but ``_tma``'s at 128 registers (C7512)."""
    config = triton.Config({"BLOCK_M": setting.block_m, "BLOCK_N": setting.block_n}, **setting.options())
    compiled = tma_kernel(setting.loop, config)
    assert_tma_and_wgmma(compiled, "K/V")
    assert fits_sm90(compiled)["REG"] <= (setting.maxnreg or 255)
    assert bool(ptxas_advisories(compiled)) == ((setting.loop, setting.block_n, setting.maxnreg) in SERIALIZED)


def test_sweep_settings_start_at_the_variants_own_and_differ() -> None:
    """Both sweeps' first setting is what the variant runs now (flexdecoding: its SPLIT_KV and the
    template's own choices; the last writes out (64, 1, 2), what the installed PyTorch's sm_90
    heuristic falls back to; mla: the module's SLICE and SPLITS); no setting repeats; each fits its kernel (BLOCK_N divides the 128-key
    mask block; slice counts are powers of two); and each row's paste line, run, sets that setting."""
    from torch.nn.attention.flex_attention import FlexKernelOptions
    s, fused = sweep(), import_module_at(CH18 / "optimized_flexdecoding_fused.py")
    flex = s.flex_settings(fused.SPLIT_KV)
    assert flex[0].options() == {"SPLIT_KV": fused.SPLIT_KV}
    assert fused.FusedMaskFlexDecode.kernel_options == flex[0].options() | fused.TUNED
    assert flex[-1].options() == {"SPLIT_KV": fused.SPLIT_KV, "BLOCK_N": 64, "num_stages": 1, "num_warps": 2}
    assert len(set(flex)) == len(flex) and all(128 % (f.block_n or 64) == 0 for f in flex)
    assert {k for f in flex for k in f.options()} <= set(FlexKernelOptions.__annotations__) | {"SPLIT_KV"}
    assert {f.stages for f in flex} == {None, 1, 2, 3} and {f.warps for f in flex} == {None, 2, 4, 8}
    assert {f.block_n for f in flex} == {None, 64, 128} and {f.split_kv for f in flex} == {fused.SPLIT_KV, 2 * fused.SPLIT_KV}
    mla = s.mla_settings((lean_mla().SLICE, lean_mla().SPLITS))
    assert mla[0] == (lean_mla().SLICE, lean_mla().SPLITS) and len(set(mla)) == len(mla)
    pasted: dict = {"SliceConfig": s.SliceConfig}
    exec(s.flex_paste(flex[5]) + "\n" + s.mla_paste(*mla[2]), pasted)
    assert pasted["TUNED"] == flex[5].options() and pasted["TUNED"]["BLOCKS_ARE_CONTIGUOUS"] is True
    assert (pasted["SLICE"], pasted["SPLITS"]) == mla[2]


def test_installed_flex_decode_heuristic_runs_sm90_unpipelined(monkeypatch: pytest.MonkeyPatch) -> None:
    """Why the flexdecoding sweep tries num_stages 2 and 3: this PyTorch's decode heuristic picks
    (64, 3 stages, 2 warps) for sm_90, then its sm_110 ``else`` overwrites it with (64, 1, 2)."""
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *args: (9, 0))
    found = sweep().template_decode_config()
    if found is None:
        pytest.skip("this PyTorch's template heuristics have another interface")
    assert found == (64, 1, 2)


def test_sweep_table_ranks_verified_rows_fastest_first_and_names_the_best() -> None:
    s = sweep()
    rows = [s.Row("slow", 0.2, "ok", 0.0, 9.0, "A"), s.Row("broken", float("nan"), "FAILS: compile", float("nan"), 0.0, "B"),
            s.Row("wrong", 0.1, "WRONG: tolerance", 0.5, 5.0, "C"), s.Row("fast", 0.17, "ok", 1e-3, 5.0, "D")]
    lines = s.table(rows, 0.537)
    names = ("fast", "slow", "wrong", "broken")
    assert [next(n for n in names if f"  {n}  " in line) for line in lines[1:5]] == list(names)
    assert "3.16" in lines[1] and "75%" in lines[1]  # 0.537 GB in 0.17 ms, of 4.2 TB/s
    assert lines[-1] == "best verified: fast -> D"
    assert s.table(rows[1:3], 0.537)[-1] == "no setting verified"


def wgmma_mla() -> ModuleType:
    return import_module_at(CH18 / "optimized_mla_absorption_wgmma.py")


@pytest.mark.parametrize("setting", sweep().mla_wgmma_settings((wgmma_mla().TOKENS, wgmma_mla().SPLITS)), ids=str)
def test_sm90_wgmma_latent_kernel_compiles_at_every_sweep_setting(setting) -> None:
    """``_slice_t`` at the pair's shape and each setting ``kernel_sweep.py mla_wgmma`` times: wgmma
    (HGMMA) and the latent columns by TMA (cp.async.bulk.tensor), no spills; at the variant's own
    setting shared memory and registers for two programs an SM (the point of the kernel)."""
    (block_n, stages, warps), splits = setting
    sig = {"q_ptr": "*bf16", "c_desc": f"tensordesc<bf16[1, {block_n}, 512]>", "cache_ptr": "*bf16", "o_ptr": "*fp32",
           "ml_ptr": "*fp32", "ctx": "i32", "qk_scale": "fp32"}
    consts = {"SPLIT_LEN": 8192 // splits, "HEADS": 16, "H_PAD": 16, "LATENT": 512, "ROPE": 64, "BLOCK_N": block_n}
    compiled = compile_sm90("ch18/ch18_mla_wgmma:_slice_t", sig, consts, {"num_warps": warps, "num_stages": stages},
                            divisible=("ctx",))
    usage = fits_sm90(compiled)
    assert "cp.async.bulk.tensor" in compiled.asm["ptx"] and "HGMMA" in cuobjdump(compiled, "-sass")
    assert (8192 // splits) % block_n == 0 and splits & (splits - 1) == 0
    if (block_n, stages, warps) == tuple(wgmma_mla().TOKENS):
        assert 2 * compiled.metadata.shared <= 228 * 1024 - 2 * 1024, compiled.metadata.shared
        assert 2 * 32 * warps * -(-usage["REG"] // 8) * 8 <= 65536, usage


def test_wgmma_sweep_starts_at_the_variants_own_and_pastes_it() -> None:
    s, own = sweep(), (wgmma_mla().TOKENS, wgmma_mla().SPLITS)
    settings = s.mla_wgmma_settings(own)
    assert settings[0] == own and len(set(settings)) == len(settings)
    pasted: dict = {"TokenConfig": s.TokenConfig}
    exec(s.mla_paste(*settings[1]), pasted)
    assert (pasted["TOKENS"], pasted["SPLITS"]) == settings[1]
