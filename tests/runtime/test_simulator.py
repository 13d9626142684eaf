"""Warp intrinsics and the block engine, checked against CUDA's definitions.

The same tests run on a real GPU and under Numba's simulator with numbakern's
support installed. The expected values are written out from the CUDA C++
Programming Guide ("Warp Shuffle Functions", "Warp Vote Functions", "Warp Match
Functions", ``__syncwarp``, ``__activemask``), not computed by numbakern's code.
Tests of behaviour CUDA leaves undefined (reading a lane outside the mask) or that
Numba rejects on a GPU (shuffling bool or float16) check the simulator's
documented choice and are skipped on a GPU.
"""

import os
import sys
import threading

import numpy as np
import pytest
from numba import cuda

from numbakern import warp

FULL = 0xFFFFFFFF
LANES = np.arange(32)

# the simulator's documented choice for behaviour CUDA leaves undefined or Numba
# rejects on a GPU
simulator_only = pytest.mark.simulator


def u32(values):
    """Bit masks as uint32, the form the kernels store them in."""
    return np.array(values, dtype=np.uint64).astype(np.uint32)


# -- shuffles ----------------------------------------------------------------------


@cuda.jit
def shuffle_kernel(mode, values, b, out):
    t = cuda.threadIdx.x
    v = values[t]
    if mode == 0:
        out[t] = cuda.shfl_sync(FULL, v, b[t])
    elif mode == 1:
        out[t] = cuda.shfl_up_sync(FULL, v, b[t])
    elif mode == 2:
        out[t] = cuda.shfl_down_sync(FULL, v, b[t])
    else:
        out[t] = cuda.shfl_xor_sync(FULL, v, b[t])


def shuffle(mode, values, b):
    values = np.asarray(values)
    out = np.zeros_like(values)
    shuffle_kernel[1, values.size](mode, values, np.asarray(b, dtype=np.int32), out)
    return out


def test_shfl_sync_reads_the_named_lane():
    values = 100 + LANES
    # Lane l reads lane 31 - l: the warp reversed.
    np.testing.assert_array_equal(shuffle(0, values, 31 - LANES), np.arange(131, 99, -1))
    # "srcLane outside [0:width-1]: the value held by srcLane modulo width".
    np.testing.assert_array_equal(shuffle(0, values, np.full(32, 33)), np.full(32, 101))


def test_shfl_up_sync_keeps_own_value_below_lane_delta():
    values = 100 + LANES
    got = shuffle(1, values, np.full(32, 3))
    np.testing.assert_array_equal(got[:3], [100, 101, 102])  # lane - 3 < 0: own value
    np.testing.assert_array_equal(got[3:], np.arange(100, 129))  # lane - 3


def test_shfl_down_sync_keeps_own_value_past_the_warp_edge():
    values = 100 + LANES
    got = shuffle(2, values, np.full(32, 5))
    np.testing.assert_array_equal(got[:27], np.arange(105, 132))  # lane + 5
    np.testing.assert_array_equal(got[27:], [127, 128, 129, 130, 131])  # own value


def test_shuffle_offsets_count_modulo_32():
    # PTX shfl.sync reads bits 4:0 of the offset: delta 33 is delta 1, 34 is 2.
    values = 100 + LANES
    np.testing.assert_array_equal(shuffle(1, values, np.full(32, 33))[:3], [100, 100, 101])
    np.testing.assert_array_equal(shuffle(2, values, np.full(32, 34))[29:], [131, 130, 131])
    np.testing.assert_array_equal(shuffle(3, values, np.full(32, 33))[:2], [101, 100])


def test_shfl_xor_sync_swaps_butterfly_partners():
    values = 100 + LANES
    got = shuffle(3, values, np.full(32, 1))
    np.testing.assert_array_equal(got[:6], [101, 100, 103, 102, 105, 104])
    got = shuffle(3, values, np.full(32, 16))
    np.testing.assert_array_equal(got, np.concatenate([values[16:], values[:16]]))


def test_shuffle_offset_per_lane():
    # The source operand is per lane: lane l reads lane l // 2 (idx) ...
    np.testing.assert_array_equal(shuffle(0, LANES * 7, LANES // 2), (LANES // 2) * 7)
    # ... and lane l shifts up by l % 4 (own value where l < l % 4: lanes 1, 2, 3).
    np.testing.assert_array_equal(
        shuffle(1, LANES, LANES % 4)[:8], [0, 0, 0, 0, 4, 4, 4, 4]
    )


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64])
def test_shuffle_types_pass_bit_exact(dtype):
    info = np.iinfo(dtype) if np.dtype(dtype).kind == "i" else np.finfo(dtype)
    values = np.zeros(32, dtype=dtype)
    values[0], values[1], values[2] = info.max, info.min, -1
    if np.dtype(dtype).kind == "f":
        values[3], values[4] = info.tiny, np.array(-0.0, dtype=dtype)
        values[5], values[6] = np.inf, 1 + info.eps
    got = shuffle(3, values, np.full(32, 1))
    want = values.reshape(16, 2)[:, ::-1].ravel()
    np.testing.assert_array_equal(got.view(f"u{values.itemsize}"),
                                  want.view(f"u{values.itemsize}"))


def test_64_bit_values_keep_their_high_word():
    values = np.int64(2) ** 40 + LANES
    got = shuffle(3, values, np.full(32, 1))
    np.testing.assert_array_equal(got, np.int64(2) ** 40 + (LANES ^ 1))
    values = 1.0 + LANES * 2.0**-40  # needs the low word of the mantissa too
    np.testing.assert_array_equal(shuffle(2, values, np.full(32, 1))[:31], values[1:])


# -- sub-warp widths (numbakern.warp) ------------------------------------------------


@cuda.jit
def width_kernel(mode, values, b, width, out):
    t = cuda.threadIdx.x
    v = values[t]
    if mode == 0:
        out[t] = warp.shfl_idx(FULL, v, b, width)
    elif mode == 1:
        out[t] = warp.shfl_up(FULL, v, b, width)
    elif mode == 2:
        out[t] = warp.shfl_down(FULL, v, b, width)
    else:
        out[t] = warp.shfl_xor(FULL, v, b, width)


def width_shuffle(mode, values, b, width):
    out = np.zeros_like(values)
    width_kernel[1, 32](mode, values, b, width, out)
    return out


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64])
def test_width_shfl_idx_reads_within_the_segment(dtype):
    values = (100 + LANES).astype(dtype)
    # width 8: lane l reads lane 8 * (l // 8) + 2; src 10 is 10 % 8 = 2.
    want = np.repeat([102, 110, 118, 126], 8)
    np.testing.assert_array_equal(width_shuffle(0, values, 2, 8), want)
    np.testing.assert_array_equal(width_shuffle(0, values, 10, 8), want)
    np.testing.assert_array_equal(width_shuffle(0, values, 5, 32), np.full(32, 105))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64])
def test_width_shfl_up_and_down_do_not_cross_segments(dtype):
    values = (100 + LANES).astype(dtype)
    up = width_shuffle(1, values, 1, 8)
    # Lanes 0, 8, 16, 24 start their segment: their own value; others lane - 1.
    np.testing.assert_array_equal(up[:9], [100, 100, 101, 102, 103, 104, 105, 106, 108])
    down = width_shuffle(2, values, 2, 4)
    # Segments of 4: lanes 4k, 4k+1 read 4k+2, 4k+3; lanes 4k+2, 4k+3 keep theirs.
    np.testing.assert_array_equal(down[:8], [102, 103, 102, 103, 106, 107, 106, 107])
    np.testing.assert_array_equal(width_shuffle(1, values, 3, 1), values)  # width 1


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64])
def test_width_shfl_xor_reads_earlier_segments_only(dtype):
    values = (100 + LANES).astype(dtype)
    got = width_shuffle(3, values, 8, 8)
    # "access elements from earlier groups ... later groups: their own value".
    want = [100 + (lane ^ 8 if lane & 8 else lane) for lane in range(32)]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(width_shuffle(3, values, 3, 4)[:4], [103, 102, 101, 100])


@cuda.jit
def widened_kernel(flags, halves, flags_out, halves_out):
    t = cuda.threadIdx.x
    # Numba shuffles 32/64-bit values only: widen bool and float16, then narrow.
    flag = warp.shfl_xor(FULL, np.int32(flags[t]), 1, 32)
    flags_out[t] = flag != 0
    half = warp.shfl_xor(FULL, np.float32(halves[t]), 1, 32)
    halves_out[t] = np.float16(half)


def test_bool_and_float16_shuffle_after_widening():
    flags = LANES % 3 == 0
    halves = (LANES - 16).astype(np.float16) / np.float16(8)
    halves[0] = np.float16(-0.0)
    flags_out, halves_out = np.zeros_like(flags), np.zeros_like(halves)
    widened_kernel[1, 32](flags, halves, flags_out, halves_out)
    np.testing.assert_array_equal(flags_out, flags.reshape(16, 2)[:, ::-1].ravel())
    want = halves.reshape(16, 2)[:, ::-1].ravel()
    np.testing.assert_array_equal(halves_out.view(np.uint16), want.view(np.uint16))


@cuda.jit
def passthrough_kernel(values, out, same_type):
    t = cuda.threadIdx.x
    v = values[t]
    got = cuda.shfl_xor_sync(FULL, v, 1)
    out[t] = got
    same_type[t] = type(got) is type(v)


@simulator_only
@pytest.mark.parametrize("dtype", [np.bool_, np.float16])
def test_bool_and_float16_pass_through_unchanged(dtype):
    values = np.zeros(32, dtype=dtype)
    if dtype is np.bool_:
        values[::3] = True
    else:
        values.view(np.uint16)[:4] = [0x7E01, 0x8000, 0x0001, 0xFBFF]  # NaN payload...
    out, same_type = np.zeros_like(values), np.zeros(32, dtype=np.bool_)
    passthrough_kernel[1, 32](values, out, same_type)
    want = values.reshape(16, 2)[:, ::-1].ravel()
    np.testing.assert_array_equal(out.view(np.uint8), want.view(np.uint8))
    assert same_type.all()


@pytest.mark.gpu
def test_gpu_numba_rejects_bool_shuffle():
    from numba.core.errors import TypingError

    with pytest.raises(TypingError, match="32- and 64-bit"):
        shuffle(3, np.zeros(32, dtype=np.bool_), np.ones(32))


# -- member masks, partial warps, exited lanes ---------------------------------------


@cuda.jit
def halves_kernel(values, out):
    # The two half-warps diverge and shuffle with disjoint masks.
    t = cuda.threadIdx.x
    if t < 16:
        out[t] = cuda.shfl_xor_sync(0x0000FFFF, values[t], 1)
    else:
        out[t] = cuda.shfl_xor_sync(0xFFFF0000, values[t], 1)


def test_divergent_groups_with_disjoint_masks():
    values = 100 + LANES
    out = np.zeros_like(values)
    halves_kernel[1, 32](values, out)
    np.testing.assert_array_equal(out, (100 + (LANES ^ 1)))


@cuda.jit
def out_of_mask_kernel(values, out):
    t = cuda.threadIdx.x
    if t < 16:
        out[t] = cuda.shfl_xor_sync(0x0000FFFF, values[t], 16)  # lane t+16: not a member
    else:
        out[t] = cuda.shfl_sync(0xFFFF0000, values[t], 0)  # lane 0: not a member


@simulator_only
def test_reading_a_lane_outside_the_mask_gives_own_value():
    values = 100 + LANES
    out = np.zeros_like(values)
    out_of_mask_kernel[1, 32](values, out)
    np.testing.assert_array_equal(out, values)


@cuda.jit
def warp_tree_sum_kernel(x, out):
    """Sum a block of any size: shuffle within each warp, then across warps."""
    partial = cuda.shared.array(32, np.int64)
    t = cuda.threadIdx.x
    lane = t % 32
    lanes = min(32, cuda.blockDim.x - (t - lane))  # lanes in this (maybe partial) warp
    mask = (1 << lanes) - 1
    v = x[t]
    offset = 16
    while offset > 0:
        other = cuda.shfl_down_sync(mask, v, offset)
        if lane + offset < lanes:
            v += other
        offset //= 2
    if lane == 0:
        partial[t // 32] = v
    cuda.syncthreads()
    if t == 0:
        total = partial[0]
        for w in range(1, (cuda.blockDim.x + 31) // 32):
            total += partial[w]
        out[0] = total


@pytest.mark.parametrize("n", [1, 31, 32, 33, 100])
def test_warp_tree_sum_of_1_to_n(n):
    out = np.zeros(1, dtype=np.int64)
    warp_tree_sum_kernel[1, n](np.arange(1, n + 1, dtype=np.int64), out)
    assert out[0] == n * (n + 1) // 2


@cuda.jit
def partial_warp_kernel(out):
    # A block of 40: warp 1 has lanes 0..7 only, yet everyone passes the full mask.
    t = cuda.threadIdx.x
    out[t, 0] = cuda.ballot_sync(FULL, True)
    out[t, 1] = cuda.shfl_down_sync(FULL, t, 4)


@simulator_only
def test_missing_lanes_of_a_partial_warp_are_outside_the_mask():
    out = np.zeros((40, 2), dtype=np.uint32)
    partial_warp_kernel[1, 40](out)
    np.testing.assert_array_equal(out[:32, 0], u32(np.full(32, FULL)))
    np.testing.assert_array_equal(out[32:, 0], np.full(8, 0xFF))
    # Lanes 4..7 of warp 1 would read lanes 8..11, which do not exist.
    np.testing.assert_array_equal(out[32:, 1], [36, 37, 38, 39, 36, 37, 38, 39])


@cuda.jit
def exited_lanes_kernel(values, out):
    t = cuda.threadIdx.x
    if t >= 20:
        return
    # Lanes 20..31 have exited: "all non-exited threads named in mask" take part.
    cuda.syncwarp(FULL)
    out[t, 0] = cuda.ballot_sync(FULL, t % 2 == 0)
    out[t, 1] = cuda.shfl_xor_sync(FULL, values[t], 1)
    out[t, 2] = cuda.activemask()


def test_exited_lanes_do_not_hold_the_warp_up():
    values = 100 + LANES
    out = np.zeros((32, 3), dtype=np.int64)
    exited_lanes_kernel[1, 32](values, out)
    assert (out[:20, 0] == 0x55555).all()  # even lanes among 0..19
    np.testing.assert_array_equal(out[:20, 1], 100 + (LANES[:20] ^ 1))
    assert (out[:20, 2] == 0xFFFFF).all()  # "threads which have exited ... inactive"


# -- lockstep -------------------------------------------------------------------------


@cuda.jit
def lockstep_kernel(out):
    s = cuda.shared.array(64, np.int32)
    t = cuda.threadIdx.x
    lane = t % 32
    base = t - lane
    s[t] = 3 * t
    cuda.syncwarp()  # each warp on its own: no syncthreads
    out[t, 0] = s[base + (lane + 1) % 32]
    cuda.syncwarp()  # every read done before anyone overwrites
    s[t] = 5 * t
    cuda.shfl_sync(FULL, 0, 0)  # a shuffle also waits for the whole mask
    out[t, 1] = s[base + (lane + 31) % 32]


def test_shared_memory_written_before_syncwarp_is_seen_after():
    out = np.zeros((64, 2), dtype=np.int32)
    lockstep_kernel[1, 64](out)
    t = np.arange(64)
    neighbour = t - t % 32
    np.testing.assert_array_equal(out[:, 0], 3 * (neighbour + (t % 32 + 1) % 32))
    np.testing.assert_array_equal(out[:, 1], 5 * (neighbour + (t % 32 + 31) % 32))


@cuda.jit
def divergent_syncwarp_kernel(out):
    s = cuda.shared.array(32, np.int32)
    t = cuda.threadIdx.x
    s[t] = 10 * t
    if t < 16:
        cuda.syncwarp(0x0000FFFF)
        out[t] = s[(t + 1) % 16]
    else:
        cuda.syncwarp(0xFFFF0000)
        out[t] = s[16 + (t + 1) % 16]


def test_syncwarp_with_disjoint_masks():
    out = np.zeros(32, dtype=np.int32)
    divergent_syncwarp_kernel[1, 32](out)
    np.testing.assert_array_equal(out[:16], 10 * ((LANES[:16] + 1) % 16))
    np.testing.assert_array_equal(out[16:], 10 * (16 + (LANES[:16] + 1) % 16))


# -- votes, matches, masks -------------------------------------------------------------


@cuda.jit
def vote_kernel(preds, out):
    t = cuda.threadIdx.x
    p = preds[t]
    out[t, 0] = cuda.ballot_sync(FULL, p)
    out[t, 1] = cuda.all_sync(FULL, p)
    out[t, 2] = cuda.any_sync(FULL, p)
    out[t, 3] = cuda.eq_sync(FULL, p)


def vote(preds):
    out = np.zeros((32, 4), dtype=np.uint32)
    vote_kernel[1, 32](np.asarray(preds, dtype=np.int32), out)
    assert (out == out[0]).all(), "every lane gets the same vote"
    return [int(v) for v in out[0]]


def test_votes():
    # (ballot, all, any, eq) from the Programming Guide's definitions.
    assert vote(LANES % 3 == 0) == [0x49249249, 0, 1, 0]  # lanes 0, 3, ..., 30
    assert vote(np.ones(32)) == [0xFFFFFFFF, 1, 1, 1]
    assert vote(np.zeros(32)) == [0, 0, 0, 1]
    assert vote(LANES == 31) == [0x80000000, 0, 1, 0]
    assert vote(LANES * 2) == [0xFFFFFFFE, 0, 1, 0]  # any non-zero integer is true


@cuda.jit
def masked_ballot_kernel(out):
    t = cuda.threadIdx.x
    if t % 4 == 0:
        out[t] = cuda.ballot_sync(0x11111111, True)
    elif t % 4 == 1:
        out[t] = cuda.ballot_sync(0x22222222, t < 16)
    else:
        out[t] = cuda.ballot_sync(0xCCCCCCCC, t % 4 == 3)


def test_ballot_counts_only_lanes_in_the_mask():
    out = np.zeros(32, dtype=np.uint32)
    masked_ballot_kernel[1, 32](out)
    want = np.tile(u32([0x11111111, 0x00002222, 0x88888888, 0x88888888]), 8)
    np.testing.assert_array_equal(out, want)


@cuda.jit
def match_kernel(values, out):
    t = cuda.threadIdx.x
    out[t, 0] = cuda.match_any_sync(FULL, values[t])
    mask, pred = cuda.match_all_sync(FULL, values[t])
    out[t, 1] = mask
    out[t, 2] = pred


def match(values):
    out = np.zeros((32, 3), dtype=np.uint32)
    match_kernel[1, 32](values, out)
    return out


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64])
def test_match_any_and_all(dtype):
    out = match((LANES // 4).astype(dtype))
    # Lanes 4k..4k+3 hold k: each matches its group of four.
    np.testing.assert_array_equal(out[:, 0], u32([0xF << (4 * (lane // 4)) for lane in range(32)]))
    assert (out[:, 1] == 0).all() and (out[:, 2] == 0).all()
    out = match(np.full(32, 7, dtype=dtype))
    assert (out[:, 0] == FULL).all() and (out[:, 1] == FULL).all() and (out[:, 2] == 1).all()


@cuda.jit
def match_computed_kernel(out):
    t = cuda.threadIdx.x
    out[t] = cuda.match_any_sync(FULL, (t % 4) * 0.25)  # a float computed in the kernel


def test_match_any_on_computed_floats():
    out = np.zeros(32, dtype=np.uint32)
    match_computed_kernel[1, 32](out)
    np.testing.assert_array_equal(out, u32([0x11111111 << (lane % 4) for lane in range(32)]))


def test_match_compares_bit_patterns():
    values = np.where(LANES % 2 == 0, 0.0, -0.0)  # equal as numbers, not as bits
    out = match(values)
    np.testing.assert_array_equal(out[:, 0], u32(np.where(LANES % 2 == 0, 0x55555555, 0xAAAAAAAA)))
    assert (out[:, 2] == 0).all()


@cuda.jit
def activemask_kernel(out):
    t = cuda.threadIdx.x
    out[t, 0] = cuda.activemask()
    if t % 32 < 10:
        out[t, 1] = cuda.activemask()
    else:
        out[t, 1] = cuda.activemask()
    out[t, 2] = cuda.lanemask_lt()


def test_activemask_and_lanemask_lt():
    out = np.zeros((40, 3), dtype=np.uint32)
    activemask_kernel[1, 40](out)  # warp 1 has 8 lanes
    np.testing.assert_array_equal(out[:32, 0], u32(np.full(32, FULL)))
    np.testing.assert_array_equal(out[32:, 0], np.full(8, 0xFF))
    # Each branch of the divergent if is active on its own.
    np.testing.assert_array_equal(out[:32, 1], u32(np.where(LANES < 10, 0x3FF, 0xFFFFFC00)))
    np.testing.assert_array_equal(out[32:, 1], np.full(8, 0xFF))
    lt = [(1 << lane) - 1 for lane in range(32)]  # lanes below, active or not
    np.testing.assert_array_equal(out[:, 2], u32(lt + lt[:8]))


# -- bit intrinsics ------------------------------------------------------------------


@cuda.jit
def bits_kernel(x, pop, lead):
    i = cuda.grid(1)
    if i < x.size:
        pop[i] = cuda.popc(x[i])
        lead[i] = cuda.clz(x[i])


@cuda.jit
def ffs_kernel(x, first):  # Numba lowers ffs for 32- and 64-bit integers only
    i = cuda.grid(1)
    if i < x.size:
        first[i] = cuda.ffs(x[i])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.uint32,
                                   np.int64, np.uint64])
def test_popc_clz_ffs_read_the_values_width_in_twos_complement(dtype):
    """popc and clz return their argument's type, ffs uint32 (Numba's signatures);
    -1 has every bit of its width set, the minimum only the top one."""
    info = np.iinfo(dtype)
    width = info.bits
    x = np.array([0, 1, 6, info.max, info.min, -1 if info.min else 2], dtype=dtype)
    pop, lead = np.zeros_like(x), np.zeros_like(x)
    bits_kernel[1, 32](x, pop, lead)
    first = np.zeros(x.size, np.uint32)
    if width >= 32:
        ffs_kernel[1, 32](x, first)
    top = width - 1
    if info.min:  # signed: max has width - 1 bits, min the top bit only, -1 all
        want = [(0, width, 0), (1, top, 1), (2, width - 3, 2), (top, 1, 1), (1, 0, width),
                (width, 0, 1)]
    else:  # unsigned: min is 0; the last value is 2
        want = [(0, width, 0), (1, top, 1), (2, width - 3, 2), (width, 0, 1),
                (0, width, 0), (1, width - 2, 2)]
    want = np.array(want)
    np.testing.assert_array_equal(np.c_[pop, lead].astype(np.int64), want[:, :2])
    if width >= 32:
        np.testing.assert_array_equal(first, want[:, 2])


@cuda.jit
def python_int_bits_kernel(out):
    v = cuda.threadIdx.x - 1  # int64 on a GPU (an int32 minus a literal), an int here
    out[0] = cuda.popc(v)
    out[1] = cuda.clz(v + 2)
    out[2] = cuda.ffs(v + 1 + (1 << 40))


def test_an_int_reads_as_int64_as_numba_types_integer_arithmetic():
    out = np.zeros(3, np.int64)
    python_int_bits_kernel[1, 1](out)
    np.testing.assert_array_equal(out, [64, 63, 41])  # of -1, 1 and 2**40


@cuda.jit
def brev_converted_kernel(x64, flags, out):
    i = cuda.grid(1)
    out[0] = cuda.brev(i + 1)  # an int64 on a GPU: converted to uint32
    out[1] = cuda.brev(x64[0])  # int64 too
    out[2] = cuda.clz(flags[0])  # a bool reads as int8
    out[3] = cuda.popc(flags[0])


def test_brev_of_other_types_reverses_their_uint32_and_a_bool_is_int8():
    """Numba's brev takes uint32 and uint64: any other integer converts to uint32
    (cut to its low 32 bits), so the bit-reversal index ``brev(i) >> (32 - log2n)``
    stays within its array; Numba types a bool int8."""
    out = np.zeros(4, np.int64)
    brev_converted_kernel[1, 1](np.array([(1 << 40) + 2], np.int64), np.array([True]), out)
    np.testing.assert_array_equal(out, [1 << 31, 1 << 30, 7, 1])


@cuda.jit
def wrapped_int_kernel(big, scale, out):
    out[0] = cuda.popc(big * big * scale)  # past 64 bits here; wraps in int64 on a GPU


@simulator_only
def test_an_int_past_64_bits_wraps_as_int64_and_a_float_is_refused():
    out = np.zeros(1, np.int64)
    wrapped_int_kernel[1, 1]((1 << 32) + 1, 1, out)
    assert out[0] == 2  # (2**32 + 1)**2 = 2**64 + 2**33 + 1: 2**33 + 1 in int64
    with pytest.raises(TypeError, match="popc: takes an integer .* got float"):
        wrapped_int_kernel[1, 1]((1 << 32) + 1, 0.5, out)


@cuda.jit
def ffs_narrow_kernel(x, out):
    out[0] = cuda.ffs(x[0])


@simulator_only
def test_ffs_of_a_narrow_integer_is_refused_as_numba_cannot_compile_it():
    with pytest.raises(TypeError, match="ffs: Numba compiles ffs for 32- and 64-bit"):
        ffs_narrow_kernel[1, 1](np.array([4], np.int8), np.zeros(1, np.uint32))


@cuda.jit
def brev_kernel(x32, x64, out32, out64):
    i = cuda.threadIdx.x
    out32[i] = cuda.brev(x32[i])
    out64[i] = cuda.brev(x64[i])


def test_brev_reverses_32_and_64_bits():
    x32 = np.array([1, 0x80000000, 0xF0, 0xFFFFFFFF], np.uint32)
    x64 = np.array([1, 1 << 63, 0xF0, (1 << 64) - 1], np.uint64)
    out32, out64 = np.zeros_like(x32), np.zeros_like(x64)
    brev_kernel[1, 4](x32, x64, out32, out64)
    np.testing.assert_array_equal(out32, u32([0x80000000, 1, 0x0F000000, 0xFFFFFFFF]))
    np.testing.assert_array_equal(
        out64, np.array([1 << 63, 1, 0x0F00000000000000, (1 << 64) - 1], np.uint64))


@cuda.jit
def aggregated_atomic_kernel(counter, slots):
    """The warp-aggregated atomic: one add a warp, of its ballot's popc, at the
    lane its ffs names; each lane's slot is the base plus the lanes below it."""
    lane = cuda.threadIdx.x % 32
    mask = cuda.ballot_sync(FULL, True)
    leader = cuda.ffs(mask) - 1
    base = 0
    if lane == leader:
        base = cuda.atomic.add(counter, 0, cuda.popc(mask))
    base = cuda.shfl_sync(FULL, base, leader)
    slots[cuda.grid(1)] = base + cuda.popc(mask & cuda.lanemask_lt())


def test_popc_of_a_full_warps_ballot_counts_32():
    counter, slots = np.zeros(1, np.int32), np.zeros(64, np.int32)
    aggregated_atomic_kernel[1, 64](counter, slots)
    assert counter[0] == 64
    np.testing.assert_array_equal(np.sort(slots), np.arange(64))


# -- multi-dimensional blocks -----------------------------------------------------------


@cuda.jit
def block_2d_kernel(out):
    x, y = cuda.threadIdx.x, cuda.threadIdx.y
    # Linear id x + 8y: lane + 8 is the thread one row down.
    out[y, x] = cuda.shfl_down_sync(FULL, 100 * x + y, 8)


def test_2d_block_lanes_are_linear_ids():
    out = np.zeros((4, 8), dtype=np.int64)
    block_2d_kernel[1, (8, 4)](out)
    x, y = np.meshgrid(np.arange(8), np.arange(4))
    np.testing.assert_array_equal(out, np.where(y < 3, 100 * x + y + 1, 100 * x + y))


@cuda.jit
def block_3d_kernel(out):
    x, y, z = cuda.threadIdx.x, cuda.threadIdx.y, cuda.threadIdx.z
    out[z, y, x, 0] = cuda.laneid
    out[z, y, x, 1] = cuda.shfl_xor_sync(FULL, 100 * z + 10 * y + x, 16)
    out[z, y, x, 2] = cuda.ballot_sync(FULL, x == 0)


def test_3d_block_lanes_and_warps():
    out = np.zeros((4, 4, 4, 3), dtype=np.int64)
    block_3d_kernel[1, (4, 4, 4)](out)  # 64 threads: z 0,1 in warp 0; z 2,3 in warp 1
    z, y, x = np.meshgrid(np.arange(4), np.arange(4), np.arange(4), indexing="ij")
    np.testing.assert_array_equal(out[..., 0], (x + 4 * y + 16 * z) % 32)
    # Lane ^ 16 flips the low bit of z: the thread in the other z-plane of the warp.
    np.testing.assert_array_equal(out[..., 1], 100 * (z ^ 1) + 10 * y + x)
    assert (out[..., 2] == 0x11111111).all()  # x == 0: every fourth lane


# -- the block engine: barriers and failures ---------------------------------------------


@cuda.jit
def syncthreads_vote_kernel(preds, out):
    t = cuda.threadIdx.x
    out[t, 0] = cuda.syncthreads_count(preds[t])
    out[t, 1] = cuda.syncthreads_and(preds[t])
    out[t, 2] = cuda.syncthreads_or(preds[t])


def test_syncthreads_count_and_or():
    preds = (np.arange(48) % 5 == 0).astype(np.int32)  # 10 of 48
    out = np.zeros((48, 3), dtype=np.int32)
    syncthreads_vote_kernel[1, 48](preds, out)
    assert (out == [10, 0, 1]).all()


@cuda.jit
def guarded_vote_kernel(n, out):
    t = cuda.threadIdx.x
    if t >= n:
        return
    out[t, 0] = cuda.syncthreads_and(1)  # only the threads still running vote
    out[t, 1] = cuda.syncthreads_count(1)
    if t >= n - 24:
        return
    out[t, 2] = cuda.syncthreads_count(0)  # the 24 gone voted 1 at the last call
    out[t, 3] = cuda.syncthreads_or(0)


def test_votes_count_only_the_threads_at_the_barrier():
    """CUDA's __syncthreads_count/and/or count the threads that reach the call:
    not those that have exited, nor the votes of an earlier call."""
    out = np.full((64, 4), -7, dtype=np.int32)
    guarded_vote_kernel[1, 64](40, out)
    np.testing.assert_array_equal(out[:16], np.tile([1, 40, 0, 0], (16, 1)))
    np.testing.assert_array_equal(out[16:40, :2], np.tile([1, 40], (24, 1)))
    assert (out[16:40, 2:] == -7).all() and (out[40:] == -7).all()


@cuda.jit
def shared_lines_kernel(out):
    a = cuda.shared.array(4, np.int32)
    b = cuda.shared.array(4, np.int32)
    t = cuda.threadIdx.x
    a[t] = t
    b[t] = 10 + t
    cuda.syncthreads()
    out[t] = a[3 - t] + b[t]


def test_shared_arrays_on_separate_lines_are_separate():
    out = np.zeros(4, dtype=np.int32)
    shared_lines_kernel[2, 4](out)
    np.testing.assert_array_equal(out, [13, 13, 13, 13])


@cuda.jit
def shared_one_line_kernel(out):
    a, b = cuda.shared.array(1, np.int32), cuda.shared.array(1, np.int32)
    if cuda.threadIdx.x == 0:
        a[0] = 1
        b[0] = 2
    cuda.syncthreads()
    out[cuda.threadIdx.x] = a[0]


def test_shared_arrays_made_on_one_line_are_separate():
    out = np.zeros(2, dtype=np.int32)
    shared_one_line_kernel[1, 2](out)
    np.testing.assert_array_equal(out, [1, 1])


@cuda.jit
def grid_sync_kernel(x, out):
    i = cuda.grid(1)
    x[i] = i
    cuda.cg.this_grid().sync()
    out[i] = x[(i + 1) % x.size]  # another thread's write, made before the sync


@simulator_only
def test_a_grid_sync_runs_in_one_block_and_is_refused_in_more():
    """The simulator runs blocks one after another: those of a larger grid never
    meet, so a grid sync there would pass with the other blocks' writes not made."""
    x, out = np.zeros(32, dtype=np.int32), np.zeros(32, dtype=np.int32)
    grid_sync_kernel[1, 32](x, out)
    np.testing.assert_array_equal(out, np.roll(np.arange(32), -1))
    with pytest.raises(RuntimeError, match="a grid of 2 blocks cannot sync"):
        grid_sync_kernel[2, 16](x, out)


@cuda.jit
def shared_first_reach_kernel(out):
    s = cuda.shared.array(1, np.int32)
    if cuda.threadIdx.x == 0:
        s[0] = 7
    cuda.syncthreads()
    out[cuda.threadIdx.x] = s[0]


@simulator_only
def test_threads_that_reach_a_shared_array_together_share_it(monkeypatch):
    """Two threads that both find a site's shared array missing get one array: the
    first to make one waits in the allocation until a second has found none too (so
    the second's lookup falls between the first's lookup and its store, the switch
    that a busy CPU makes likely), and every thread must then read thread 0's 7."""
    import threading

    from numbakern.runtime import simulator

    arrived = threading.Condition()
    makers = []

    def slow_allocation(shape, dtype):
        with arrived:
            makers.append(threading.get_ident())
            arrived.notify_all()
            arrived.wait_for(lambda: len(makers) >= 2, timeout=10)
        return np.full(shape, -1, dtype)  # what uninitialised memory might hold

    monkeypatch.setattr(simulator, "_new_shared", slow_allocation)
    out = np.zeros(64, dtype=np.int32)
    shared_first_reach_kernel[1, 64](out)
    assert len(makers) >= 2  # the race was staged, not missed
    np.testing.assert_array_equal(out, 7)


@cuda.jit
def raising_kernel(x):
    t = cuda.threadIdx.x
    if t == 5:
        x[1000] = 1  # out of bounds: raises in the simulator
    cuda.syncthreads()
    cuda.syncwarp()
    x[t] = t


@simulator_only
def test_a_raising_thread_fails_the_launch_with_its_ids():
    with pytest.raises(IndexError, match=r"tid=\[5, 0, 0\] ctaid=\[0, 0, 0\]"):
        raising_kernel[1, 64](np.zeros(64))


class TwoPartError(Exception):
    def __init__(self, first, second):
        super().__init__(first + second)


@cuda.jit
def exotic_raise_kernel(x):
    if cuda.threadIdx.x == 1:
        raise TwoPartError("no ", "way")
    cuda.syncthreads()


@simulator_only
def test_an_exception_that_cannot_be_rebuilt_still_surfaces():
    with pytest.raises(RuntimeError, match=r"tid=\[1, 0, 0\].*TwoPartError: no way"):
        exotic_raise_kernel[1, 4](np.zeros(4))


@cuda.jit
def not_in_mask_kernel(out):
    out[cuda.threadIdx.x] = cuda.shfl_sync(0x1, 1, 0)


@simulator_only
def test_caller_outside_its_mask_raises():
    with pytest.raises(ValueError, match="lane 1 is not in its member mask"):
        not_in_mask_kernel[1, 2](np.zeros(2))


@cuda.jit
def deadlock_kernel(out):
    t = cuda.threadIdx.x
    if t < 16:
        cuda.syncthreads()  # never completes: lanes 16..31 wait in the shuffle
    else:
        out[t] = cuda.shfl_sync(FULL, t, 0)


@simulator_only
def test_deadlock_is_reported_not_hung():
    with pytest.raises(RuntimeError, match="deadlock in block ctaid=\\[0, 0, 0\\]"):
        deadlock_kernel[1, 32](np.zeros(32))


@cuda.jit
def divergent_barrier_kernel(out):
    t = cuda.threadIdx.x
    if t < 16:
        cuda.syncthreads()  # half the block here,
        out[t] = 1
    else:
        cuda.syncthreads()  # the other half here: undefined on a GPU
        out[t] = 2


@cuda.jit
def exited_and_counting_kernel(out):
    t = cuda.threadIdx.x
    if t >= 20:
        return  # exited threads count as arrived
    cuda.syncthreads()
    out[t] = cuda.syncthreads_count(t < 5)  # calls syncthreads itself: one place


@simulator_only
def test_a_barrier_met_at_different_places_raises_naming_both():
    with pytest.raises(RuntimeError, match=r"different syncthreads\(\) calls, .*"
                                           r"test_simulator.py:\d+ and .*test_simulator.py"):
        divergent_barrier_kernel[1, 32](np.zeros(32))
    out = np.zeros(32)
    exited_and_counting_kernel[1, 32](out)
    assert out[:20].tolist() == [5.0] * 20


@cuda.jit
def mixed_intrinsics_kernel(out):
    t = cuda.threadIdx.x
    if t == 0:
        cuda.syncwarp(0x3)
    else:
        out[t] = cuda.ballot_sync(0x3, True)


@simulator_only
def test_different_intrinsics_on_one_mask_raise():
    with pytest.raises(RuntimeError, match="wait in"):
        mixed_intrinsics_kernel[1, 2](np.zeros(2))


# -- kernels defined in a namespace that imports numba.cuda late --------------------


def test_a_namespace_may_import_cuda_after_its_first_launch():
    """A notebook defines an op, launches, and only then imports ``numba.cuda`` for a
    kernel of its own: that kernel must see the simulator's ``cuda`` too."""
    namespace = {"__name__": "notebook"}
    exec("import numpy as np, numbakern as nk\n"  # noqa: S102
         "@nk.op(identity=0)\n"
         "def add(a, b):\n"
         "    return a + b\n"
         "first = nk.reduce(np.arange(40), add)\n", namespace)
    exec("from numba import cuda\n"  # noqa: S102
         "@cuda.jit\n"
         "def lanes(out):\n"
         "    out[cuda.threadIdx.x] = cuda.threadIdx.x\n"
         "second = np.zeros(32, dtype=np.int64)\n"
         "lanes[1, 32](second)\n", namespace)
    assert namespace["first"] == sum(range(40))
    np.testing.assert_array_equal(namespace["second"], np.arange(32))


@simulator_only
def test_a_device_functions_module_importing_cuda_again_is_routed_at_the_next_launch():
    """A device function's globals are routed once a launch, not at every call: its
    module (a notebook cell run again) may bind ``cuda`` to ``numba.cuda`` itself
    between launches, and the next launch must find the simulator's again."""
    library = {"__name__": "library"}
    exec("from numba import cuda\n"  # noqa: S102
         "@cuda.jit(device=True)\n"
         "def lane():\n"
         "    return cuda.threadIdx.x\n", library)
    notebook = {"__name__": "notebook", "lane": library["lane"]}
    exec("from numba import cuda\n"  # noqa: S102
         "@cuda.jit\n"
         "def lanes(out):\n"
         "    out[cuda.threadIdx.x] = lane() + 1\n", notebook)
    for _ in range(2):
        out = np.zeros(32, dtype=np.int64)
        notebook["lanes"][1, 32](out)
        np.testing.assert_array_equal(out, LANES + 1)
        exec("from numba import cuda", library)  # noqa: S102


@simulator_only
def test_a_launch_raises_the_switch_interval_and_gives_it_back():
    """While simulated threads run, the interpreter switches at most every
    ``SWITCH_INTERVAL`` seconds, until the last of the launches running in any thread
    ends (whichever started first), which restores the caller's interval exactly; an
    interval already as long is left alone."""
    from numbakern.runtime import simblock

    started, release, errors = threading.Event(), threading.Event(), []

    @cuda.jit
    def switch_interval(out):
        out[cuda.threadIdx.x] = sys.getswitchinterval()

    @cuda.jit
    def held(out):
        started.set()
        release.wait(10)
        out[0] = sys.getswitchinterval()

    def launch_held(out):
        try:
            held[1, 1](out)
        except Exception as e:  # surfaced by the test's own thread
            errors.append(e)

    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.002)
        caller = sys.getswitchinterval()
        seen, late = np.zeros(2), np.zeros(1)
        switch_interval[1, 2](seen)
        assert sys.getswitchinterval() == caller
        with simblock.kernel_context(None):  # a launch of this thread's, which ends first
            other = threading.Thread(target=launch_held, args=(late,))
            other.start()
            assert started.wait(10)
        assert sys.getswitchinterval() == pytest.approx(simblock.SWITCH_INTERVAL)
        release.set()
        other.join()
        assert not errors
        assert sys.getswitchinterval() == caller
        np.testing.assert_allclose(seen, simblock.SWITCH_INTERVAL, rtol=1e-4)
        np.testing.assert_allclose(late, simblock.SWITCH_INTERVAL, rtol=1e-4)
        sys.setswitchinterval(0.1)
        longer = sys.getswitchinterval()
        switch_interval[1, 2](seen)
        np.testing.assert_array_equal(seen, longer)
        assert sys.getswitchinterval() == longer
    finally:
        release.set()
        sys.setswitchinterval(before)


@simulator_only
@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="Linux's scheduling policies")
def test_simulated_threads_run_under_the_batch_policy():
    """A woken simulated thread must not preempt the one waking it (it would only wait
    for its GIL): the pool's threads take ``SCHED_BATCH`` where the OS allows it."""
    refused = []

    def try_batch():
        try:
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
        except OSError as e:
            refused.append(e)

    probe = threading.Thread(target=try_batch)
    probe.start()  # a thread of its own: the test's keeps its policy
    probe.join()
    if refused:
        pytest.skip(f"this OS refuses SCHED_BATCH: {refused[0]}")
    policies = np.zeros(64, dtype=np.int64)

    @cuda.jit
    def policy(out):
        out[cuda.threadIdx.x] = os.sched_getscheduler(0)

    policy[1, 64](policies)
    np.testing.assert_array_equal(policies, os.SCHED_BATCH)


# -- stores ------------------------------------------------------------------------


@cuda.jit
def narrowing_store(src, dst):
    t = cuda.threadIdx.x
    dst[t] = src[t]


def test_an_integer_store_out_of_range_wraps_as_on_a_gpu():
    """int64 into int8 and uint8 truncates (a GPU's conversion); NumPy 2 raises
    OverflowError for it, which a kernel narrowing sums into an int8 out met only
    under the simulator. A sum into an int8 out wraps as NumPy's does."""
    import numbakern as nk

    src = np.array([300, -200, 5, 127], np.int64)
    for dtype in (np.int8, np.uint8):
        dst = cuda.to_device(np.zeros(4, dtype))
        narrowing_store[1, 4](cuda.to_device(src), dst)
        np.testing.assert_array_equal(dst.copy_to_host(), src.astype(dtype))
    x = np.full((2, 3), 100, np.int64)
    out = cuda.to_device(np.zeros(2, np.int8))
    nk.sum(cuda.to_device(x), axis=1, out=out)
    np.testing.assert_array_equal(out.copy_to_host(),
                                  np.add.reduce(x, axis=1, out=np.zeros(2, np.int8)))


@cuda.jit
def full_shared_kernel(out):
    a = cuda.shared.array(3072, np.float64)  # 24 KiB
    b = cuda.shared.array(3072, np.float64)  # 48 KiB with a: the limit
    t = cuda.threadIdx.x
    a[t] = t
    b[t] = 2 * t
    cuda.syncthreads()
    out[t] = a[31 - t] + b[t]


@cuda.jit
def over_shared_kernel(out):
    a = cuda.shared.array(3072, np.float64)
    b = cuda.shared.array(3072, np.float64)
    c = cuda.shared.array(1, np.int32)  # 4 bytes past the limit
    t = cuda.threadIdx.x
    c[0] = 0
    a[t] = t
    b[t] = t
    out[t] = c[0]


def test_a_block_may_have_48_kib_of_static_shared_memory():
    out = np.zeros(32)
    full_shared_kernel[1, 32](out)
    np.testing.assert_array_equal(out, 31 - LANES + 2 * LANES)


@simulator_only
def test_static_shared_memory_past_48_kib_is_refused_as_ptxas_refuses_it():
    """NumPy would hold the arrays, so without the check a kernel that fails to compile
    on every GPU would run here."""
    with pytest.raises(RuntimeError, match=r"49156 bytes of static shared memory a block, "
                                           r"49152 max"):
        over_shared_kernel[1, 32](np.zeros(32))


@simulator_only
def test_a_vector_load_from_a_misaligned_array_is_refused_as_a_gpu_faults():
    """A 16-byte vector load 4 bytes past an aligned start faults on a GPU ("misaligned
    address"); the simulator's slices would have read it."""
    from numbakern.kernels.vector import vector_loader

    load = vector_loader(4)

    @cuda.jit
    def first_vector(a, out):
        v = load(a, 0)
        out[0] = v[0] + v[1] + v[2] + v[3]

    a = cuda.to_device(np.arange(9, dtype=np.float32))
    out = np.zeros(1, np.float32)
    first_vector[1, 1](a, out)
    assert out[0] == 6
    with pytest.raises(RuntimeError, match="not 16-byte aligned"):
        first_vector[1, 1](a[1:], out)
