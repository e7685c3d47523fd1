"""Chapter 13 tools: allocator shim checks fire on every mismatch, memory_profiling's figures,
the compiled-autograd tutorial, the training scripts and the Transformer Engine validator."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_ch13_pairs import CH13, load

SEEN_DEFAULT = dict(backend="native", max_split_size=None, probe_expandable=False)


def allocator():
    return load("custom_allocator")


def test_conf_string_lists_each_option() -> None:
    a = allocator()
    cfg = a.AllocatorConfig(expandable_segments=True, max_split_size_mb=256, garbage_collection_threshold=0.8,
                            roundup_power2_divisions=4)
    assert cfg.conf() == ("expandable_segments:True,max_split_size_mb:256,"
                          "garbage_collection_threshold:0.8,roundup_power2_divisions:4")
    assert a.AllocatorConfig(backend="cudaMallocAsync").conf() == "backend:cudaMallocAsync"
    assert a.AllocatorConfig().conf() == ""


def test_apply_before_cuda_starts_sets_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    a = allocator()
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    for var in a.ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    a.apply(a.AllocatorConfig(expandable_segments=True))
    assert all(os.environ[v] == "expandable_segments:True" for v in a.ENV_VARS)


def test_apply_after_cuda_starts_refuses_a_backend_change(monkeypatch: pytest.MonkeyPatch) -> None:
    a = allocator()
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda.memory, "get_allocator_backend", lambda: "native")
    with pytest.raises(RuntimeError, match="before CUDA initializes"):
        a.apply(a.AllocatorConfig(backend="cudaMallocAsync"))


@pytest.mark.parametrize(("asked", "seen", "problem"), [
    (dict(backend="cudaMallocAsync"), {}, "backend is 'native'"),
    (dict(expandable_segments=True), {}, "is_expandable=False"),
    (dict(), dict(probe_expandable=True), "is_expandable=True"),
    (dict(max_split_size_mb=128), dict(max_split_size=-1), "max_split_size is -1"),
])
def test_check_reports_each_setting_not_in_effect(asked: dict, seen: dict, problem: str) -> None:
    a = allocator()
    report = a.check(a.AllocatorConfig(**asked), a.Observed(**{**SEEN_DEFAULT, **seen}))
    assert not report.ok and problem in " ".join(report.problems)


def test_check_confirms_settings_in_effect_and_names_the_unobservable() -> None:
    a = allocator()
    cfg = a.AllocatorConfig(expandable_segments=True, max_split_size_mb=128, garbage_collection_threshold=0.8)
    report = a.check(cfg, a.Observed("native", 128 << 20, True))
    assert report.ok and len(report.confirmed) == 3
    assert report.unverified == ["garbage_collection_threshold (no observable trace)"]


def test_fragmentation_is_reserved_memory_not_in_use_at_peak() -> None:
    mp = load("memory_profiling")
    s = mp.summarize({"allocated_bytes.all.peak": 600, "reserved_bytes.all.peak": 800})
    assert s["fragmentation"] == pytest.approx(0.25)
    assert "25.0%" in mp.table([{"variant": "baseline", "setting": "default", **s}])


def test_memory_tools_skip_without_cuda_and_say_why() -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    for script in ("memory_profiling.py", "custom_allocator.py"):
        done = subprocess.run([sys.executable, str(CH13 / script)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and "SKIPPED" in done.stdout


def test_compiled_autograd_captures_the_backward_and_matches_eager() -> None:
    ca = load("compiled_autograd")
    cfg = load("ch13_gpt").GPTConfig(vocab=64, seq=16, dim=32, heads=2, layers=2)
    results = ca.tutorial(cfg, 2, torch.device("cpu"), "aot_eager", steps=1)
    assert results["compile"].backward_captures == 0
    assert results["compile+compiled_autograd"].backward_captures >= 1
    assert results["compile"].forward_graphs > 1
    assert ca.report(results, atol=1e-5)


def test_compiled_autograd_report_fails_on_different_gradients() -> None:
    ca = load("compiled_autograd")
    good = ca.Outcome([torch.ones(3)], 1.0, 0, 0)
    bad = ca.Outcome([torch.ones(3) * 1.01], 1.0, 2, 1)
    assert not ca.report({"eager": good, "compile+compiled_autograd": bad}, atol=1e-5)


def test_train_loop_learns_and_writes_a_profile(tmp_path: Path) -> None:
    train = load("train")
    cfg = train.parse(["--steps", "12", "--warmup", "2", "--batch", "4", "--seq", "16", "--dim", "32",
                       "--heads", "2", "--layers", "2", "--vocab", "64", "--lr", "1e-2", "--device", "cpu",
                       "--profile-dir", str(tmp_path)])
    result = train.train(cfg)
    assert result.losses[-1] < result.losses[0] - 0.3
    assert result.goodput_tokens_s > 0
    assert (tmp_path / "trace.json").stat().st_size > 0 and "Name" in (tmp_path / "ops.txt").read_text()


def test_deepseek_v3_mini_learns() -> None:
    v3 = load("train_deepseek_v3")
    c = v3.V3Config(vocab=64, seq=16, dim=32, layers=2, heads=2, q_lora=24, kv_lora=16, nope_dim=8, rope_dim=4,
                    v_dim=12, ffn=64, experts=4, top_k=2, expert_ffn=16)
    result = v3.train(c, steps=25, batch=4, lr=1e-2, device=torch.device("cpu"))
    assert result.losses[-1] < result.losses[0] - 0.3
    assert result.imbalance_first >= 1.0


def test_moe_balancing_raises_the_bias_of_underloaded_experts() -> None:
    v3 = load("train_deepseek_v3")
    moe = v3.MoE(v3.V3Config(dim=8, experts=4, top_k=2, expert_ffn=4))
    moe.load.copy_(torch.tensor([10.0, 0.0, 5.0, 5.0]))
    moe.balance()
    assert moe.select_bias[0] < 0 < moe.select_bias[1] and moe.select_bias[2] == 0


def test_rope_preserves_norms_and_moves_positions() -> None:
    v3 = load("train_deepseek_v3")
    x = torch.randn(2, 5, 8)
    y = v3.rope(x)
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1))
    torch.testing.assert_close(y[:, 0], x[:, 0])
    assert not torch.allclose(y[:, 1:], x[:, 1:])


def test_te_validate_skips_with_its_reason_where_te_or_cuda_is_missing(capsys: pytest.CaptureFixture) -> None:
    te_pair = load("optimized_precisionfp8_te")
    if te_pair.unmet_requirements(te_pair.WORKLOAD.requires, te_pair.aisp.default_device()) is None:
        pytest.skip("Transformer Engine and an fp8 GPU are present")
    assert te_pair.validate() == 0
    assert "SKIPPED" in capsys.readouterr().out


@pytest.mark.gpu
def test_allocator_settings_are_verified_in_a_fresh_process() -> None:
    script = str(CH13 / "custom_allocator.py")
    done = subprocess.run([sys.executable, script, "--expandable-segments", "--max-split-size-mb", "256"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "in effect: expandable_segments True" in done.stdout


@pytest.mark.gpu
def test_allocator_check_fires_on_a_live_process_without_the_setting() -> None:
    code = ("import sys, custom_allocator as a; r = a.verify(a.AllocatorConfig(expandable_segments=True)); "
            "print(r.problems); sys.exit(0 if not r.ok else 3)")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                          cwd=CH13)
    assert done.returncode == 0 and "is_expandable=False" in done.stdout, done.stdout + done.stderr
