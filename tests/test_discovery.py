from __future__ import annotations

import pytest
from conftest import FIXTURE_PAIRS, REPO

from aisp.harness.discovery import TargetError, normalize_chapter, pairs_in, resolve_targets


def test_chapter_aliases():
    assert normalize_chapter("ch1") == "ch01" and normalize_chapter("CH13") == "ch13"
    assert [p.target for p in resolve_targets(["ch1"], REPO)] == [p.target for p in resolve_targets(["ch01"], REPO)]


def test_single_pair_target():
    pairs = resolve_targets(["ch01:batch_size"], REPO)
    assert [p.target for p in pairs] == ["ch01:batch_size"]
    assert pairs[0].optimized[0].name == "optimized_batch_size.py"


def test_unknown_target_lists_close_matches():
    with pytest.raises(TargetError, match="ch01:batch_size"):
        resolve_targets(["ch01:batch_sise"], REPO)
    with pytest.raises(TargetError, match="Unknown target"):
        resolve_targets(["nothing_like_it"], REPO)


def test_root_folder_pairs():
    pairs = resolve_targets(["pairs:good"], REPO, (FIXTURE_PAIRS,))
    assert pairs[0].baseline.name == "baseline_good.py"
    with pytest.raises(TargetError, match="no such folder"):
        resolve_targets([], REPO, (FIXTURE_PAIRS / "missing",))


def test_variants_pair_with_longest_baseline(tmp_path):
    for name in ("baseline_perf", "optimized_perf", "optimized_perf_pinned", "baseline_perf_x",
                 "optimized_perf_x_fast", "optimized_orphan", "baseline_lonely"):
        (tmp_path / f"{name}.py").write_text("")
    found = pairs_in(tmp_path, "mine")
    pairs = {p.name: [o.stem for o in p.optimized] for p in found}
    assert pairs == {"perf": ["optimized_perf", "optimized_perf_pinned"], "perf_x": ["optimized_perf_x_fast"],
                     "lonely": [], "orphan": ["optimized_orphan"]}
    problems = {p.name: p.problem for p in found}
    assert problems["perf"] is problems["perf_x"] is None
    assert problems["lonely"] == "baseline_lonely.py has no optimized_lonely[_<variant>].py beside it"
    assert problems["orphan"] == "optimized_orphan.py has no baseline_orphan.py beside it"


def test_same_named_pair_files_of_two_chapters_load_in_one_process():
    from aisp.harness.loader import load_benchmark

    ch01 = load_benchmark(REPO / "ch01" / "optimized_gemm.py")
    ch03 = load_benchmark(REPO / "ch03" / "optimized_gemm.py")
    again = load_benchmark(REPO / "ch01" / "optimized_gemm.py")
    assert type(ch01).__module__ == type(ch03).__module__ == "optimized_gemm"
    assert type(ch01) is not type(ch03) and type(again).__name__ == type(ch01).__name__
