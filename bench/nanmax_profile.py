"""Where a replayed nanmax's host time goes, CuPy against torch input: the time a call
(2000 calls) and cProfile's 18 costliest functions of 2000 more.

    python bench/nanmax_profile.py       # on a GPU host with CuPy and PyTorch
"""

import cProfile
import pstats
import time

import cupy as cp
import torch

import numbakern as nk


def main() -> None:
    x = cp.random.standard_normal(1 << 10, dtype=cp.float32)
    t = torch.as_tensor(x, device="cuda")
    for name, fn in (("cupy", lambda: nk.nanmax(x)), ("torch", lambda: nk.nanmax(t))):
        for _ in range(100):
            fn()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(2000):
            fn()
        torch.cuda.synchronize()
        print(f"{name}: {(time.perf_counter() - start) / 2000 * 1e6:.1f} us a call")
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(2000):
            fn()
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
