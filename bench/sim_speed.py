"""Time simulated launches of 8 blocks x 128 threads, to see where the time goes.

    python bench/sim_speed.py            # numbakern's simulator support installed
    python bench/sim_speed.py --stock    # Numba's simulator as shipped (no warp ops)

Each row is the median wall time of ``--repeat`` launches. The kernels split the
cost of a launch: starting threads (``empty``), allocating a shared array,
barriers (``syncthreads_x8``), then the two block sums, a shared-memory tree with
a barrier per level and a warp-shuffle tree. bench/NOTES.md records the figures.
"""

import argparse
import os
import statistics
import sys
import time

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--stock", action="store_true", help="Numba's simulator as shipped")
parser.add_argument("--repeat", type=int, default=5)
OPTS = parser.parse_args()

# The backend must be chosen before numba.cuda is imported.
if OPTS.stock:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
else:
    os.environ["NUMBAKERN_SIMULATOR"] = "1"
    import numbakern  # noqa: F401,E402  (installs the simulator support)

import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402  (a module global: the simulator swaps it)

BLOCKS, THREADS = 8, 128


@cuda.jit
def empty(x, out):
    pass


@cuda.jit
def shared_alloc(x, out):
    s = cuda.shared.array(THREADS, np.float32)
    s[cuda.threadIdx.x] = 0


@cuda.jit
def syncthreads_x8(x, out):
    for _ in range(8):
        cuda.syncthreads()


@cuda.jit
def tree_sum(x, out):
    s = cuda.shared.array(THREADS, np.float32)
    t = cuda.threadIdx.x
    s[t] = x[cuda.blockIdx.x * THREADS + t]
    cuda.syncthreads()
    step = THREADS // 2
    while step > 0:
        if t < step:
            s[t] += s[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        out[cuda.blockIdx.x] = s[0]


@cuda.jit
def warp_sum(x, out):
    s = cuda.shared.array(THREADS // 32, np.float32)
    t = cuda.threadIdx.x
    v = x[cuda.blockIdx.x * THREADS + t]
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if t % 32 == 0:
        s[t // 32] = v
    cuda.syncthreads()
    if t == 0:
        total = s[0]
        for w in range(1, THREADS // 32):
            total += s[w]
        out[cuda.blockIdx.x] = total


def main():
    x = np.arange(BLOCKS * THREADS, dtype=np.float32)
    want = x.reshape(BLOCKS, THREADS).sum(axis=1)
    print("%s, %d blocks x %d threads, %d CPUs, python %s, switch interval %g s" % (
        "stock Numba simulator" if OPTS.stock else "numbakern simulator",
        BLOCKS, THREADS, os.cpu_count(), sys.version.split()[0], sys.getswitchinterval()))
    for kernel in (empty, shared_alloc, syncthreads_x8, tree_sum, warp_sum):
        if OPTS.stock and kernel is warp_sum:
            print("%-16s n/a (the stock simulator has no shfl_down_sync)" % kernel.__name__)
            continue
        times = []
        for _ in range(OPTS.repeat):
            out = np.zeros(BLOCKS, dtype=np.float32)
            start = time.perf_counter()
            kernel[BLOCKS, THREADS](x, out)
            times.append(time.perf_counter() - start)
        if kernel in (tree_sum, warp_sum):
            np.testing.assert_array_equal(out, want)
        print("%-16s %8.1f ms  (min %.1f, max %.1f)" % (
            kernel.__name__, 1e3 * statistics.median(times), 1e3 * min(times), 1e3 * max(times)))


if __name__ == "__main__":
    main()
