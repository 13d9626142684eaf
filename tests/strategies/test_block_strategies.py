"""Every registered block strategy alone, in one-block kernels (CUB's BlockReduce and
BlockScan tests): ops x dtypes x block sizes, and the warp forms with every run width.

Each kernel gives thread ``t`` element ``t`` (the identity past ``n``), calls the
strategy's device function once, and writes what the contract says is valid: thread
0's block reduce; every thread's inclusive and exclusive prefix and the total; lane 0's
warp reduce; every lane's warp scan within its run. Results are checked exactly
against a sequential Python fold in element order (integer-valued data, so every
float sum is exact); order-preserving strategies also get a non-commutative op.
"""

import numpy as np
import pytest
from numba import cuda

import numbakern as nk
from numbakern import ops
from numbakern.ops.state import state_kit

BLOCKS = nk.strategies.available("block")
SCANS = nk.strategies.available("block", scan=True)
THREADS = [32, 64, 96]  # one warp, two, and a block size that is not a power of two
RNG = np.random.default_rng(7)


@nk.op(identity=0, commutative=False, name="last_nonzero")
def LAST_NONZERO(a, b):
    return b if b != 0 else a


def _ops_for(block):
    """``(op, dtype)`` pairs: a sum, a NaN-propagating max, argmax's two-field state,
    and, for order-preserving strategies, a non-commutative op."""
    cases = [(ops.SUM, np.float64), (ops.SUM, np.int32), (ops.MAX, np.float32),
             (ops.ARGMAX, np.float32)]
    if not block.needs_commutative:
        cases.append((LAST_NONZERO, np.int64))
    return cases


def _data(op, dtype, n):
    if op is LAST_NONZERO:
        return (RNG.integers(0, 3, n) * RNG.integers(1, 9, n)).astype(dtype)  # zeros
    x = RNG.integers(-20, 20, n).astype(dtype)
    if op is ops.MAX and n > 3:
        x[n // 2] = np.nan
    return x


def _kit(op, dtype):
    dtypes = (ops.accumulator_dtype(dtype),) + ((ops.INDEX_DTYPE,) if op.fields == 2 else ())
    return state_kit(op, dtypes)


def _fold(op, states):
    """The states combined left to right with the op's plain Python combine."""
    acc = states[0]
    for s in states[1:]:
        acc = op.combine(*acc, *s) if op.fields == 2 else op.combine(acc, s)
    return acc


def _states(op, x):
    return [(v, i) for i, v in enumerate(x.tolist())] if op.fields == 2 else x.tolist()


def _same(got, want) -> bool:
    got, want = np.atleast_1d(got), np.atleast_1d(want)
    return all(a == b or (a != a and b != b) for a, b in zip(got.tolist(), want.tolist()))


def _outputs(kit, k):
    return [cuda.device_array(k, d) for d in kit.dtypes] + [cuda.device_array(1, np.int8)] * (
        2 - kit.fields)


def _host(arrays, kit):
    got = [a.copy_to_host() for a in arrays[:kit.fields]]
    return list(zip(*got)) if kit.fields == 2 else got[0]


def _block_reduce_kernel(block, kit):
    reduce = block.build_reduce(kit)
    slots0 = max(1, block.temp_slots())
    temp = kit.shared_temp(slots0)
    to_state, identity, store = kit.to_state, kit.identity, kit.store

    @cuda.jit
    def kernel(x, n, o0, o1):
        temp0, temp1 = temp()
        tid = cuda.threadIdx.x
        s = to_state(x[tid], tid) if tid < n else identity()
        s = reduce(s, temp0, temp1)
        if tid == 0:
            store(o0, o1, 0, s)

    return kernel


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("name", BLOCKS)
def test_block_reduce(name, threads):
    block = nk.strategies.resolve("block", name, threads=threads)
    for op, dtype in _ops_for(block):
        kit = _kit(op, dtype)
        kernel = _block_reduce_kernel(block, kit)
        for n in (1, threads // 2 + 1, threads):
            x = _data(op, dtype, n)
            padded = np.zeros(threads, dtype)
            padded[:n] = x
            out = _outputs(kit, 1)
            kernel[1, threads](padded, n, out[0], out[1])
            got, want = _host(out, kit)[0], _fold(op, _states(op, x))
            assert _same(got, want), (name, threads, op.name, n, got, want)


def _block_scan_kernel(block, kit):
    scan = block.build_scan(kit)
    slots0 = max(1, block.temp_slots())
    temp = kit.shared_temp(slots0)
    to_state, identity, store = kit.to_state, kit.identity, kit.store

    @cuda.jit
    def kernel(x, n, i0, i1, e0, e1, a0, a1):
        temp0, temp1 = temp()
        tid = cuda.threadIdx.x
        s = to_state(x[tid], tid) if tid < n else identity()
        inc, exc, total = scan(s, temp0, temp1)
        store(i0, i1, tid, inc)
        store(e0, e1, tid, exc)
        store(a0, a1, tid, total)

    return kernel


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("name", SCANS)
def test_block_scan(name, threads):
    """Inclusive, exclusive (thread 0's is not checked: the identity, never combined)
    and the total, in every thread."""
    block = nk.strategies.resolve("block", name, threads=threads)
    for op, dtype in _ops_for(block):
        kit = _kit(op, dtype)
        kernel = _block_scan_kernel(block, kit)
        x = _data(op, dtype, threads)
        inc, exc, tot = _outputs(kit, threads), _outputs(kit, threads), _outputs(kit, threads)
        kernel[1, threads](x, threads, *inc, *exc, *tot)
        states = _states(op, x)
        got_inc, got_exc, got_tot = (_host(a, kit) for a in (inc, exc, tot))
        total = _fold(op, states)
        for t in range(threads):
            assert _same(got_inc[t], _fold(op, states[:t + 1])), (name, op.name, "inc", t)
            assert t == 0 or _same(got_exc[t], _fold(op, states[:t])), (name, op.name, t)
            assert _same(got_tot[t], total), (name, op.name, "total", t)


def _warp_kernel(form, kit, threads, scan):
    slots0 = max(1, form.slots * (threads // 32))
    temp = kit.shared_temp(slots0)
    to_state, identity, store, fn = kit.to_state, kit.identity, kit.store, form.function

    @cuda.jit
    def kernel(x, n, o0, o1):
        temp0, temp1 = temp()
        tid = cuda.threadIdx.x
        s = to_state(x[tid], tid) if tid < n else identity()
        for _ in range(2):  # twice: a warp form may be called again at once
            r = fn(s, temp0, temp1)
        if scan:
            store(o0, o1, tid, r)
        elif tid % 32 == 0:
            store(o0, o1, tid // 32, r)

    return kernel


@pytest.mark.parametrize("name", [b for b in BLOCKS
                                  if nk.strategies.REGISTRY["block"][b].offers_warp_reduce()])
def test_warp_reduce_form(name):
    threads = 64  # two warps, each reducing its own 32 lanes
    block = nk.strategies.resolve("block", name, threads=threads)
    for op, dtype in _ops_for(block):
        kit = _kit(op, dtype)
        kernel = _warp_kernel(block.build_warp_reduce(kit), kit, threads, scan=False)
        x = _data(op, dtype, threads)
        out = _outputs(kit, 2)
        kernel[1, threads](x, threads, out[0], out[1])
        states = _states(op, x)
        got = _host(out, kit)
        for w in range(2):
            assert _same(got[w], _fold(op, states[32 * w:32 * w + 32])), (name, op.name, w)


@pytest.mark.parametrize("name", [b for b in BLOCKS
                                  if nk.strategies.REGISTRY["block"][b].offers_warp_scan()])
def test_warp_scan_form(name):
    """Every run width from 1 to 32: lane ``l`` holds its run's lanes up to ``l``."""
    threads = 64
    block = nk.strategies.resolve("block", name, threads=threads)
    for op, dtype in _ops_for(block):
        kit = _kit(op, dtype)
        x = _data(op, dtype, threads)
        states = _states(op, x)
        for group in (1, 2, 4, 8, 16, 32):
            kernel = _warp_kernel(block.build_warp_scan(kit, group), kit, threads, scan=True)
            out = _outputs(kit, threads)
            kernel[1, threads](x, threads, out[0], out[1])
            got = _host(out, kit)
            for t in range(threads):
                run = states[t - t % group:t + 1]
                assert _same(got[t], _fold(op, run)), (name, op.name, group, t)
