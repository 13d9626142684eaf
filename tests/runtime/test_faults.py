"""A call whose allocation fails raises a clear error, records no replay entry that
would fail the next call, and the next call with a sane input works.

On a GPU (``gpu`` tests, CuPy input) the failure is real: CuPy's memory pool is
limited to what the input already holds, so the workspace allocation runs out of
device memory, on a first call (while recording) and on a replayed one. Under the
simulator the same sequence runs with the workspace allocation made to fail.
Results are int64 cumulative sums of small integers: compared exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import numbakern as nk
from numbakern.core import arrays
from numbakern.runtime import replay


def _entries(fn, shape):
    return [k for k in fn.replay_table
            if any(isinstance(p, tuple) and p[2:3] == (shape,) for p in k)]


def test_a_failed_allocation_raises_and_leaves_no_replay_entry(monkeypatch):
    n = 53  # a shape no other test uses: a first call
    h = np.arange(n, dtype=np.int64) % 7
    x = cuda.to_device(h)
    real_empty = arrays.Workspace.empty

    def no_memory(self, shape, dtype):
        raise MemoryError("out of device memory (injected)")

    monkeypatch.setattr(arrays.Workspace, "empty", no_memory)
    with pytest.raises(MemoryError, match="out of device memory"):
        nk.cumsum(x)
    assert _entries(nk.cumsum, (n,)) == []
    monkeypatch.setattr(arrays.Workspace, "empty", real_empty)
    assert np.array_equal(nk.cumsum(x).copy_to_host(), np.cumsum(h))
    assert len(_entries(nk.cumsum, (n,))) == 1
    before = replay.counts["replayed"]
    assert np.array_equal(nk.cumsum(cuda.to_device(h[::-1].copy())).copy_to_host(),
                          np.cumsum(h[::-1]))
    assert replay.counts["replayed"] == before + 1


@pytest.mark.gpu
def test_out_of_device_memory_on_the_gpu_is_a_clear_error_and_the_next_call_works():
    cupy = pytest.importorskip("cupy")
    # A pool of the test's own: the default pool's chunks, split among arrays other
    # tests left alive, may hold free room enough that no allocation ever reaches the limit.
    pool = cupy.cuda.MemoryPool()
    n = 1 << 24  # 128 MB of int64; the cumsum's output needs as much again
    for key in _entries(nk.cumsum, (n,)):  # a first call, whatever ran before in this process
        del nk.cumsum.replay_table[key]
    tensor_table = nk.cumsum.tensor_replay_table  # keys (type, (dtype, shape, ...), ...)
    for key in [k for k in tensor_table if k[1][1] == (n,)]:
        del tensor_table[key]
    with cupy.cuda.using_allocator(pool.malloc):
        x = cupy.arange(n, dtype=cupy.int64) % 7
        want = cupy.asnumpy(cupy.cumsum(x))
        cupy.cuda.Device().synchronize()
        pool.free_all_blocks()
        # First call of the signature (recording): the workspace cannot be allocated.
        pool.set_limit(size=pool.total_bytes() + (1 << 20))
        with pytest.raises(cupy.cuda.memory.OutOfMemoryError):
            nk.cumsum(x)
        assert _entries(nk.cumsum, (n,)) == []
        pool.set_limit(size=0)  # no limit
        assert np.array_equal(cupy.asnumpy(nk.cumsum(x)), want)  # records
        assert len(_entries(nk.cumsum, (n,))) == 1
        # A replayed call: its one allocation fails the same way, and the entry stays good.
        cupy.cuda.Device().synchronize()
        pool.free_all_blocks()
        pool.set_limit(size=pool.total_bytes() + (1 << 20))
        with pytest.raises(cupy.cuda.memory.OutOfMemoryError):
            nk.cumsum(x)
        pool.set_limit(size=0)
        before = replay.counts["replayed"]
        assert np.array_equal(cupy.asnumpy(nk.cumsum(x)), want)
        assert replay.counts["replayed"] == before + 1
