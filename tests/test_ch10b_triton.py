"""Chapter 10's Triton matmuls (triton_tma, persistent_matmul) without a GPU: every kernel computes
A @ B under TRITON_INTERPRET=1, and each compiles for sm_90 with Triton's real front end and
backend, where the descriptor kernels' TTGIR and PTX hold TMA copies (and the pointer kernel's
cp.async instead), every kernel uses wgmma and fits Hopper's shared memory."""

from __future__ import annotations

from pathlib import Path

import pytest
from ci_triton_scripts import run_scripts

from aisp.harness.loader import import_module_at

CH10 = Path(__file__).resolve().parents[1] / "ch10"
SHIM = """
import triton.runtime.interpreter as interp
_patch_tensor = interp._patch_lang_tensor
def _patch_lang_tensor(tensor, scope):  # Triton 3.6's interpreter calls int() on a 1-element array,
    _patch_tensor(tensor, scope)        # which NumPy >= 2.3 refuses: take .item() instead.
    scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.item()))
interp._patch_lang_tensor = _patch_lang_tensor
"""
INTERPRET = SHIM + """
import torch
import ch10b_triton as t
torch.manual_seed(0)
cfg = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_M": 2, "num_warps": 4, "num_stages": 2}
a, b = torch.randn(80, 48).half(), torch.randn(48, 96).half()  # the interpreter mishandles bf16
want = a.double() @ b.double()
runs = [("pointers", 0), ("descriptors", 0), ("persistent", 7), ("persistent", 15), ("persistent", 64)]
for kind, programs in runs:
    c = torch.full((80, 96), float("nan")).half()
    t.launch(kind, a, b, c, programs, cfg)
    err = float((c.double() - want).norm() / want.norm())
    assert err < 2e-3, (kind, programs, err)
print("ok", len(runs))
"""


def test_every_kernel_matches_torch_in_the_interpreter() -> None:
    pytest.importorskip("triton")
    proc = run_scripts({"interpret": INTERPRET}, path=(str(CH10),), timeout=600)["interpret"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ok 5" in proc.stdout


def test_launch_refuses_shapes_that_are_not_tile_multiples() -> None:
    pytest.importorskip("triton")
    import torch
    t = import_module_at(CH10 / "ch10b_triton.py")
    a, b, c = torch.empty(100, 64), torch.empty(64, 256), torch.empty(100, 256)
    with pytest.raises(AssertionError, match="tile multiple"):
        t.launch("pointers", a, b, c)


def compile_for_sm90(kind: str):
    """``kind``'s kernel compiled for sm_90 on this machine (no GPU): Triton's ASTSource through its
    CUDA backend, with the launch's tile config and the divisibility a real launch specializes on."""
    import triton
    from triton.backends.compiler import GPUTarget

    t = import_module_at(CH10 / "ch10b_triton.py")
    cfg = dict(t.CONFIG)
    options = {"num_warps": cfg.pop("num_warps"), "num_stages": cfg.pop("num_stages")}
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    ints = {"M": "i32", "N": "i32", "K": "i32"}
    if kind == "pointers":
        fn, sig = t.matmul_pointers, {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", **ints}
    else:
        fn = t.matmul_descriptors if kind == "descriptors" else t.matmul_persistent
        sig = {"a_desc": f"tensordesc<bf16[{bm}, {bk}]>", "b_desc": f"tensordesc<bf16[{bk}, {bn}]>",
               "c_desc": f"tensordesc<bf16[{bm}, {bn}]>", **ints}
    if kind == "persistent":
        cfg["NUM_PROGRAMS"] = 132
    sig |= {name: "constexpr" for name in cfg}
    aligned = {(fn.arg_names.index(name),): [["tt.divisibility", 16]] for name in sig if sig[name] in ("*bf16", "i32")}
    return triton.compile(triton.compiler.ASTSource(fn, sig, cfg, aligned), target=GPUTarget("cuda", 90, 32),
                          options=options)


@pytest.mark.parametrize("kind", ["pointers", "descriptors", "persistent"])
def test_kernel_lowers_for_sm90_with_the_loads_it_is_about(kind: str) -> None:
    pytest.importorskip("triton")
    compiled = compile_for_sm90(kind)
    ttgir, ptx = compiled.asm["ttgir"], compiled.asm["ptx"]
    assert "ttng.warp_group_dot" in ttgir and "wgmma.mma_async" in ptx
    tma = "ttng.async_tma_copy_global_to_local" in ttgir and "cp.async.bulk.tensor" in ptx
    assert tma == (kind != "pointers"), kind
    if kind == "pointers":
        assert "cp.async.cg.shared.global" in ptx  # multi-stage per-thread async copies
    else:
        assert "ttng.async_tma_copy_local_to_global" in ttgir  # the C tile leaves by a TMA store
    assert compiled.metadata.shared <= 227 * 1024
