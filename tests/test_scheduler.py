"""The --gpus scheduler on a CPU: GPU lists are made up (the scheduler only sees ordinals and cores),
jobs are stubs that block on events, so what is tested is placement, waiting, CPU shares, stopping
and re-queueing, never how long anything took."""

from __future__ import annotations

import threading

import pytest

from aisp.harness.scheduler import (
    Events,
    Gpu,
    Hint,
    Outcome,
    Share,
    Topology,
    cpu_shares,
    group_share,
    order,
    parse_gpus,
    parse_shard,
    partition,
    pick_group,
    run_jobs,
)

WAIT_S = 60  # a liveness bound for a stuck test, never a timing assertion


def four_gpus(cpu_count: int = 16, nvlink: tuple[tuple[int, int], ...] = ()) -> Topology:
    """Four GPUs, two per NUMA node of eight cores each."""
    nodes = {0: tuple(range(8)), 1: tuple(range(8, 16))}
    gpus = tuple(Gpu(i, str(i), nodes[i // 2], i // 2) for i in range(4))
    return Topology(gpus, cpu_count, frozenset(frozenset(p) for p in nvlink))


def test_gpus_and_shard_syntax():
    assert parse_gpus("all") == "all" and parse_gpus("4") == 4 and parse_gpus("0,2,3") == (0, 2, 3)
    assert parse_gpus("2,") == (2,)
    for bad in ("0", "-1", "0,0", "a", "1,,2", ""):
        with pytest.raises(ValueError, match="--gpus"):
            parse_gpus(bad)
    assert parse_shard("0/4") == (0, 4) and parse_shard("3/4") == (3, 4)
    for bad in ("4/4", "1", "1/0", "-1/2", "a/b"):
        with pytest.raises(ValueError, match="--shard"):
            parse_shard(bad)


def test_cpu_shares_never_oversubscribe_and_stay_on_the_gpus_node():
    topo = four_gpus()
    shares = cpu_shares(topo)
    assert all(s.threads == 4 for s in shares.values())  # 16 cores // 4 workers
    cores = [c for s in shares.values() for c in s.cpus]
    assert len(cores) == len(set(cores)) == 16, "each core in exactly one share"
    assert set(shares[0].cpus) | set(shares[1].cpus) == set(range(8))  # GPUs 0, 1 on node 0
    assert set(shares[3].cpus) <= set(range(8, 16))
    assert sum(s.threads for s in shares.values()) <= topo.cpu_count
    env = shares[2].env()
    assert env["CUDA_VISIBLE_DEVICES"] == "2" and env["OMP_NUM_THREADS"] == "4" and env["AISP_CPUS"] == "8,9,10,11"


def test_cpu_shares_without_numa_cap_threads_only():
    topo = Topology(tuple(Gpu(i, f"GPU-{i}") for i in range(3)), 10)
    shares = cpu_shares(topo)
    assert [s.threads for s in shares.values()] == [3, 3, 3] and all(not s.cpus for s in shares.values())
    assert "AISP_CPUS" not in shares[0].env() and shares[1].env()["CUDA_VISIBLE_DEVICES"] == "GPU-1"


def test_fewer_cores_than_gpus_gives_one_core_each():
    topo = Topology(tuple(Gpu(i, str(i), (0, 1)) for i in range(4)), 2)
    shares = cpu_shares(topo)
    assert [s.cpus for s in shares.values()] == [(0,), (1,), (0,), (1,)]
    assert all(s.threads == 1 for s in shares.values())


def test_group_share_unions_the_cores_and_lists_the_gpus():
    shares = cpu_shares(four_gpus())
    share = group_share((1, 2), shares)
    assert share.gpus == ("1", "2") and share.threads == 4
    assert set(share.cpus) == set(shares[1].cpus) | set(shares[2].cpus)
    assert group_share((), shares) == Share()


def test_groups_prefer_nvlink_peers():
    linked = four_gpus(nvlink=((0, 2), (1, 3)))
    assert pick_group({0, 1, 2, 3}, 2, linked) == (0, 2)
    assert pick_group({1, 2, 3}, 2, linked) == (1, 3)
    assert pick_group({0, 1}, 2, linked) == (0, 1), "no linked pair free: any two"
    assert pick_group({0, 1, 2, 3}, 2, four_gpus()) == (0, 1)
    assert pick_group({3}, 2, linked) is None


def test_order_puts_big_groups_then_long_pairs_first():
    hints = {"a": Hint(1, 10), "b": Hint(1, 300), "c": Hint(2, 5), "d": Hint(1, 300)}
    assert order(["a", "b", "c", "d"], hints) == ["c", "b", "d", "a"]


def test_partition_is_deterministic_balanced_and_complete():
    keys = [f"ch{i:02d}_p{j}" for i in range(1, 6) for j in range(7)]
    hints = {k: Hint(1, 10.0 * (1 + (7 * i) % 9)) for i, k in enumerate(keys)}
    shards = partition(keys, hints, 3)
    assert partition(list(reversed(keys)), hints, 3) == [list(reversed(s)) for s in shards], "input order only orders"
    assert sorted(k for s in shards for k in s) == sorted(keys)
    loads = [sum(hints[k].seconds for k in s) for s in shards]
    assert max(loads) - min(loads) <= max(h.seconds for h in hints.values())
    assert partition(["x"], {}, 3) == [["x"], [], []]


class Recorder:
    """Stub jobs: each records its share, waits for its gate, and tracks how many run at once.
    ``started``: the jobs in the order the scheduler started them (its own ``started`` event, in its
    thread); ``log`` is in the order the jobs' threads got going, which for jobs started together is
    the OS scheduler's."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now: dict[str, Share] = {}
        self.peak = 0
        self.log: list[tuple[str, str, tuple[str, ...]]] = []
        self.started: list[str] = []
        self.gates: dict[str, threading.Event] = {}

    def gate(self, key: str) -> threading.Event:
        with self.lock:
            return self.gates.setdefault(key, threading.Event())

    def work(self, key: str, share: Share, stop: threading.Event) -> Outcome:
        with self.lock:
            self.now[key] = share
            self.peak = max(self.peak, len(self.now))
            self.log.append(("start", key, share.gpus))
        self.gate(key).wait(WAIT_S)
        with self.lock:
            del self.now[key]
        return Outcome({"key": key, "gpus": share.gpus})


def run_in_thread(keys, hints, topo, rec: Recorder, done: list) -> threading.Thread:
    events = Events(lambda k, s: rec.started.append(k), lambda k, r: done.append(r))
    thread = threading.Thread(target=run_jobs, args=(keys, hints, topo, rec.work, events), daemon=True)
    thread.start()
    return thread


def wait_until(predicate) -> None:
    """Poll a condition set by other threads (bounded only so a broken test ends)."""
    event = threading.Event()
    for _ in range(WAIT_S * 100):
        if predicate():
            return
        event.wait(0.01)
    pytest.fail("condition never held")


def test_single_gpu_pairs_run_one_per_gpu_at_once():
    rec, done = Recorder(), []
    keys = [f"p{i}" for i in range(6)]
    thread = run_in_thread(keys, {}, four_gpus(), rec, done)
    wait_until(lambda: len(rec.now) == 4)
    assert sorted(s.gpus for s in rec.now.values()) == [("0",), ("1",), ("2",), ("3",)]
    for key in keys:
        rec.gate(key).set()
    thread.join(WAIT_S)
    assert rec.peak == 4 and sorted(r["key"] for r in done) == keys


def test_default_topology_runs_one_at_a_time_with_the_environment_untouched():
    rec, done = Recorder(), []
    for key in ("a", "b", "c"):
        rec.gate(key).set()
    thread = run_in_thread(["a", "b", "c"], {"b": Hint(2, 1)}, Topology(), rec, done)
    thread.join(WAIT_S)
    assert rec.peak == 1 and len(done) == 3
    assert all(gpus == () for _, _, gpus in rec.log)


def test_a_multi_gpu_pair_waits_for_its_group_and_holds_it_alone():
    """Two GPUs: the long single pair starts first only if the 2-GPU pair cannot; here the 2-GPU pair
    goes first (biggest group first), the singles wait, then share the GPUs."""
    rec, done = Recorder(), []
    topo = Topology(four_gpus().gpus[:2], 16, frozenset({frozenset((0, 1))}))
    hints = {"pair2": Hint(2, 10), "s1": Hint(1, 500), "s2": Hint(1, 400)}
    thread = run_in_thread(["s1", "s2", "pair2"], hints, topo, rec, done)
    wait_until(lambda: "pair2" in rec.now)
    assert rec.now["pair2"].gpus == ("0", "1") and len(rec.now) == 1
    rec.gate("pair2").set()
    wait_until(lambda: len(rec.now) == 2)
    assert {k: s.gpus for k, s in rec.now.items()} == {"s1": ("0",), "s2": ("1",)}
    rec.gate("s1").set()
    rec.gate("s2").set()
    thread.join(WAIT_S)
    assert rec.started == ["pair2", "s1", "s2"] and [k for _, k, _ in rec.log][0] == "pair2"


def test_the_head_of_the_queue_is_not_starved_by_smaller_pairs():
    """x turns out to need 2 GPUs while s1..s3 hold three of four: it waits at the head with GPU 0
    free, and s4 (behind it) does not take that GPU."""
    rec, done, calls = Recorder(), [], []

    def work(key: str, share: Share, stop: threading.Event) -> Outcome:
        if key == "x" and not calls:
            calls.append(share.gpus)
            return Outcome(None, needs=2)
        return rec.work(key, share, stop)
    hints = {"x": Hint(1, 900), **{f"s{i}": Hint(1, 10 - i) for i in range(1, 5)}}
    events = Events(lambda k, s: rec.started.append(k), lambda k, r: done.append(r))
    thread = threading.Thread(target=run_jobs, args=(list(hints), hints, four_gpus(), work, events), daemon=True)
    thread.start()
    wait_until(lambda: set(rec.now) == {"s1", "s2", "s3"})
    assert calls == [("0",)]
    rec.gate("s1").set()
    wait_until(lambda: "x" in rec.now)
    assert len(rec.now["x"].gpus) == 2 and "s4" not in rec.now
    for key in ("x", "s2", "s3", "s4"):
        rec.gate(key).set()
    thread.join(WAIT_S)
    assert rec.started == ["x", "s1", "s2", "s3", "x", "s4"] and len(done) == 5  # x first on GPU 0, then on two
    assert [k for _, k, _ in rec.log][3:] == ["x", "s4"]


def test_a_pair_that_needs_more_gpus_than_hinted_runs_again_with_them():
    topo = four_gpus()
    seen: list[tuple[str, ...]] = []

    def work(key: str, share: Share, stop: threading.Event) -> Outcome:
        seen.append(share.gpus)
        return Outcome("skipped: needs 2", needs=2) if len(share.gpus) < 2 else Outcome("ran")
    done: list = []
    run_jobs(["p"], {}, topo, work, Events(lambda k, s: None, lambda k, r: done.append(r)))
    assert [len(g) for g in seen] == [1, 2] and done == ["ran"]


def test_a_pair_that_needs_more_gpus_than_the_node_has_runs_once_on_all():
    seen: list[tuple[str, ...]] = []

    def work(key: str, share: Share, stop: threading.Event) -> Outcome:
        seen.append(share.gpus)
        return Outcome("skipped: needs 8 GPUs", needs=8)
    done: list = []
    run_jobs(["p"], {"p": Hint(8, 1)}, four_gpus(), work, Events(lambda k, s: None, lambda k, r: done.append(r)))
    assert seen == [("0", "1", "2", "3")] and done == ["skipped: needs 8 GPUs"]


def test_an_interrupt_stops_and_joins_every_running_job():
    topo, stopped, started = four_gpus(), [], threading.Semaphore(0)

    def work(key: str, share: Share, stop: threading.Event) -> Outcome:
        started.release()
        stop.wait(WAIT_S)
        stopped.append((key, stop.is_set()))
        return Outcome(None)

    def on_start(key: str, share: Share) -> None:
        if key == "p3":  # the fourth start: three jobs are running; Ctrl-C arrives here
            for _ in range(3):
                started.acquire(timeout=WAIT_S)
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        run_jobs([f"p{i}" for i in range(4)], {}, topo, work, Events(on_start, lambda k, r: None))
    assert sorted(stopped) == [("p0", True), ("p1", True), ("p2", True)]


def test_a_job_that_raises_stops_the_others_and_is_raised():
    def work(key: str, share: Share, stop: threading.Event) -> Outcome:
        if key == "bad":
            raise RuntimeError("broken job")
        stop.wait(WAIT_S)
        return Outcome(stop.is_set())
    with pytest.raises(RuntimeError, match="broken job"):
        run_jobs(["bad", "slow"], {"bad": Hint(1, 1)}, four_gpus(), work, Events(lambda k, s: None, lambda k, r: None))


class HostLinkRecorder(Recorder):
    """A Recorder that also notes, as each job starts, the host-link jobs already running beside it."""

    def __init__(self, host_jobs: set[str]) -> None:
        super().__init__()
        self.host_jobs = host_jobs
        self.beside: list[tuple[str, set[str]]] = []

    def work(self, key: str, share: Share, stop: threading.Event) -> Outcome:
        with self.lock:
            if key in self.host_jobs:
                self.beside.append((key, self.host_jobs & set(self.now)))
        return super().work(key, share, stop)


def test_host_link_pairs_never_run_together_and_the_others_fill_the_gap():
    """ch11:bidirectional_copy read 80% of its ceiling beside ch05:uint8_transfer's H2D copies on 2 x H200:
    h2 (the next in the queue) is passed over while h1 runs, a and then b take the other GPU."""
    hints = {"h1": Hint(1, 900, True), "h2": Hint(1, 800, True), "a": Hint(1, 100), "b": Hint(1, 50)}
    rec, done = HostLinkRecorder({"h1", "h2"}), []
    thread = run_in_thread(list(hints), hints, Topology(four_gpus().gpus[:2], 16), rec, done)
    wait_until(lambda: set(rec.now) == {"h1", "a"})
    rec.gate("a").set()
    wait_until(lambda: set(rec.now) == {"h1", "b"})
    rec.gate("h1").set()
    wait_until(lambda: set(rec.now) == {"h2", "b"})
    for key in ("h2", "b"):
        rec.gate(key).set()
    thread.join(WAIT_S)
    assert rec.started == ["h1", "a", "b", "h2"] and len(done) == 4
    assert rec.beside == [("h1", set()), ("h2", set())], "no host-link job started beside another"


def test_pairs_not_bound_by_a_host_link_run_side_by_side_as_before():
    hints = {"h1": Hint(1, 900), "h2": Hint(1, 800), "a": Hint(1, 100)}
    rec, done = Recorder(), []
    thread = run_in_thread(list(hints), hints, Topology(four_gpus().gpus[:2], 16), rec, done)
    wait_until(lambda: set(rec.now) == {"h1", "h2"})
    for key in hints:
        rec.gate(key).set()
    thread.join(WAIT_S)
    assert rec.started == ["h1", "h2", "a"]


def test_a_multi_gpu_pair_keeps_its_claim_while_a_host_link_pair_is_passed_over():
    """Three GPUs: hb holds two; hc (next, a host-link pair) is passed over; m, the first that may
    start, waits for two GPUs with GPU 2 free, and the single s behind it does not take that GPU."""
    topo = Topology(four_gpus().gpus[:3], 12)
    hints = {"hb": Hint(2, 900, True), "hc": Hint(2, 800, True), "m": Hint(2, 700), "s": Hint(1, 10)}
    rec, done = Recorder(), []
    thread = run_in_thread(list(hints), hints, topo, rec, done)
    wait_until(lambda: "hb" in rec.now)
    rec.gate("hc").set()  # hc ends as soon as it runs: m then gets two GPUs
    assert set(rec.now) == {"hb"} and rec.started == ["hb"], "m waits for its group; s does not take GPU 2"
    rec.gate("hb").set()
    wait_until(lambda: "m" in rec.now)
    assert len(rec.now["m"].gpus) == 2
    for key in ("m", "s"):
        rec.gate(key).set()
    thread.join(WAIT_S)
    assert rec.started == ["hb", "hc", "m", "s"] and len(done) == 4


def test_a_held_multi_gpu_host_link_pair_gets_its_group_before_the_singles_behind_it():
    topo = Topology(four_gpus().gpus[:3], 12)
    hints = {"ha": Hint(2, 900, True), "hb": Hint(2, 800, True), "s1": Hint(1, 20), "s2": Hint(1, 10)}
    rec, done = Recorder(), []
    thread = run_in_thread(list(hints), hints, topo, rec, done)
    wait_until(lambda: set(rec.now) == {"ha", "s1"})
    rec.gate("ha").set()
    wait_until(lambda: "hb" in rec.now)
    assert rec.now["hb"].gpus == ("0", "1") and "s2" not in rec.now
    for key in ("hb", "s1", "s2"):
        rec.gate(key).set()
    thread.join(WAIT_S)
    assert rec.started == ["ha", "s1", "hb", "s2"]


def test_without_gpus_host_link_hints_change_nothing():
    hints = {"h1": Hint(1, 900, True), "a": Hint(1, 500), "h2": Hint(1, 400, True)}
    rec, done = Recorder(), []
    for key in hints:
        rec.gate(key).set()
    thread = run_in_thread(["h2", "a", "h1"], hints, Topology(), rec, done)
    thread.join(WAIT_S)
    assert rec.peak == 1 and rec.started == ["h1", "a", "h2"] == order(["h2", "a", "h1"], hints)
