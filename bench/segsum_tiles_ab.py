"""A/B on a GPU: the segmented sum's tile kernel at other tiles a block and register caps.

    python bench/segsum_tiles_ab.py --waves 1 --registers 64    # the defaults
    python bench/segsum_tiles_ab.py --waves 4 --registers 0     # 4 waves, uncapped
    python bench/segsum_tiles_ab.py --all                       # each setting, a process each

``--waves`` scales the tile kernel's grid, one wave of the blocks resident at once
(``numbakern.kernels.segment_reduce.tile_blocks``: 528 of 256 on an H200 at 64
registers, 2^26 float32 32 tiles of 4096 a block; 4 waves give 8) and ``--registers``
``TILE_REGISTERS`` (ptxas's cap through launch bounds; 0: none), ``--items``
``TILE_ITEMS`` and ``BLOCK_TILE_ITEMS`` (a tile is ``threads * items`` elements;
segments up to a tile are short, a warp or a block each: 128 makes every segment of
up to 32768 a group's, as CUB's ``DeviceSegmentedReduce`` gives every segment a
block), all before the
first call compiles or plans anything, so each setting runs in its own process
(``--all`` starts one per setting, this tree's numbakern in each).

Cases as ``bench/bench_segments.py``'s sums: 2^26 float32 in segments of lengths
uniform in [0, 2L] for a mean L of 64, 1024, 16384 and 2^20, and ``mixed`` (half the
array in one segment among segments of 0 to 128), device int64 offsets (CuPy), the
default strategy (``two_pass``) and ``atomic_fold``: whole calls timed by CUDA events
(``bench/ab.py``'s ``event_ms``: 3 warm-up calls, the median of 30), beside
``torch.segment_reduce`` where torch with CUDA is installed (timed once, in the first
process of ``--all``). Each result is checked against a float64 CuPy reference.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ab import MEANS, event_ms, segments  # noqa: E402
SETTINGS = [(4, 0), (4, 64), (1, 0), (1, 64), (0.5, 64)]  # (waves, registers) for --all


def run(waves: float, registers: int, torch_too: bool, items: int = 0) -> None:
    import cupy as cp

    import numbakern as nk
    from numbakern.kernels import segment_reduce

    wave = segment_reduce.tile_blocks  # before any call plans or compiles
    segment_reduce.tile_blocks = lambda threads: max(1, int(waves * wave(threads)))
    segment_reduce.TILE_REGISTERS = registers
    if items:  # a tile of threads * items: segments up to it are short (a group each)
        segment_reduce.TILE_ITEMS = segment_reduce.BLOCK_TILE_ITEMS = items
    torch = None
    if torch_too:
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None and not torch.cuda.is_available():
            torch = None
    for mean in MEANS:
        x, offsets = segments(cp, mean)
        total = cp.concatenate([cp.zeros(1), cp.cumsum(x.astype(cp.float64))])
        want = total[offsets[1:]] - total[offsets[:-1]]
        line = [f"waves {waves} registers {registers:>2} items "
                f"{segment_reduce.TILE_ITEMS:>3}/{segment_reduce.BLOCK_TILE_ITEMS:<3} "
                f"mean {str(mean):>7}:"]
        for name, strategy in (("two_pass", None), ("atomic_fold", "atomic_fold/warp_shuffle")):
            def call(strategy=strategy):
                return nk.segmented_reduce(x, offsets, strategy=strategy)

            err = float(cp.abs(call() - want).max())
            line.append(f"{name} {event_ms(cp, call):.4f} ms (max |err| {err:.1e})")
        if torch is not None:
            t = torch.as_tensor(x, device="cuda")
            o = torch.as_tensor(offsets, device="cuda")
            line.append("torch {:.4f} ms".format(
                event_ms(cp, lambda: torch.segment_reduce(t, "sum", offsets=o))))
        print(", ".join(line), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waves", type=float, default=1)
    parser.add_argument("--registers", type=int, default=64)
    parser.add_argument("--items", type=int, default=0,
                        help="TILE_ITEMS (0: the module's): elements a thread in a tile")
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--all", action="store_true",
                        help=f"every (waves, registers) of {SETTINGS}, a process each")
    options = parser.parse_args()
    if not options.all:
        run(options.waves, options.registers, not options.no_torch, options.items)
        return
    for k, (waves, registers) in enumerate(SETTINGS):
        command = [sys.executable, os.path.abspath(__file__), "--waves", str(waves),
                   "--registers", str(registers)]
        if k or options.no_torch:
            command.append("--no-torch")
        subprocess.run(command, check=True)


if __name__ == "__main__":
    main()
