"""A flat reduction's second launch against a memset and a last-block finish, A/B.

    PYTHONPATH=/tmp/site python3 bench/fused_finish_ab.py      # on a GPU host with CuPy

numbakern's ``two_pass`` reduces a whole array in two launches: the first pass writes
one partial a block, a second one-block launch reduces the partials. torch's flat
reduction makes one launch after a 4-byte memset: the grid's last block to arrive (a
ticket counter, the CUDA samples' "last block done" pattern) reduces the partials
itself. The question before changing numbakern's kernels: does that save more than
it adds, at the launch-bound sizes (2^20-2^24 float32, where numbakern is 0.90-0.98x
torch on whole calls) and nothing at 2^28?

Three float32 sums of one first pass (grid-stride, 8 loads in flight, a warp-shuffle
block tree; the grid of ``numbakern``'s flat plan: at most 8 blocks of 256 a
multiprocessor), launched through ``numbakern.runtime.launch`` (the driver, as a
replayed call launches):

* ``two``: the first pass, then one block of 256 reducing the partials;
* ``memset``: ``cudaMemsetAsync`` of the ticket, then the fused kernel;
* ``fill``: a one-thread kernel zeroing the ticket, then the fused kernel;

beside ``numbakern.sum`` and ``torch.sum`` on the same memory. Both figures a call:
"whole", CUDA events around one call after a synchronise (what ``bench/peers.py``
times), and "burst", events around 200 calls back to back, a call's share (GPU time
where the host keeps ahead). Medians of 5 rounds, us. The three sums must agree
bitwise (one tree) and with CuPy's within float32 rounding.
"""

from __future__ import annotations

import math
import statistics

import numbakern  # noqa: F401  (before numba: the simulator switch)
from numba import cuda, float32, int32

from numbakern.runtime.device import max_resident_blocks
from numbakern.runtime.launch import launch

THREADS = 256
UNROLL = 8


@cuda.jit(device=True, inline=True)
def block_sum(v):
    """The block's sum, valid in thread 0 (a warp-shuffle tree, then warp 0 over the
    warps' sums); the block's threads all call it."""
    sums = cuda.shared.array(32, float32)
    lane, warp = cuda.threadIdx.x & 31, cuda.threadIdx.x >> 5
    d = 16
    while d > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, d)
        d //= 2
    if lane == 0:
        sums[warp] = v
    cuda.syncthreads()
    v = sums[lane] if cuda.threadIdx.x < (cuda.blockDim.x >> 5) else float32(0)
    if warp == 0:
        d = 16
        while d > 0:
            v += cuda.shfl_down_sync(0xFFFFFFFF, v, d)
            d //= 2
    cuda.syncthreads()  # sums is free again
    return v


@cuda.jit(device=True, inline=True)
def thread_sum(x, n):
    g = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    stride = cuda.gridDim.x * cuda.blockDim.x
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = float32(0)
    i = g
    while i + 7 * stride < n:
        a0 += x[i]
        a1 += x[i + stride]
        a2 += x[i + 2 * stride]
        a3 += x[i + 3 * stride]
        a4 += x[i + 4 * stride]
        a5 += x[i + 5 * stride]
        a6 += x[i + 6 * stride]
        a7 += x[i + 7 * stride]
        i += 8 * stride
    while i < n:
        a0 += x[i]
        i += stride
    return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))


@cuda.jit(device=True, inline=True)
def partials_sum(partials, count):
    s = float32(0)
    for i in range(cuda.threadIdx.x, count, cuda.blockDim.x):
        s += partials[i]
    return block_sum(s)


@cuda.jit
def first_pass(x, n, partials):
    s = block_sum(thread_sum(x, n))
    if cuda.threadIdx.x == 0:
        partials[cuda.blockIdx.x] = s


@cuda.jit
def second_pass(partials, count, out):
    s = partials_sum(partials, count)
    if cuda.threadIdx.x == 0:
        out[0] = s


@cuda.jit
def zero_ticket(ticket):
    ticket[0] = 0


@cuda.jit
def fused(x, n, partials, ticket, out):
    s = block_sum(thread_sum(x, n))
    last = cuda.shared.array(1, int32)
    if cuda.threadIdx.x == 0:
        partials[cuda.blockIdx.x] = s
        cuda.threadfence()  # release: the partial before the ticket
        last[0] = cuda.atomic.add(ticket, 0, 1) == cuda.gridDim.x - 1
        cuda.threadfence()  # acquire, by the thread that read the ticket
    cuda.syncthreads()
    if last[0]:
        s = partials_sum(partials, cuda.gridDim.x)
        if cuda.threadIdx.x == 0:
            out[0] = s


def event_us(cp, fn, calls: int) -> float:
    cp.cuda.Device().synchronize()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(calls):
        fn()
    stop.record()
    stop.synchronize()
    return cp.cuda.get_elapsed_time(start, stop) * 1e3 / calls


def figures(cp, fn) -> tuple[float, float]:
    """``(whole, burst)`` us a call, medians of 5 rounds (whole: of 50 single calls)."""
    for _ in range(20):
        fn()
    whole = statistics.median(event_us(cp, fn, 1) for _ in range(50 * 5))
    burst = statistics.median(event_us(cp, fn, 200) for _ in range(5))
    return whole, burst


def main() -> None:
    import cupy as cp
    import torch

    import numbakern as nk

    cupy_stream = cp.cuda.get_current_stream().ptr
    stream = cuda.external_stream(cupy_stream)
    print("GPU:", cp.cuda.runtime.getDeviceProperties(0)["name"].decode())
    print("| n | variant | whole us | burst us |\n|---|---|---:|---:|")
    for k in (20, 24, 28):
        n = 1 << k
        x = cp.asarray(cp.random.default_rng(0).integers(0, 8, n), dtype=cp.float32)
        t = torch.as_tensor(x, device="cuda")
        blocks = max(1, min(math.ceil(n / (THREADS * UNROLL)), max_resident_blocks(THREADS)))
        partials = cp.empty(blocks, cp.float32)
        ticket = cp.empty(1, cp.int32)
        outs = {v: cp.empty(1, cp.float32) for v in ("two", "memset", "fill")}

        def two():
            launch(first_pass, blocks, THREADS, stream, x, n, partials)
            launch(second_pass, 1, THREADS, stream, partials, blocks, outs["two"])

        def memset():
            cp.cuda.runtime.memsetAsync(ticket.data.ptr, 0, 4, cupy_stream)
            launch(fused, blocks, THREADS, stream, x, n, partials, ticket, outs["memset"])

        def fill():
            launch(zero_ticket, 1, 1, stream, ticket)
            launch(fused, blocks, THREADS, stream, x, n, partials, ticket, outs["fill"])

        variants = {"two": two, "memset": memset, "fill": fill,
                    "numbakern.sum": lambda: nk.sum(x), "torch.sum": lambda: torch.sum(t)}
        for fn in (two, memset, fill):
            fn()
        got = {v: float(o.get()[0]) for v, o in outs.items()}
        want = float(x.sum(dtype=cp.float64).get())
        assert len(set(got.values())) == 1, got  # one tree: bitwise equal
        assert abs(got["two"] - want) <= 1e-6 * want, (got, want)
        for name, fn in variants.items():
            whole, burst = figures(cp, fn)
            print(f"| 2^{k} | {name} | {whole:.1f} | {burst:.1f} |", flush=True)


if __name__ == "__main__":
    main()
