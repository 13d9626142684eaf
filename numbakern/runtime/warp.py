"""Warp shuffles over sub-warp segments, as CUDA C++'s ``width`` argument gives.

Numba's ``cuda.shfl_*_sync`` shuffle across the whole warp and take no ``width``.
These device functions add it, with the semantics of the CUDA C++ Programming
Guide ("Warp Shuffle Functions"): the warp is split into segments of ``width``
consecutive lanes, each behaving as a warp of its own with logical lanes
``0 .. width-1``. Each is one full-warp shuffle plus lane arithmetic, so they run
on a GPU and under Numba's simulator (with numbakern's intrinsics) alike.

Preconditions, as in CUDA: ``width`` is a power of two no larger than 32; every
lane of ``mask`` calls the same function with the same ``mask``; ``value`` is an
int32, int64, float32 or float64 (the types Numba's shuffles take on a GPU).
Callers widen bool, int8, int16 and float16 values (to int32 or float32) and
narrow the result back. ``delta``, ``src_lane`` and ``lane_mask`` count modulo 32,
as the hardware reads only their low five bits.
"""

from numba import cuda

_LANE_BITS = 31  # a lane number or offset uses bits 4:0


@cuda.jit(device=True)
def shfl_idx(mask, value, src_lane, width):
    """``value`` of lane ``src_lane % width`` of the caller's segment.

    CUDA: "If srcLane is outside the range [0:width-1], the value returned
    corresponds to the value of var held by the srcLane modulo width (i.e. within
    the same subsection)."
    """
    lane = cuda.laneid
    src = lane - (lane & (width - 1)) + (src_lane & (width - 1))
    return cuda.shfl_sync(mask, value, src)


@cuda.jit(device=True)
def shfl_up(mask, value, delta, width):
    """``value`` of the lane ``delta`` below the caller, within its segment.

    CUDA: "The source lane index will not wrap around the value of width, so
    effectively the lower delta lanes will be unchanged": they get their own value.
    """
    d = delta & _LANE_BITS
    moved = cuda.shfl_up_sync(mask, value, d)
    if (cuda.laneid & (width - 1)) < d:
        return value
    return moved


@cuda.jit(device=True)
def shfl_down(mask, value, delta, width):
    """``value`` of the lane ``delta`` above the caller, within its segment.

    The upper ``delta`` lanes of each segment get their own value back (CUDA:
    the source lane index does not wrap around ``width``).
    """
    d = delta & _LANE_BITS
    moved = cuda.shfl_down_sync(mask, value, d)
    if (cuda.laneid & (width - 1)) + d >= width:
        return value
    return moved


@cuda.jit(device=True)
def shfl_xor(mask, value, lane_mask, width):
    """``value`` of lane ``lane ^ lane_mask``, unless that lies in a later segment.

    CUDA: "each group of width consecutive threads are able to access elements
    from earlier groups of threads, however if they attempt to access elements
    from later groups of threads their own value of var will be returned."
    """
    lane = cuda.laneid
    lm = lane_mask & _LANE_BITS
    moved = cuda.shfl_xor_sync(mask, value, lm)
    if (lane ^ lm) > (lane | (width - 1)):
        return value
    return moved
