"""Chapter 16's Triton pairs without a GPU: ``fp8_kv_cache`` and ``fp8_weight_decode`` verify on a
CPU under TRITON_INTERPRET=1 (two seeds, another seed rejected, refilled inputs), the fp8
attention kernel matches SDPA over the dequantized cache, and its sm_90 code (compiled without a
GPU) widens two e4m3 values per instruction and multiplies on the tensor cores."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from aisp.kits import native

ROOT = Path(__file__).resolve().parents[1]
CH16 = ROOT / "ch16"

INTERPRETED = """
import dataclasses, sys
from pathlib import Path
import torch
import torch.nn.functional as F
sys.path[:0] = [{ch16!r}, {tests!r}]
from refill_check import check_refilled_pair
from aisp.harness.execute import guarded_run
from aisp.harness.loader import import_module_at
from aisp.harness.verify import VerificationError, compare
from aisp.kits.llm import LLMConfig
from ch16_fp8_kv import fp8_decode_attention, quantize_heads

SMALL = {{"fp8_kv_cache": dict(rows=2, kv_heads=2, context=512, splits=4, element_tol=0.15),
          "fp8_weight_decode": dict(model=LLMConfig(vocab=256, dim=128, layers=2, heads=2, kv_heads=1, ffn=128),
                                    batch=3, prompt=10, steps=6)}}
for name, sizes in SMALL.items():
    mods = [import_module_at(Path({ch16!r}) / f"{{side}}_{{name}}.py") for side in ("baseline", "optimized")]

    def build(mod, seed):
        bench = mod.get_benchmark()
        bench.device, bench.seed = torch.device("cpu"), seed
        bench.workload = dataclasses.replace(bench.workload, **sizes)
        return bench

    refs = {{}}
    for seed in (0, 1):
        base, opt = build(mods[0], seed), build(mods[1], seed)
        base.setup(); opt.setup()
        refs[seed] = guarded_run(base)
        compare(refs[seed], guarded_run(opt), base.workload)
    try:
        compare(refs[0], refs[1], base.workload)
        raise SystemExit(name + ": another seed's answer passed")
    except VerificationError:
        pass
    check_refilled_pair(build(mods[0], 0), build(mods[1], 0), base.workload)

gen = torch.Generator().manual_seed(3)
q = torch.randn(3, 2, 3, 64, generator=gen)
k, v = (torch.randn(3, 2, 256, 64, generator=gen) * s for s in (2.0, 0.5))
(k8, ks), (v8, vs) = quantize_heads(k), quantize_heads(v)
e4m3 = torch.float8_e4m3fn
ref = F.scaled_dot_product_attention(q, k8.view(e4m3).float() * ks[:, None, None],
                                     v8.view(e4m3).float() * vs[:, None, None])
out = fp8_decode_attention(q, k8.view(e4m3), v8.view(e4m3), ks, vs, 2)
torch.testing.assert_close(out, ref, rtol=2e-3, atol=2e-3)
print("interpreted ok")
"""


def test_fp8_pairs_verify_under_the_triton_interpreter() -> None:
    pytest.importorskip("triton")
    script = INTERPRETED.format(ch16=str(CH16), tests=str(ROOT / "tests"))
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=900,
                          check=False)
    assert proc.returncode == 0 and "interpreted ok" in proc.stdout, proc.stderr[-3000:]


def attention_sass() -> str:
    """SASS of the split-K attention kernel as the pair specializes it, compiled for sm_90."""
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    tool = native.cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump is not available")
    sys.path.insert(0, str(CH16))
    try:
        from ch16_fp8_kv import BLOCK_N, G_PAD, _attend
    finally:
        sys.path.remove(str(CH16))
    sig = {"q_ptr": "*bf16", "k_ptr": "*fp8e4nv", "v_ptr": "*fp8e4nv", "ks_ptr": "*fp32", "o_ptr": "*fp32",
           "ml_ptr": "*fp32", "ctx": "i32", "qk_scale": "fp32"} | dict.fromkeys(
               ("SPLIT_LEN", "KV_HEADS", "GROUPS", "G_PAD", "D", "BLOCK_N"), "constexpr")
    consts = {"SPLIT_LEN": 512, "KV_HEADS": 8, "GROUPS": 4, "G_PAD": G_PAD, "D": 128, "BLOCK_N": BLOCK_N}
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(7)}
    kernel = triton.compile(ASTSource(_attend, sig, consts, attrs), target=GPUTarget("cuda", 90, 32),
                            options={"num_warps": 4, "num_stages": 3})
    cubin = Path(os.environ.get("TMPDIR", "/tmp")) / f"ch16_fp8_attend_{os.getpid()}.cubin"
    cubin.write_bytes(kernel.asm["cubin"])
    try:
        env = {**os.environ, "PATH": f"{Path(tool).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        return subprocess.run([tool, "-sass", str(cubin)], capture_output=True, text=True, env=env, check=True).stdout
    finally:
        cubin.unlink()


def test_sm90_attention_widens_e4m3_pairs_on_the_tensor_cores() -> None:
    sass = attention_sass()
    assert "F2FP.F16.E4M3.UNPACK_B" in sass, "e4m3 -> fp16x2 conversion (two values per instruction) missing"
    assert "HMMA" in sass, "the products do not run on the tensor cores"
