"""What the device is: a real GPU or Numba's simulator, and the numbers kernels size by.

Every other module asks here rather than deciding for itself: whether the simulator
runs (chosen at import, ``numbakern/runtime/backend.py``), the warp and shared-memory
sizes of CUDA GPUs, and the block sizes and grid caps numbakern uses on each. Under
the simulator every CUDA thread is an OS thread, so everything is smaller there.
"""

from __future__ import annotations

import functools
import sys

from numba import cuda
from numba.cuda.core import config

SIMULATOR = bool(config.ENABLE_CUDASIM)

#: threads of a warp, on every NVIDIA GPU
WARP = 32
#: every lane of a warp
FULL_MASK = 0xFFFFFFFF
#: static shared memory a block may use (48 KiB without opting in to more)
SHARED_LIMIT = 48 * 1024
#: the most blocks of one launch (CUDA's grid x limit)
MAX_GRID = 2**31 - 1
#: threads a multiprocessor holds at once (sm_70 and later)
THREADS_PER_MULTIPROCESSOR = 2048
#: 32-bit registers per multiprocessor (sm_70 to sm_100)
REGISTER_FILE = 65536
#: the most blocks a multiprocessor holds (sm_90)
MOST_BLOCKS_PER_MULTIPROCESSOR = 32

#: the default threads per block: 256 on a GPU; 64 under the simulator
DEFAULT_THREADS = 64 if SIMULATOR else 256
#: Under the simulator every block costs ~0.1 s of Python threads: two are enough to
#: exercise a grid-level combine.
SIMULATOR_MAX_BLOCKS = 2
#: Under the simulator, segments of up to this many elements take tiles of 2 items a
#: thread (tests of a few thousand elements then cross many tiles); longer ones take
#: 16, since the simulator's time goes on threads more than on items (2^16 float32 on
#: a 2-core laptop: cumsum 16 s at 2 items, 4.4 s at 16; sort 63 s, 24 s).
SIMULATOR_SHORT = 1 << 14


def simulator_items(n: int) -> int:
    """Items a thread of a tiled scan or sort under the simulator, for segments of
    ``n`` elements (:data:`SIMULATOR_SHORT`)."""
    return 2 if n <= SIMULATOR_SHORT else 16


@functools.lru_cache(maxsize=None)
def _multiprocessors(device_id: int) -> int:
    return cuda.get_current_device().MULTIPROCESSOR_COUNT


def max_resident_blocks(threads: int) -> int:
    """Blocks of ``threads`` that fill the device once (2 under the simulator)."""
    if SIMULATOR:
        return SIMULATOR_MAX_BLOCKS
    from .launch import current_device_id

    return _multiprocessors(current_device_id()) * max(1, THREADS_PER_MULTIPROCESSOR // threads)


def blocks_per_multiprocessor(threads: int, registers: int) -> int:
    """Blocks of ``threads`` a multiprocessor holds at once when each thread takes
    ``registers`` registers (a kernel's launch bounds): 4 of 256 at 64, 3 at 80."""
    return max(1, min(THREADS_PER_MULTIPROCESSOR // threads, MOST_BLOCKS_PER_MULTIPROCESSOR,
                      REGISTER_FILE // (threads * registers)))


def resident_blocks(threads: int, registers: int) -> int:
    """Blocks of ``threads`` at ``registers`` registers a thread that fill the device
    once (2 under the simulator): a grid of that many leaves nothing to a second wave."""
    if SIMULATOR:
        return SIMULATOR_MAX_BLOCKS
    from .launch import current_device_id

    return _multiprocessors(current_device_id()) * blocks_per_multiprocessor(threads, registers)


def shared_capacity() -> tuple[int, int]:
    """``(bytes a block may opt in to, bytes a multiprocessor has)`` of shared memory
    on the current device (227 KiB and 228 KiB on an H200); under the simulator, 96
    KiB each."""
    if SIMULATOR:
        return 96 * 1024, 96 * 1024
    from .launch import current_device_id

    return _shared_memory(current_device_id())


@functools.lru_cache(maxsize=None)
def _shared_memory(device_id: int) -> tuple[int, int]:
    device = cuda.get_current_device()
    return (device.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            device.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def torch_stream(device: int) -> int:
    """torch's current stream on ``device`` as a raw ``cudaStream_t`` (torch is
    imported already: the caller holds a tensor)."""
    return sys.modules["torch"]._C._cuda_getCurrentRawStream(device)
