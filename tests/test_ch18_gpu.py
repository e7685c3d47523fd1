"""Chapter 18's Triton pairs on a GPU: each verifies at its H200 size (two calls per variant; the
harness does the timing), the kernels match SDPA in bf16 at the pairs' shapes (the CPU tests run
them in fp32 under the interpreter), the flash kernel's autotune stays within its compile budget,
and its speed is within reach of SDPA's best backend (printed: run with -s to see the TFLOP/s); the fused
MLA latent kernel matches the two-bmm attention and is timed beside it (printed); the document-mask Triton
variants (``_triton``, and ``_triton_grouped``'s launch in head groups) verify against their dense-mask
baseline at the pair's size."""

from __future__ import annotations

import importlib
import math
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from cuda_events import timed_ms

import aisp
from aisp.harness.execute import guarded_run
from aisp.harness.loader import import_module_at
from aisp.harness.verify import compare

CH18 = Path(__file__).resolve().parents[1] / "ch18"
VARIANTS = {"flash_attention_triton": ("", "_sdpa", "_cudnn", "_tma", "_pipelined", "_pvwait", "_ahead", "_hostdesc"),
            "split_kv_decode": ("",),
            "paged_attention_decode": ("",), "fused_rope_kv_write": ("",), "mla_absorption": ("_fused", "_fused_qo", "_graph", "_wgmma"), "flexdecoding": ("_split",),
            "flex_document_mask": ("_triton", "_triton_grouped")}
pytestmark = pytest.mark.gpu


def cuda_bench(module: str):
    bench = import_module_at(CH18 / f"{module}.py").get_benchmark()
    bench.device = torch.device("cuda")
    try:
        bench.setup()
    except aisp.Unavailable as err:  # cuDNN attention missing from this build
        pytest.skip(str(err))
    return bench


@pytest.fixture(scope="module", autouse=True)
def kernels_importable():
    sys.path.insert(0, str(CH18))
    yield
    sys.path.remove(str(CH18))


@pytest.mark.parametrize(("name", "variant"), [(n, v) for n, vs in VARIANTS.items() for v in vs])
def test_pair_verifies_at_full_size(name: str, variant: str) -> None:
    workload = import_module_at(CH18 / f"baseline_{name}.py").WORKLOAD
    outs = []
    for module in (f"baseline_{name}", f"optimized_{name}{variant}"):
        bench = cuda_bench(module)
        outs += [guarded_run(bench), guarded_run(bench)]
        bench.teardown()
        del bench
        torch.cuda.empty_cache()
    compare(outs[0], outs[2], workload)
    compare(outs[2], outs[3], workload)


FLASH_FLOPS = 4.0 * 128 * 4 * 32 * 4096 * 4097 / 2
"""The causal FLOPs of ``flash_attention_triton``'s shape: 4 x 32 heads x 4,096 tokens x head_dim 128."""


def _flash_inputs() -> tuple[torch.Tensor, ...]:
    """q, k, v at the pair's shape, bf16, seed 0."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    return tuple(torch.randn(4, 32, 4096, 128, generator=gen, device="cuda").bfloat16() for _ in range(3))


def _first_call(attention, q, k, v) -> tuple[torch.Tensor, float]:
    """The causal output of ``attention``'s first call and its seconds (compile and autotune included)."""
    start = time.perf_counter()
    out = attention(q, k, v, causal=True)
    torch.cuda.synchronize()
    return out, time.perf_counter() - start


def _matches_sdpa(attention, q, k, v) -> float:
    """Checks a TMA kernel against SDPA: causal on q, k, v, non-causal on their first 12 heads (groups of
    8: a short last group); returns the seconds of its first call (compile and autotune included)."""
    out, tuning_s = _first_call(attention, q, k, v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), rtol=0.05, atol=0.03)
    q3, k3, v3 = (t[:, :3].contiguous() for t in (q, k, v))
    torch.testing.assert_close(attention(q3, k3, v3, causal=False), F.scaled_dot_product_attention(q3, k3, v3),
                               rtol=0.05, atol=0.03)
    return tuning_s


def test_flash_kernel_matches_sdpa_and_is_within_reach_of_its_best_backend() -> None:
    from ch18_attention import flash_attention
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = _flash_inputs()
    out, tuning_s = _first_call(flash_attention, q, k, v)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out, ref, rtol=0.05, atol=0.03)
    q2, k2, v2 = (t[:, :2].contiguous() for t in (q, k, v))  # the kernel takes contiguous tensors only
    torch.testing.assert_close(flash_attention(q2, k2, v2, causal=False),
                               F.scaled_dot_product_attention(q2, k2, v2), rtol=0.05, atol=0.03)
    times = {"triton": timed_ms(lambda: flash_attention(q, k, v, causal=True))}
    for name, backend in (("sdpa_flash", SDPBackend.FLASH_ATTENTION), ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION)):
        try:
            with sdpa_kernel(backend):
                times[name] = timed_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
        except RuntimeError:
            continue
    print({n: f"{t:.3f} ms, {FLASH_FLOPS / t / 1e9:.0f} TFLOP/s" for n, t in times.items()}, f"autotune {tuning_s:.1f} s")
    assert tuning_s < 60, f"compile + autotune took {tuning_s:.0f} s"
    assert times["triton"] < 2.0 * min(t for n, t in times.items() if n != "triton"), times


def test_tma_flash_kernel_matches_sdpa_and_prints_what_its_changes_buy() -> None:
    """The TMA kernel against SDPA (causal, and non-causal on a short last head group); printed: its
    time, the pointer kernel's, the TMA kernel in the pointer kernel's launch order (every head one
    group: the L2 grouping's share), and the autotuned config."""
    from ch18_attention import flash_attention
    from ch18_attention_tma import _flash_tma_tuned, flash_attention_tma
    q, k, v = _flash_inputs()
    tuning_s = _matches_sdpa(flash_attention_tma, q, k, v)
    times = {"tma": timed_ms(lambda: flash_attention_tma(q, k, v, causal=True)),
             "tma, pointer kernel's order": timed_ms(lambda: flash_attention_tma(q, k, v, causal=True, group=128)),
             "pointer": timed_ms(lambda: flash_attention(q, k, v, causal=True))}
    print({n: f"{t:.3f} ms, {FLASH_FLOPS / t / 1e9:.0f} TFLOP/s" for n, t in times.items()},
          f"best {_flash_tma_tuned.best_config}, autotune {tuning_s:.1f} s")
    assert tuning_s < 60, f"compile + autotune took {tuning_s:.0f} s"


@pytest.mark.parametrize(("module", "function", "tuned"),
                         [("ch18_attention_pipelined", "flash_attention_pipelined", "_flash_pipelined_tuned"),
                          ("ch18_attention_ws", "flash_attention_ws", "_flash_ws_tuned"),
                          ("ch18_attention_pvwait", "flash_attention_pvwait", "_flash_pvwait_tuned"),
                          ("ch18_attention_ahead", "flash_attention_ahead", "_flash_ahead_tuned")],
                         ids=["pipelined", "ws", "pvwait", "ahead"])
def test_key_loop_variant_matches_sdpa_and_prints_its_time_beside_tma(module: str, function: str, tuned: str) -> None:
    """Another key loop of the TMA kernel (pipelined, warp-specialized, P V waited for) against SDPA (causal, and
    non-causal on a short last head group); printed: its time and ``_tma``'s on the same inputs, and
    the tuned configs."""
    from ch18_attention_tma import _flash_tma_tuned, flash_attention_tma
    variant = importlib.import_module(module)
    attention = getattr(variant, function)
    q, k, v = _flash_inputs()
    tuning_s = _matches_sdpa(attention, q, k, v)
    flash_attention_tma(q, k, v, causal=True)  # tuned before its timing
    times = {function: timed_ms(lambda: attention(q, k, v, causal=True)),
             "tma": timed_ms(lambda: flash_attention_tma(q, k, v, causal=True))}
    print({n: f"{t:.3f} ms, {FLASH_FLOPS / t / 1e9:.0f} TFLOP/s" for n, t in times.items()},
          f"{function} {getattr(variant, tuned).best_config}, tma {_flash_tma_tuned.best_config}, "
          f"first call {tuning_s:.1f} s")
    assert tuning_s < 60, f"compile + autotune took {tuning_s:.0f} s"


def test_hostdesc_kernel_matches_ahead_and_sdpa_and_prints_both_times() -> None:
    """The ahead kernel over host-made TMA descriptors against SDPA (causal, and non-causal on a short last
    head group) and against ``_ahead``'s output on the same inputs (the same math; printed: whether the
    bits are equal); printed (-s): both times on the same inputs (CUDA events, 10 calls each)."""
    from ch18_attention_ahead import flash_attention_ahead
    from ch18_attention_hostdesc import flash_attention_hostdesc
    q, k, v = _flash_inputs()
    first_s = _matches_sdpa(flash_attention_hostdesc, q, k, v)
    own, ahead = flash_attention_hostdesc(q, k, v), flash_attention_ahead(q, k, v)
    torch.testing.assert_close(own, ahead)
    times = {"hostdesc": timed_ms(lambda: flash_attention_hostdesc(q, k, v)),
             "ahead": timed_ms(lambda: flash_attention_ahead(q, k, v))}
    print({n: f"{t:.4f} ms, {FLASH_FLOPS / t / 1e9:.0f} TFLOP/s" for n, t in times.items()},
          f"bit-equal to _ahead: {torch.equal(own, ahead)}, first call {first_s:.1f} s")
    assert first_s < 60, f"compile took {first_s:.0f} s"


def test_decode_kernels_match_sdpa_at_the_pairs_shapes() -> None:
    from ch18_decode import decode_attention, paged_decode_attention
    gen = torch.Generator(device="cuda").manual_seed(1)
    q = torch.randn(2, 8, 4, 128, generator=gen, device="cuda").bfloat16()
    k, v = (torch.randn(2, 8, 32768, 128, generator=gen, device="cuda").bfloat16() for _ in range(2))
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
    for splits in (1, 32):
        torch.testing.assert_close(decode_attention(q, k, v, splits).float(), ref, rtol=2e-2, atol=2e-3)
    lens = torch.tensor([1000, 1024, 4097, 8192], device="cuda", dtype=torch.int32)
    need = [math.ceil(n / 16) for n in lens.tolist()]
    table = torch.zeros(4, max(need), dtype=torch.long)
    pages = (torch.randperm(sum(need)) + 1).tolist()
    for r, n in enumerate(need):
        table[r, :n] = torch.tensor(pages[sum(need[:r]):sum(need[:r + 1])])
    kp, vp = (torch.randn(1 + sum(need), 8, 16, 128, generator=gen, device="cuda").bfloat16() for _ in range(2))
    out = paged_decode_attention(q[:1].expand(4, -1, -1, -1).contiguous(), kp, vp, table.cuda(), lens)
    for r, n in enumerate(lens.tolist()):
        kk, vv = (p[table[r, :need[r]].cuda()].transpose(0, 1).reshape(8, -1, 128)[:, :n].float() for p in (kp, vp))
        torch.testing.assert_close(out[r].float(), F.scaled_dot_product_attention(q[0].float(), kk, vv),
                                   rtol=2e-2, atol=2e-3)


def test_fused_latent_attention_matches_the_two_bmms_and_prints_both_times() -> None:
    """mla_absorption's attention at the pair's size (32 x 8,192 cache rows of 576, 16 heads): the
    fused kernel at 4-32 slices gives the two-bmm form's latent output within bf16 tolerance, and the
    whole fused step the bmm step's output; printed (run with -s): do_bench medians of the two-bmm
    attention, the fused one at each slice count (with its rate on the 302 MB cache), and both steps."""
    from ch18_mla_kernel import latent_attention
    from triton.testing import do_bench
    fused, bmms = cuda_bench("optimized_mla_absorption_fused"), cuda_bench("optimized_mla_absorption")
    workload = fused.workload
    q_nope, q_rope = fused.queries()
    q_all = torch.cat([torch.bmm(q_nope.transpose(0, 1), fused.w_uk).transpose(0, 1), q_rope], -1)
    ref = bmms.attend(q_all)
    times = {"two bmms + softmax": do_bench(lambda: bmms.attend(q_all), return_mode="median")}
    for splits in (4, 8, 16, 32):
        def attend(splits: int = splits) -> torch.Tensor:
            return latent_attention(q_all, fused.cache, workload.rope, fused.scale, splits)
        compare([("o_lat", ref)], [("o_lat", attend())], workload)
        times[f"fused, {splits} slices"] = do_bench(attend, return_mode="median")
    compare([("out", bmms.run())], [("out", fused.run())], workload)
    steps = {f"step: {n}": do_bench(b.run, return_mode="median") for n, b in (("bmms", bmms), ("fused", fused))}
    print({n: f"{t * 1e3:.1f} us, {workload.cache_bytes() / t / 1e9:.2f} TB/s on the cache" for n, t in times.items()},
          {n: f"{t:.4f} ms" for n, t in steps.items()}, f"pair splits: {fused.splits}")


def test_wgmma_latent_kernel_matches_slice_and_prints_both_times() -> None:
    """``_slice_t`` (ch18_mla_wgmma.py: wgmma, a TMA copy a 64-key tile) at the pair's size and at each
    setting ``kernel_sweep.py mla_wgmma`` times gives ``_slice``'s latent output within bf16 tolerance
    (``_slice`` at the _fused_qo variant's own setting: the reference); printed (-s): do_bench medians of
    both attentions (kernel + merge) and their rates on the 302 MB cache."""
    from ch18_mla_kernel import latent_attention
    from ch18_mla_wgmma import latent_attention_t
    from triton.testing import do_bench
    sweep = import_module_at(CH18 / "kernel_sweep.py")
    lean, wgmma = cuda_bench("optimized_mla_absorption_fused_qo"), import_module_at(CH18 / "optimized_mla_absorption_wgmma.py")
    w = lean.workload
    q_all = torch.randn(w.batch, w.heads, w.latent + w.rope, device="cuda", dtype=torch.bfloat16)
    ref = latent_attention(q_all, lean.cache, w.rope, lean.scale, lean.splits, lean.slice_config)
    times = {f"_slice {lean.slice_config}, {lean.splits}": do_bench(lambda: latent_attention(
        q_all, lean.cache, w.rope, lean.scale, lean.splits, lean.slice_config), return_mode="median")}
    for config, splits in sweep.mla_wgmma_settings((wgmma.TOKENS, wgmma.SPLITS)):
        def attend(config=config, splits=splits) -> torch.Tensor:
            return latent_attention_t(q_all, lean.cache, w.rope, lean.scale, splits, config)
        compare([("o_lat", ref)], [("o_lat", attend())], w)
        times[f"_slice_t {config}, {splits}"] = do_bench(attend, return_mode="median")
    print({n: f"{t * 1e3:.1f} us, {w.cache_bytes() / t / 1e9:.2f} TB/s" for n, t in times.items()})


def test_lean_fused_step_runs_fewer_kernels() -> None:
    """mla_absorption's _fused_qo step at the pair's size: its device work (kernels and copies of one
    call after a warm-up) is at least 6 launches shorter than _fused's 13; both lists printed (-s),
    so the W_UV bmm's strided output is seen to add no copy, or to add one."""
    from test_ch18b_gpu import device_work
    lean, fused = cuda_bench("optimized_mla_absorption_fused_qo"), cuda_bench("optimized_mla_absorption_fused")
    mine, theirs = device_work(lean.run), device_work(fused.run)
    print(f"_fused_qo: {len(mine)} {mine}\n_fused: {len(theirs)} {theirs}")
    assert len(mine) <= len(theirs) - 6


def test_kernel_sweeps_verify_and_time_their_first_settings() -> None:
    """ch18/kernel_sweep.py at the pairs' sizes, its first settings only (the lead runs the whole
    sweeps): the current setting verifies against the baseline's output and gets a time, no other
    setting gives a wrong answer (one the compiler refuses is a FAILS row); the tables printed (-s).
    mla: the variant's own, then 16 slices at BLOCK_N 32 / 2 stages and 16 / 3 (4 programs an SM);
    flexdecoding: the variant's own, then 2 stages."""
    sweep = import_module_at(CH18 / "kernel_sweep.py")
    lean = import_module_at(CH18 / "optimized_mla_absorption_fused_qo.py")
    split = import_module_at(CH18 / "optimized_flexdecoding_fused.py").SPLIT_KV
    for rows, gbytes in ((sweep.sweep_mla(sweep.mla_settings((lean.SLICE, lean.SPLITS))[:3]), 0.327),
                         (sweep.sweep_flexdecoding(sweep.flex_settings(split)[:2], budget_s=600.0), 0.537)):
        print("\n".join(sweep.table(rows, gbytes)))
        assert rows[0].verdict == "ok" and rows[0].diff == 0.0 and rows[0].ms > 0, rows[0]
        assert not [r for r in rows if r.verdict.startswith("WRONG")], rows  # a setting may fail to build, never be wrong


def test_flash_sweep_verifies_and_times_pvwait_ahead_and_tma() -> None:
    """``kernel_sweep.py flash``'s first three settings at the pair's shape (``_pvwait``'s config with its
    loop, the ahead loop and ``_tma``'s): each verifies against the baseline's output and gets a time
    (CUDA graph replays); the table printed (-s). The lead runs the whole sweep (~75 s)."""
    sweep = import_module_at(CH18 / "kernel_sweep.py")
    rows = sweep.sweep_flash(sweep.flash_settings()[:3], budget_s=600.0)
    print("\n".join(sweep.table(rows, 0.537)))
    assert all(r.verdict == "ok" and r.ms > 0 for r in rows), rows
