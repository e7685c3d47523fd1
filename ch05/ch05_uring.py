"""Many reads at random offsets of one file in one system call: a minimal io_uring through ctypes.

``os.preadv`` reads one contiguous range of the file per call, so a batch of samples at random
offsets costs a system call (and its Python) per sample. io_uring takes a whole batch of read
requests from a ring shared with the kernel: the requests are written with numpy (one vector store
per field, no Python per sample), ``io_uring_enter`` submits them all, and for data in the page cache
the kernel serves each one inline during that call, one thread, the same copy out of the page cache
as ``pread``. No liburing needed: the three system calls and the ring layout of ``<linux/io_uring.h>``.

A kernel without io_uring, or a container or sysctl (``kernel.io_uring_disabled``) that forbids it,
raises :class:`OSError` in :class:`Ring`'s constructor.
"""

from __future__ import annotations

import ctypes
import mmap
import os

import numpy as np

SYS_SETUP, SYS_ENTER = 425, 426  # the same numbers on every architecture (added after the unified table)
OFF_SQ_RING, OFF_CQ_RING, OFF_SQES = 0, 0x8000000, 0x10000000
OP_READV, OP_READ = 1, 22  # IORING_OP_READV (Linux 5.1): into an iovec array; IORING_OP_READ (5.6): into one buffer
ENTER_GETEVENTS = 1

SQE = np.dtype({"names": ["opcode", "flags", "ioprio", "fd", "off", "addr", "len", "rw_flags", "user_data"],
                "formats": [np.uint8, np.uint8, np.uint16, np.int32, np.uint64, np.uint64, np.uint32, np.uint32,
                            np.uint64],
                "offsets": [0, 1, 2, 4, 8, 16, 24, 28, 32], "itemsize": 64})
CQE = np.dtype({"names": ["user_data", "res", "flags"], "formats": [np.uint64, np.int32, np.uint32],
                "offsets": [0, 8, 12], "itemsize": 16})


class _RingOffsets(ctypes.Structure):  # io_sqring_offsets and io_cqring_offsets have the same shape
    _fields_ = [(n, ctypes.c_uint32) for n in ("head", "tail", "ring_mask", "ring_entries", "f4", "f5", "f6",
                                               "resv1")] + [("user_addr", ctypes.c_uint64)]


class _Params(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint32) for n in ("sq_entries", "cq_entries", "flags", "sq_thread_cpu",
                                               "sq_thread_idle", "features", "wq_fd")] + [
        ("resv", ctypes.c_uint32 * 3), ("sq_off", _RingOffsets), ("cq_off", _RingOffsets)]


assert ctypes.sizeof(_Params) == 120  # struct io_uring_params
_libc = ctypes.CDLL(None, use_errno=True)


def _syscall(*args: int) -> int:
    ret = _libc.syscall(*(ctypes.c_long(a) for a in args))
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"io_uring system call {args[0]}: {os.strerror(err)}")
    return ret


class Ring:
    """One io_uring of ``entries`` slots (a power of two) for reads from one file descriptor."""

    def __init__(self, entries: int) -> None:
        p = _Params()
        self.fd = _syscall(SYS_SETUP, entries, ctypes.addressof(p))
        try:
            sq, cq, self.entries = p.sq_off, p.cq_off, p.sq_entries
            self._maps = [mmap.mmap(self.fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=off)
                          for size, off in ((sq.f6 + 4 * p.sq_entries, OFF_SQ_RING),  # f6: the index array
                                            (cq.f5 + CQE.itemsize * p.cq_entries, OFF_CQ_RING),  # f5: the CQEs
                                            (SQE.itemsize * p.sq_entries, OFF_SQES))]
            sq_words, cq_words = (np.frombuffer(m, np.uint32) for m in self._maps[:2])
            self.sq_head, self.sq_tail = sq_words[sq.head // 4:][:1], sq_words[sq.tail // 4:][:1]
            self.sq_index = sq_words[sq.f6 // 4:][:p.sq_entries]
            self.cq_head, self.cq_tail = cq_words[cq.head // 4:][:1], cq_words[cq.tail // 4:][:1]
            self.cq_mask = int(cq_words[cq.ring_mask // 4])
            self.cqes = np.frombuffer(self._maps[1], CQE, count=p.cq_entries, offset=cq.f5)
            self.sqes = np.frombuffer(self._maps[2], SQE, count=p.sq_entries)
            self.sq_mask = int(sq_words[sq.ring_mask // 4])
        except BaseException:
            self.close()
            raise

    def read(self, fd: int, offsets: np.ndarray, addrs: np.ndarray, lens: np.ndarray | int,
             ops: np.ndarray | int = OP_READ) -> np.ndarray:
        """Submit one read per entry of ``offsets`` (at most ``entries``) from ``fd`` and wait for all:
        ``OP_READ``: ``lens`` bytes into the host address ``addrs``; ``OP_READV``: into the ``lens``
        buffers of the iovec array (address, length pairs of 64 bits) at ``addrs``, one after another.
        Returns each read's result, in the order given: bytes read, or -errno."""
        n = len(offsets)
        assert n == len(addrs) <= self.entries and self.cq_head[0] == self.cq_tail[0]
        sqes = self.sqes[:n]
        sqes["opcode"], sqes["flags"], sqes["ioprio"], sqes["rw_flags"] = ops, 0, 0, 0
        sqes["fd"], sqes["len"], sqes["off"], sqes["addr"] = fd, lens, offsets, addrs
        sqes["user_data"] = np.arange(n, dtype=np.uint64)
        tail = int(self.sq_tail[0])
        self.sq_index[(tail + np.arange(n)) & self.sq_mask] = np.arange(n, dtype=np.uint32)
        self.sq_tail[0] = (tail + n) & 0xFFFFFFFF  # the slots' stores come first (x86 keeps store order)
        done = 0
        while done < n:
            took = _syscall(SYS_ENTER, self.fd, n - done, 0, 0, 0, 0)
            if took == 0:
                raise OSError(f"io_uring_enter took none of {n - done} requests")
            done += took
        head = int(self.cq_head[0])
        while (int(self.cq_tail[0]) - head) & 0xFFFFFFFF < n:
            _syscall(SYS_ENTER, self.fd, 0, n - ((int(self.cq_tail[0]) - head) & 0xFFFFFFFF), ENTER_GETEVENTS, 0, 0)
        got = self.cqes[(head + np.arange(n)) & self.cq_mask]
        self.cq_head[0] = (head + n) & 0xFFFFFFFF
        res = np.empty(n, np.int64)
        res[got["user_data"].astype(np.int64)] = got["res"]  # completions may come in any order
        return res

    def close(self) -> None:
        """Unmap the rings (the numpy views first: a map with views on it cannot close) and close."""
        for name in ("sq_head", "sq_tail", "sq_index", "cq_head", "cq_tail", "cqes", "sqes"):
            self.__dict__.pop(name, None)
        for m in self.__dict__.pop("_maps", []):
            m.close()
        os.close(self.fd)


def file_order_runs(offsets: np.ndarray, size: int, cap: int = 64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The reads of ``size`` bytes at ``offsets`` put in file order, back-to-back ones merged into runs
    (at most ``cap`` a run; the same offset twice is two runs). Returns ``(perm, heads, counts)``:
    ``perm`` lists the reads in file order; run ``j`` is the reads ``perm[heads[j]:heads[j] + counts[j]]``,
    one contiguous range of the file from ``offsets[perm[heads[j]]]``."""
    n = len(offsets)
    perm = np.argsort(offsets, kind="stable")
    ordered = offsets[perm].astype(np.uint64)
    new = np.ones(n, dtype=bool)
    new[1:] = ordered[1:] != ordered[:-1] + np.uint64(size)
    k = np.arange(n)
    new |= (k - np.maximum.accumulate(np.where(new, k, 0))) % cap == 0  # split runs longer than cap
    heads = np.flatnonzero(new)
    return perm, heads, np.diff(np.append(heads, n))


def run_requests(perm: np.ndarray, heads: np.ndarray, counts: np.ndarray, size: int, base: int,
                 iov: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """io_uring requests for :func:`file_order_runs`' runs when read ``i`` goes to host address
    ``base + i * size``: a lone read is one ``OP_READ`` into its row; a longer run one ``OP_READV``
    through ``iov`` (a ``(len(perm), 2)`` uint64 array it fills), whose rows scatter over the batch.
    Returns ``(ops, addrs, lens)`` for :meth:`Ring.read`."""
    assert iov.dtype == np.uint64 and iov.flags.c_contiguous and iov.shape[1] == 2 and len(iov) >= len(perm)
    dst = np.uint64(base) + perm.astype(np.uint64) * np.uint64(size)
    iov[:len(perm), 0], iov[:len(perm), 1] = dst, size
    lone = counts == 1
    ops = np.where(lone, OP_READ, OP_READV).astype(np.uint8)
    addrs = np.where(lone, dst[heads], np.uint64(iov.ctypes.data) + heads.astype(np.uint64) * np.uint64(16))
    return ops, addrs, np.where(lone, size, counts).astype(np.uint32)
