"""ch13/compare_perf.py: the two newest timed ch13 runs compared, other chapters left out, a
slower ch13 pair gives exit 3, too few runs exit 2."""

from __future__ import annotations

import pytest
from synthetic_runs import pair, samples, variant, write_run
from test_ch13_pairs import load


@pytest.fixture(scope="module")
def perf():
    return load("compare_perf")


def _run(root, run_id, opt_ms, verify_only=False):
    results = [pair("ch13:kv_cache_naive", variant("baseline_kv_cache_naive", samples(10, 0.01)),
                    [variant("optimized_kv_cache_naive", samples(opt_ms, 0.01, seed=1))]),
               pair("ch01:batch_size", variant("baseline_batch_size", samples(10, 0.01, seed=2)),
                    [variant("optimized_batch_size", samples(5, 0.01, seed=3))])]
    return write_run(root, run_id, results, verify_only=verify_only)


def test_the_newest_timed_runs_are_compared_and_a_slower_pair_exits_3(perf, tmp_path, capsys):
    _run(tmp_path, "20261101-000000", 9.0)
    older = _run(tmp_path, "20261102-000000", 2.0)
    newer = _run(tmp_path, "20261103-000000", 4.0)
    _run(tmp_path, "20261104-000000", 1.0, verify_only=True)
    (tmp_path / "20261105-000000").mkdir()  # no summary: passed over
    assert perf.chapter_runs(tmp_path)[:2] == [newer, older]
    assert perf.main(["--artifacts-dir", str(tmp_path)]) == 3
    out = capsys.readouterr().out
    assert "ch13:kv_cache_naive" in out and "slower" in out and "ch01" not in out


def test_a_faster_newer_run_exits_0(perf, tmp_path, capsys):
    older, newer = _run(tmp_path, "a", 4.0), _run(tmp_path, "b", 2.0)
    assert perf.main([str(older), str(newer)]) == 0
    assert "faster" in capsys.readouterr().out


def test_too_few_runs_or_a_missing_folder_is_exit_2(perf, tmp_path, capsys):
    _run(tmp_path, "only", 2.0)
    assert perf.main(["--artifacts-dir", str(tmp_path)]) == 2
    assert "fewer than two timed runs" in capsys.readouterr().err
    assert perf.main([str(tmp_path / "only"), str(tmp_path / "gone")]) == 2
    assert "no such run folder" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        perf.main([str(tmp_path / "only")])
    assert exc.value.code == 2
