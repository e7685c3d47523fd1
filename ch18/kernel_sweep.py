"""Kernel-setting sweeps for two ch18 pairs' best variants, on a GPU: each setting compiled, its output
verified against the baseline's (the harness's tolerance) and compared with the current setting's,
its time a call read by CUDA events around single replays of a CUDA graph (median), and a table
printed, fastest first, with the line to put into the variant for the fastest verified setting.

- ``flexdecoding``: optimized_flexdecoding_fused.py's step (the BlockMask build and flex_attention,
  compiled as one graph) at the pair's size, per FlexAttention ``kernel_options``: SPLIT_KV, BLOCK_N,
  num_stages, num_warps, and BLOCKS_ARE_CONTIGUOUS (true of the window mask: it skips the kernel's
  per-step index loads). In PyTorch 2.13 the template's sm_90 choice (64, 3 stages, 2 warps) is
  overwritten by its fallback (64, 1, 2), K/V loads not pipelined; the sweep prints the installed
  one's. Each setting is a fresh compile (the first ~20-40 s, then ~5-10 s, estimated); settings run
  in the order listed, most promising first, until ``--budget`` seconds have passed.
- ``mla``: optimized_mla_absorption_fused_qo.py's step per ``_slice`` setting (BLOCK_N, stages,
  warps) and slice count: fewer shared-memory bytes a program fit 3-4 programs an SM (16 slices
  then make one wave of 512); then its sub-steps at the current setting (which GEMM is slow).
- ``flash``: flash_attention_triton's TMA kernel (``_flash_fwd_tma``) per key loop (``_pvwait``'s,
  ``_ahead``'s, ``_tma``'s as the control) and launch config (tiles, warps, stages, register cap),
  each a fresh compile (~3-5 s, estimated); ``_pvwait``'s measured config first.
Run: python ch18/kernel_sweep.py flexdecoding [--budget 65] [--only 0,3]  |  python ch18/kernel_sweep.py mla
     python ch18/kernel_sweep.py mla_wgmma
     python ch18/kernel_sweep.py flash [--budget 75]
"""

from __future__ import annotations

import argparse
import functools
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch
from ch18_graphs import capture
from ch18_mla_kernel import SliceConfig
from ch18_mla_query import absorbed_query
from ch18_mla_wgmma import TokenConfig

from aisp.harness.loader import import_module_at
from aisp.harness.tolerance import VerificationError, compare_tensor

HERE = Path(__file__).resolve().parent
HBM_TBPS = 4.2
"""The H200's HBM copy ceiling (``aisp peak``), TB/s."""
REPLAYS = 200


@dataclass(frozen=True)
class FlexSetting:
    """FlexAttention kernel options; None leaves the choice to the template (its heuristics)."""

    split_kv: int
    block_n: int | None = None
    stages: int | None = None
    warps: int | None = None
    contiguous: bool = False

    def options(self) -> dict[str, int | bool]:
        named = {"SPLIT_KV": self.split_kv, "BLOCK_N": self.block_n, "num_stages": self.stages, "num_warps": self.warps,
                 "BLOCKS_ARE_CONTIGUOUS": self.contiguous or None}
        return {k: v for k, v in named.items() if v is not None}


def template_decode_config() -> tuple[int, int, int] | None:
    """The installed Inductor's own flex-decode (BLOCK_N, num_stages, num_warps) for head dim 128 in
    bf16 on this GPU (PyTorch 2.13 on sm_90: (64, 1, 2)), or None where its heuristics differ."""
    try:
        from torch._inductor.template_heuristics.triton import CUDAConfigHeuristic
        conf = CUDAConfigHeuristic().get_flex_decode_configs(128, torch.bfloat16)[-1]
        return conf.block_n, conf.num_stages, conf.num_warps
    except (ImportError, AttributeError, TypeError, IndexError, RuntimeError, AssertionError):
        return None


def flex_settings(split: int) -> list[FlexSetting]:
    """Settings tried, most promising first (the budget cuts the tail): the variant's own (``split``,
    its SPLIT_KV, and the template's choices); K/V loads pipelined (2, 3 stages); more warps; 128-key
    steps; contiguous blocks; twice the splits; the template's fallback (64, 1, 2) written out."""
    s = FlexSetting
    return [s(split), s(split, 64, 2, 2), s(split, 64, 3, 2), s(split, 64, 2, 4), s(split, 128, 2, 4),
            s(split, 64, 2, 2, contiguous=True), s(2 * split, 64, 2, 2), s(split, contiguous=True), s(split, 128, 1, 4),
            s(split, 64, 1, 4), s(2 * split), s(split, 128, 2, 8), s(split, 64, 1, 2)]


def flex_paste(setting: FlexSetting) -> str:
    """The line of optimized_flexdecoding_fused.py that makes ``setting`` its own."""
    return f"TUNED = {setting.options()}"


def mla_paste(config: SliceConfig | TokenConfig, splits: int) -> str:
    """The lines that make (``config``, ``splits``) the variant's: optimized_mla_absorption_fused_qo.py's
    ``SLICE`` and ``SPLITS``; for a ``TokenConfig``, ch18_mla_wgmma.py's ``TOKENS`` and
    optimized_mla_absorption_wgmma.py's ``SPLITS``."""
    name = "TOKENS" if isinstance(config, TokenConfig) else "SLICE"
    return f"{name} = {config!r}; SPLITS = {splits}"


def mla_wgmma_settings(current: tuple[TokenConfig, int]) -> list[tuple[TokenConfig, int]]:
    """(``_slice_t`` setting, slices) pairs, the current first. sm_90 (Triton 3.6, compiled without a
    GPU), 64 keys a tile: stages 1 takes 92 KB of shared memory (two programs an SM) at 159 registers
    (4 warps) or 126 (8 warps: 2 x 256 threads fill the register file); stages 2, 164 KB (one an SM)."""
    c = TokenConfig
    tried = [(c(64, 1, 8), 8), (c(64, 1, 4), 8), (c(64, 1, 4), 4), (c(64, 2, 4), 4), (c(64, 1, 4), 16)]
    return [current, *(t for t in tried if t != current)]


def mla_settings(current: tuple[SliceConfig, int]) -> list[tuple[SliceConfig, int]]:
    """(``_slice`` setting, slices) pairs, the current first. sm_90 shared memory a program (Triton 3.6,
    compiled without a GPU): BLOCK_N 16 at 2/3/4 stages 37/55/73 KB, 32: 55/91/127, 64 at 2: 92; 4 warps
    take ~128 registers (4 programs an SM), 8 ~96 (2)."""
    c = SliceConfig
    tried = [(c(32, 2, 4), 16), (c(16, 3, 4), 16), (c(32, 3, 8), 8), (c(64, 2, 4), 8), (c(32, 2, 4), 8),
             (c(16, 4, 4), 8), (c(64, 2, 8), 8), (c(32, 3, 4), 16), (c(32, 2, 8), 16), (c(16, 2, 4), 16)]
    return [current, *(t for t in tried if t != current)]


@dataclass(frozen=True)
class FlashSetting:
    """A key loop of ``_flash_fwd_tma`` ("pvwait", "ahead", "tma") and its launch config."""

    loop: str
    block_m: int
    block_n: int
    warps: int
    stages: int
    maxnreg: int | None = None

    def options(self) -> dict[str, int]:
        named = {"num_warps": self.warps, "num_stages": self.stages, "maxnreg": self.maxnreg}
        return {k: v for k, v in named.items() if v is not None}


def flash_settings() -> list[FlashSetting]:
    """Settings tried, the measured one first (``_pvwait``'s: 128 x 64, 8 warps, 2 stages, 128
    registers), then ``_ahead`` there, ``_tma`` (C7512) as the control, then other configs of both loops.
    Compiled for sm_90a without a GPU (registers; shared memory; programs an SM): 128 x 32 at 3/4
    stages ~110; 80/96 KB; 2. 128 x 64 at 3 stages 127; 129 KB; 1. 128 x 128 at 2 stages 160-191;
    161 KB; 1. 64 x 64 over 4 warps at 3 stages ~125; 113 KB; 2. 64 x 32 over 4 warps 116; 65 KB; 3."""
    s = FlashSetting
    return [s("pvwait", 128, 64, 8, 2, 128), s("ahead", 128, 64, 8, 2, 128), s("tma", 128, 64, 8, 2, 128),
            s("ahead", 128, 32, 8, 4, 128), s("pvwait", 128, 32, 8, 4, 128), s("ahead", 128, 32, 8, 3, 128),
            s("ahead", 64, 64, 4, 3, 128), s("pvwait", 64, 64, 4, 3, 128), s("ahead", 64, 32, 4, 3, 128),
            s("pvwait", 128, 64, 8, 3), s("ahead", 128, 128, 8, 2), s("pvwait", 128, 128, 8, 2)]


def flash_loops() -> dict:
    from ch18_attention_ahead import AHEAD
    from ch18_attention_pvwait import PVWAIT
    from ch18_attention_tma import TMA
    return {"pvwait": PVWAIT, "ahead": AHEAD, "tma": TMA}


def flash_call(setting: FlashSetting, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Callable[[], torch.Tensor]:
    """One causal call of ``_flash_fwd_tma`` with ``setting``'s loop and config (no autotuning) on q, k, v."""
    from ch18_attention import check_inputs
    from ch18_attention_tma import _flash_fwd_tma, head_group

    from aisp.kits.tma import use_torch_scratch
    loop = flash_loops()[setting.loop]
    batch, heads, seq, dim = q.shape
    scale, out, n_heads = check_inputs(loop.name, q, k, v), torch.empty_like(q), batch * heads
    use_torch_scratch()
    grid = (n_heads * (seq // setting.block_m),)

    def call() -> torch.Tensor:
        _flash_fwd_tma[grid](q, k, v, out, n_heads, seq, scale, D=dim, CAUSAL=True, KEY_LOOP=loop.tiles,
                             HEAD_GROUP=head_group(q), BLOCK_M=setting.block_m, BLOCK_N=setting.block_n,
                             ONE_LOOP=loop.one_loop, **setting.options())
        return out
    return call


def flash_paste(setting: FlashSetting) -> str:
    """The config line of ch18_attention_<loop>.py that makes ``setting`` its one config."""
    cap = f", maxnreg={setting.maxnreg}" if setting.maxnreg else ""
    return (f"{setting.loop}: CONFIGS = [triton.Config({{\"BLOCK_M\": {setting.block_m}, \"BLOCK_N\": {setting.block_n}}}, "
            f"num_warps={setting.warps}, num_stages={setting.stages}{cap})]")


@dataclass(frozen=True)
class Row:
    setting: str
    ms: float
    verdict: str
    """"ok": within the harness's tolerance of the baseline's output; "WRONG: ...": outside it;
    "FAILS: ...": did not compile or run."""
    diff: float
    """Largest |output - the first row's output| (the current setting's, unless ``--only`` skips it)."""
    compile_s: float
    paste: str
    """The line that makes this setting the variant's."""


def replay_ms(graph: torch.cuda.CUDAGraph, replays: int = REPLAYS) -> float:
    """Median milliseconds of one replay, each between two CUDA events (after 10 warm replays)."""
    for _ in range(10):
        graph.replay()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(replays)]
    for start, end in events:
        start.record()
        graph.replay()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in events)


def graphed(fn: Callable[[], torch.Tensor]) -> tuple[torch.cuda.CUDAGraph, dict[str, torch.Tensor]]:
    """``fn`` captured in a CUDA graph; the dict's "out" is the graph's output buffer."""
    held: dict[str, torch.Tensor] = {}

    def step() -> None:
        held["out"] = fn()
    return capture(step, None), held


def verdict(ref: torch.Tensor, out: torch.Tensor, workload) -> str:
    try:
        compare_tensor("out", ref, out, workload)
    except VerificationError as err:
        return f"WRONG: {str(err).splitlines()[0][:90]}"
    return "ok"


def measure(setting: str, paste: str, fn: Callable[[], torch.Tensor], ref: torch.Tensor,
            current: torch.Tensor | None, workload) -> tuple[Row, torch.Tensor | None]:
    """One setting's row (and its output): compiled and captured, verified, timed; an error is its verdict."""
    start = time.perf_counter()
    try:
        graph, held = graphed(fn)
        graph.replay()
        torch.cuda.synchronize()
    except Exception as err:  # a setting the compiler or the GPU refuses is a row, not the end of the sweep
        return Row(setting, math.nan, f"FAILS: {type(err).__name__}: {str(err)[:80]}", math.nan, 0.0, paste), None
    compile_s, out = time.perf_counter() - start, held["out"].clone()
    diff = (out.float() - current.float()).abs().max().item() if current is not None else 0.0
    row = Row(setting, replay_ms(graph), verdict(ref, out, workload), diff, compile_s, paste)
    del graph, held
    return row, out


def table(rows: Sequence[Row], gbytes: float) -> list[str]:
    """The rows, verified ones fastest first, then the failing ones; TB/s and share of HBM on ``gbytes``."""
    ranked = sorted(rows, key=lambda r: (r.verdict != "ok", r.ms if r.ms == r.ms else math.inf))
    lines = [f"{'ms':>8} {'TB/s':>6} {'HBM':>5} {'max|d|':>8} {'compile':>7}  setting  verdict"]
    for r in ranked:
        rate = gbytes / r.ms if r.ms == r.ms else math.nan
        lines.append(f"{r.ms:8.4f} {rate:6.2f} {rate / HBM_TBPS:5.0%} {r.diff:8.1e} {r.compile_s:6.1f}s  {r.setting}  {r.verdict}")
    best = next((r for r in ranked if r.verdict == "ok"), None)
    lines.append(f"best verified: {best.setting} -> {best.paste}" if best else "no setting verified")
    return lines


def sweep_flexdecoding(settings: Sequence[FlexSetting] | None = None, budget_s: float = 65.0) -> list[Row]:
    """The fused variant's step per setting (all of ``flex_settings`` by default) until ``budget_s``."""
    from ch18_flex import splits_follow_the_mask, window_decode
    fused = _module("optimized_flexdecoding_fused")
    base = _on_cuda(_module("baseline_flexdecoding").get_benchmark())
    ref, w = base.run(), base.workload
    print(f"torch {torch.__version__}, splits follow the mask: {splits_follow_the_mask()}, the template's own "
          f"(BLOCK_N, stages, warps): {template_decode_config()}, the variant's: {fused.FusedMaskFlexDecode.kernel_options}")
    rows, current, start = [], None, time.perf_counter()
    for setting in settings or flex_settings(fused.SPLIT_KV):
        if rows and time.perf_counter() - start > budget_s:
            print(f"budget of {budget_s:.0f} s spent: {setting} not tried")
            continue
        torch._dynamo.reset()  # a fresh compile per setting: no recompile limit, no stale guards
        step, options = torch.compile(window_decode, dynamic=False, fullgraph=True), setting.options()
        call = functools.partial(step, base.q, base.k, base.v, base.pos, w.span, options)
        row, out = measure(str(options), flex_paste(setting), call, ref, current, w)
        current = out if current is None else current
        rows.append(row)
        print(f"  {row.ms:.4f} ms  {row.setting}  {row.verdict}", flush=True)
    return rows


def sweep_mla(settings: Sequence[tuple[SliceConfig | TokenConfig, int]] | None = None, parts: bool = False,
              variant: str = "optimized_mla_absorption_fused_qo") -> list[Row]:
    """``variant``'s step (the query projection to the output projection, captured as one graph) per
    setting (all of ``mla_settings`` by default); ``parts``: then print its sub-steps' times at the
    variant's own setting."""
    module = _module(variant)
    ref = _on_cuda(_module("baseline_mla_absorption").get_benchmark()).run()
    lean = _on_cuda(module.get_benchmark())
    own = lean.slice_config, lean.splits
    rows, current = [], None
    for config, splits in settings or mla_settings((module.SLICE, module.SPLITS)):
        lean.slice_config, lean.splits = config, splits
        row, out = measure(f"{config}, {splits} slices", mla_paste(config, splits), lambda: lean.front() @ lean.w_o.T,
                           ref, current, lean.workload)
        current = out if current is None else current
        rows.append(row)
        print(f"  {row.ms:.4f} ms  {row.setting}  {row.verdict}", flush=True)
    lean.slice_config, lean.splits = own
    for name, ms in (mla_parts(lean) if parts else {}).items():
        print(f"  sub-step at {own[0]}, {own[1]} slices: {name} {ms * 1e3:.1f} us")
    return rows


def sweep_flash(settings: Sequence[FlashSetting] | None = None, budget_s: float = 75.0) -> list[Row]:
    """The TMA kernel per setting (all of ``flash_settings`` by default) until ``budget_s``; prints TFLOP/s."""
    base = _on_cuda(_module("baseline_flash_attention_triton").get_benchmark())
    ref, w = base.run(), base.workload
    rows, current, start = [], None, time.perf_counter()
    for setting in settings or flash_settings():
        if rows and time.perf_counter() - start > budget_s:
            print(f"budget of {budget_s:.0f} s spent: {setting} not tried")
            continue
        row, out = measure(str(setting), flash_paste(setting), flash_call(setting, base.q, base.k, base.v), ref,
                           current, w)
        current = out if current is None else current
        rows.append(row)
        print(f"  {row.ms:.4f} ms  {w.flops / row.ms / 1e9:.0f} TFLOP/s  {row.setting}  {row.verdict}", flush=True)
    return rows


def mla_parts(lean) -> dict[str, float]:
    """Milliseconds a replay of each sub-step of the variant's step, at ``lean``'s setting."""
    w = lean.workload
    q = lean.x @ lean.w_q.T
    q_all = absorbed_query(q, lean.w_uk, lean.cos, lean.sin, w.rope)
    o_lat = lean.attend(q_all)
    o = torch.bmm(o_lat.transpose(0, 1), lean.w_uv_t).transpose(0, 1).reshape(w.batch, -1)
    parts = {"q projection (x @ W_q^T)": lambda: lean.x @ lean.w_q.T,
             "absorbed_query": lambda: absorbed_query(q, lean.w_uk, lean.cos, lean.sin, w.rope),
             "latent attention (_slice or _slice_t, + _merge)": lambda: lean.attend(q_all),
             "W_UV bmm": lambda: torch.bmm(o_lat.transpose(0, 1), lean.w_uv_t),
             "output projection (o @ W_o^T)": lambda: o @ lean.w_o.T}
    return {name: replay_ms(graphed(fn)[0]) for name, fn in parts.items()}


def _module(name: str) -> ModuleType:
    return import_module_at(HERE / f"{name}.py")


def _on_cuda(bench):
    bench.device = torch.device("cuda")
    bench.setup()
    return bench


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pair", choices=("flexdecoding", "mla", "mla_wgmma", "flash"), help="which pair's best variant to sweep")
    parser.add_argument("--budget", type=float, default=65.0,
                        help="flexdecoding, flash: seconds after which no new setting starts (~90 s in all)")
    parser.add_argument("--only", default="", help="comma-separated indices into the setting list (0: the current)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("kernel_sweep needs a CUDA GPU")
    pick = [int(i) for i in args.only.split(",") if i.strip()]
    if args.pair == "flexdecoding":
        settings = flex_settings(_module("optimized_flexdecoding_fused").SPLIT_KV)
        rows = sweep_flexdecoding([settings[i] for i in pick] or settings, args.budget)
        gbytes = _module("baseline_flexdecoding").WORKLOAD.bytes / 1e9
    elif args.pair == "flash":
        settings = flash_settings()
        rows = sweep_flash([settings[i] for i in pick] or settings, args.budget)
        gbytes = _module("baseline_flash_attention_triton").WORKLOAD.bytes / 1e9
    elif args.pair == "mla_wgmma":
        wgmma, lean = _module("optimized_mla_absorption_wgmma"), _module("optimized_mla_absorption_fused_qo")
        settings = [*mla_wgmma_settings((wgmma.TOKENS, wgmma.SPLITS)), (lean.SLICE, lean.SPLITS)]
        rows = sweep_mla([settings[i] for i in pick] or settings, parts=True, variant="optimized_mla_absorption_wgmma")
        gbytes = _module("baseline_mla_absorption").WORKLOAD.bytes / 1e9
    else:
        lean = _module("optimized_mla_absorption_fused_qo")
        settings = mla_settings((lean.SLICE, lean.SPLITS))
        rows = sweep_mla([settings[i] for i in pick] or settings, parts=True)
        gbytes = _module("baseline_mla_absorption").WORKLOAD.bytes / 1e9
    print("\n".join(table(rows, gbytes)))


if __name__ == "__main__":
    main()
