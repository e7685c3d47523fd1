"""``fp8_weight_decode``'s ``_folded`` step without a GPU: under TRITON_INTERPRET=1 it gives ``_fused``'s
tokens, top logits, positions and cache at a size where QKV, the attention output and SwiGLU down split
K (so the last-split fix-ups sum partials from other programs), in 3 + 6 x layers kernels, with its
arrival counters back at zero after each step; a fix-up that runs at the first split instead of the
last is caught. Compiled for sm_90 as the pair launches it: the weight path of ``_gemv_fp8`` (16-byte
asynchronous copies, e4m3 widened two at a time, 8-column MMAs), no spills, an acquire-release count
and L2 (.cg) reads of the partials, and shared memory for 3 programs an SM (2 for SwiGLU down)."""

from __future__ import annotations

from pathlib import Path

import pytest
from triton_cpu import SMEM_PER_BLOCK, compile_sm90, cuobjdump, fits_sm90, resource_usage, run_interpreted

ROOT = Path(__file__).resolve().parents[1]
CH16 = ROOT / "ch16"

FOLDED = """
import sys
import torch
sys.path[:0] = [{ch16!r}]
from triton.runtime import interpreter
from aisp.kits.fp8_layers import to_fp8
from aisp.kits.llm import TOP, DenseKVCache, LLMConfig, build_decoder, greedy_top, prefill
from ch16_fp8_gemv import GemvFP8Linear
from optimized_fp8_weight_decode_fused import FusedStep
from optimized_fp8_weight_decode_folded import FoldedStep

launches = []
_call = interpreter.GridExecutor.__call__
def counted(self, *args, **kwargs):
    launches.append((self.fn.__name__, args[8] if self.fn.__name__ == "_gemv_fold" else None))
    return _call(self, *args, **kwargs)
interpreter.GridExecutor.__call__ = counted

cfg = LLMConfig(vocab=300, dim=256, layers=2, heads=2, kv_heads=1, ffn=256)  # head_dim 128: K split in 2
ROWS, PROMPT, SLOTS = 3, 150, 160

def prefilled(step_type, dtype):  # step_type over e4m3 GEMV layers after a prefill; rows at 3 positions
    cpu = torch.device("cpu")
    model = build_decoder(cfg, 0, cpu, dtype)
    cache = DenseKVCache(cfg, ROWS, SLOTS, cpu, dtype)
    prompts = list(torch.randint(cfg.vocab, (ROWS, PROMPT), generator=torch.Generator().manual_seed(1)))
    first = greedy_top(prefill(model, cache, prompts), TOP)[0]
    to_fp8(model, layer=GemvFP8Linear)
    step = step_type(model, cache, ROWS, SLOTS, TOP)
    step.tok.copy_(first)
    step.pos.copy_(torch.tensor([PROMPT, PROMPT - 40, PROMPT + 2]))
    return step, cache

for dtype, tol in ((torch.float32, 1e-4), (torch.bfloat16, 0.1)):
    outs = []
    for step_type in (FusedStep, FoldedStep):
        step, cache = prefilled(step_type, dtype)
        tokens, tops = [], []
        for _ in range(5):
            launches.clear()
            step()
            tokens.append(step.next_tok.clone())
            tops.append(step.top.clone())
            if step_type is FoldedStep:
                assert not step.counts.any(), step.counts.nonzero()
        outs.append((torch.stack(tokens), torch.stack(tops), step.pos.clone(), cache.k.float(), cache.v.float(),
                     list(launches)))
    (tok, top, pos, k, v, _), (ftok, ftop, fpos, fk, fv, kernels) = outs
    assert torch.equal(tok, ftok) and torch.equal(pos, fpos), (tok, ftok)
    err = (top - ftop).abs().max().item()
    assert err <= tol, (dtype, err)
    for a, b in ((k, fk), (v, fv)):
        assert (a - b).abs().max() <= 0.01 * a.abs().max(), (dtype, (a - b).abs().max())
    assert len(kernels) == 3 + 6 * cfg.layers, kernels
    splits = [s for name, s in kernels if name == "_gemv_fold"]
    assert sorted(set(splits)) == [128, 256], splits  # K split in 2 (QKV, out, down) and not (gate_up, head)
    print("folded", dtype, "top err", err, "kernels", len(kernels))
print("interpreted ok")
"""


def test_folded_step_matches_the_fused_step_under_the_interpreter() -> None:
    run_interpreted(FOLDED.format(ch16=str(CH16)))


def test_folded_step_catches_a_fix_up_before_the_last_split(tmp_path: Path) -> None:
    """The same check with the fix-up at the first arriving split (a copy of the module, planted)."""
    source = (CH16 / "ch16_fold_decode.py").read_text()
    assert source.count("if arrived == SPLITS - 1:") == 1
    (tmp_path / "ch16_fold_decode.py").write_text(source.replace("if arrived == SPLITS - 1:", "if arrived == 0:"))
    script = FOLDED.format(ch16=str(CH16)).replace("sys.path[:0] = [", f"sys.path[:0] = [{str(tmp_path)!r}, ")
    with pytest.raises(AssertionError):
        run_interpreted(script)


BF16 = "*bf16"
SIG = {"x_ptr": BF16, "w_ptr": "*fp8e4nv", "s_ptr": "*fp32", "y_ptr": "*fp32", "cnt_ptr": "*i32", "M": "i32", "N": "i32",
       "K": "i32", "K_SPLIT": "i32", "ss_in_ptr": "*fp32", "nw_ptr": BF16, "eps": "fp32", "res_ptr": BF16,
       "ss_out_ptr": "*fp32", "pos_ptr": "*i64", "q_ptr": BF16, "k_ptr": BF16, "v_ptr": BF16, "max_len": "i32",
       "log2_base": "fp32"}
LAUNCHES = {  # layer: (EPI, GLU, NORM, K splits) as the pair launches them at width 4096
    "qkv": (2, False, True, 8), "out": (1, False, False, 8), "gate_up": (0, False, True, 1),
    "down": (1, True, False, 8), "head": (0, False, True, 1)}


@pytest.mark.parametrize("layer", sorted(LAUNCHES))
def test_sm90_folded_gemv_keeps_the_weight_path(layer: str) -> None:
    epi, glu, norm, splits = LAUNCHES[layer]
    consts = {"ROWS": 8, "BLOCK_N": 128, "BLOCK_K": 128, "SPLITS": splits, "GLU": glu, "NORM": norm, "EPI": epi,
              "HEADS": 32, "KV_HEADS": 8}
    compiled = compile_sm90("ch16/ch16_fold_decode:_gemv_fold", SIG | ({"y_ptr": BF16} if epi == 0 else {}), consts,
                            {"num_warps": 4, "num_stages": 5}, divisible=("N", "K", "K_SPLIT"))
    if epi == 2:  # RoPE: libdevice's cosf/sinf slow path keeps a frame (angles are in [-pi, pi]: unused)
        usage = resource_usage(compiled)
        assert usage["LOCAL"] == 0 and usage["STACK"] <= 48, usage
    else:
        fits_sm90(compiled)
    assert compiled.metadata.shared <= SMEM_PER_BLOCK / (2 if glu else 3), compiled.metadata.shared
    sass = cuobjdump(compiled, "-sass")
    assert "LDGSTS.E.BYPASS.128" in sass and "LDG.E.U8" not in sass
    assert "F2FP.F16.E4M3.UNPACK_B" in sass and "HMMA.16816.F32" in sass
    if epi:
        ptx = compiled.asm["ptx"]
        assert "atom.global.gpu.acq_rel.add" in ptx and "bar.sync" in ptx and "ld.global.cg" in ptx


def test_sm90_embedding_gather_compiles_without_spills() -> None:
    sig = {"table_ptr": BF16, "tok_ptr": "*i64", "x_ptr": BF16, "ss_ptr": "*fp32", "N": "i32"}
    fits_sm90(compile_sm90("ch16/ch16_fold_decode:_embed_ss", sig, {"SITES": 5, "BLOCK": 4096}, {"num_warps": 8},
                           divisible=("N",)))
