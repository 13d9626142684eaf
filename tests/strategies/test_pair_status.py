"""Decoupled look-back's 16-byte status words (numbakern/strategies/decoupled_lookback.py):
a one-field 8-byte state (int64, uint64, float64) is published beside its status as
one pair of uint64 words, word ``2t`` the status of tile ``t`` and ``2t + 1`` the
value's bits; a segmented scan's (flag byte, 8-byte value) state rides its byte in the
status word. 4-byte states keep their 64-bit packed word, other multi-field states
their packed word or separate arrays.

Every scan runs across more than 32 tiles (a warp of 32 threads x 1 item = 32
elements a tile; 41 tiles), so a look-back without published prefixes walks
more than one window. The status array each launch got is caught (a spy on the
strategy's ``launch``) to check which layout was taken, and after an inclusive scan,
what each tile published. int64 and uint64 results exactly against NumPy; float64
against NumPy's within ``n * eps`` of the sum of magnitudes (the look-back adds tiles
in another order than NumPy's loop); a wrong layout is off by far more.
"""

import numpy as np
import pytest
from numba import cuda

import numbakern as nk
from numbakern.ops.state import state_kit
from numbakern.runtime.device import SIMULATOR
from numbakern.strategies import WarpShuffle, decoupled_lookback
from numbakern.strategies.decoupled_lookback import (STATUS_A, STATUS_P, DecoupledLookback,
                                                     _packs, _pairs)

TILE = 32 * 1
N = 40 * TILE + 5  # 41 tiles, the last one partial


@pytest.fixture
def launched(monkeypatch):
    """``(total tiles, status array)`` of each look-back launch, in order."""
    seen = []
    real = decoupled_lookback.launch

    def spy(kernel, grid, threads, stream, *args):
        # args: 2 sources, 2 outputs, n, tiles, status, 4 value handles, carry
        seen.append((grid, args[6]))
        return real(kernel, grid, threads, stream, *args)

    monkeypatch.setattr(decoupled_lookback, "launch", spy)
    return seen


def lookback(publish_prefix=True, threads=32, items=1):
    return DecoupledLookback(WarpShuffle(threads=threads), items=items,
                             publish_prefix=publish_prefix)


def host(a):
    if hasattr(a, "copy_to_host"):
        return a.copy_to_host()
    if hasattr(a, "__cuda_array_interface__"):  # the launcher's DeviceBuffer, on a GPU
        return cuda.as_cuda_array(a).copy_to_host()
    return np.asarray(a)


def reference(x, exclusive=False, reverse=False, dtype=None):
    x = x.astype(dtype or (np.float64 if x.dtype.kind == "f" else np.int64))
    y = np.flip(np.cumsum(np.flip(x)), 0) if reverse else np.cumsum(x)
    return y - x if exclusive else y


def assert_float64_close(got, x, want):
    """``got`` within ``n * eps`` of the sum of magnitudes."""
    assert np.all(np.abs(got - want) <= np.abs(x).sum() * x.size * np.finfo(np.float64).eps)


def assert_scanned(got, x, want, dtype):
    """float64 within :func:`assert_float64_close`'s bound; integers exactly."""
    if dtype == "float64":
        assert_float64_close(got, x, want)
    else:
        np.testing.assert_array_equal(got, want)


def test_only_one_field_eight_byte_states_pair_with_their_status():
    def kit(*dtypes):
        op = nk.ops.SUM if len(dtypes) == 1 else PAIR
        return state_kit(op, tuple(np.dtype(d) for d in dtypes))

    for d in (np.int64, np.uint64, np.float64):
        assert _pairs(kit(d)) and not _packs(kit(d))
    for d in (np.float32, np.int32, np.uint32):
        assert _packs(kit(d)) and not _pairs(kit(d))
    assert _pairs(kit(np.int8, np.float64)) and _pairs(kit(np.bool_, np.int64))
    assert not _pairs(kit(np.int16, np.float64)) and not _pairs(kit(np.int64, np.int64))
    assert not _pairs(kit(np.int8, np.float32))  # packed in 64 bits instead


PAIR = nk.Op("pair_sum", lambda a0, a1, b0, b1: (a0 + b0, a1 + b1), (0, 0),
             fields=2, map=lambda v, i: (v, v),
             state_dtypes=lambda d, dt=None: (np.int64, np.int64))


@pytest.mark.parametrize("publish_prefix", [True, False])
def test_int32_summed_in_int64_publishes_status_and_value_in_word_pairs(publish_prefix,
                                                                        launched):
    """Each tile's pair holds its status and, for P, the inclusive prefix up to its
    last element, for A its aggregate: the words a wrong layout (swapped words, a
    value cut to 32 bits, an index off by a tile) would not hold. The sums pass
    2^32, so the value's high word matters."""
    x = np.random.default_rng(5).integers(-2**31, 2**31, N).astype(np.int32)
    got = host(nk.cumsum(cuda.to_device(x), strategy=lookback(publish_prefix)))
    want = reference(x)
    assert got.dtype == np.int64 and np.abs(want).max() > 2**32
    np.testing.assert_array_equal(got, want)
    (total, status), = launched
    assert total == 41
    words = host(status)
    assert words.dtype == np.uint64 and words.shape == (2 * total,)
    ends = np.minimum(np.arange(1, total + 1) * TILE, N) - 1
    values = words[1:2 * total:2].view(np.int64)
    if publish_prefix:
        np.testing.assert_array_equal(words[0:2 * total:2], STATUS_P)
        np.testing.assert_array_equal(values, want[ends])
    else:  # the first tile's total is its prefix; the others publish aggregates only
        np.testing.assert_array_equal(words[0:2 * total:2],
                                      [STATUS_P] + [STATUS_A] * (total - 1))
        np.testing.assert_array_equal(values, np.diff(want[ends], prepend=0))


@pytest.mark.parametrize("publish_prefix", [True, False])
def test_float64_publishes_its_bits_beside_the_status(publish_prefix, launched):
    x = np.random.default_rng(6).standard_normal(N) * 1e3
    got = host(nk.cumsum(cuda.to_device(x), strategy=lookback(publish_prefix)))
    assert_float64_close(got, x, reference(x))
    (total, status), = launched
    words = host(status)
    assert words.dtype == np.uint64 and words.shape == (2 * total,)
    ends = np.minimum(np.arange(1, total + 1) * TILE, N) - 1
    values = words[1:2 * total:2].view(np.float64)
    if publish_prefix:
        np.testing.assert_array_equal(words[0:2 * total:2], STATUS_P)
        assert_float64_close(values, x, reference(x)[ends])
    else:
        np.testing.assert_array_equal(words[0:2 * total:2],
                                      [STATUS_P] + [STATUS_A] * (total - 1))
        assert_float64_close(values, x, np.diff(reference(x)[ends], prepend=0))


EXCLUSIVE, REVERSE = {"exclusive": True}, {"reverse": True}


@pytest.mark.parametrize("dtype, kw", [
    ("int32", EXCLUSIVE), ("int32", REVERSE), ("float64", EXCLUSIVE), ("float64", REVERSE),
    ("float64", {**EXCLUSIVE, **REVERSE}), ("uint64", REVERSE)])
def test_exclusive_and_reverse_eight_byte_scans_across_tiles(dtype, kw, launched):
    rng = np.random.default_rng(7)
    if dtype == "float64":
        x = rng.standard_normal(N)
    elif dtype == "uint64":  # wraps modulo 2^64, as NumPy's does
        x = rng.integers(0, 2**64, N, dtype=np.uint64)
    else:
        x = rng.integers(-2**31, 2**31, N).astype(np.int32)
    got = host(nk.cumsum(cuda.to_device(x), strategy=lookback(False), **kw))
    want_dtype = np.uint64 if dtype == "uint64" else None
    with np.errstate(over="ignore"):
        want = reference(x, dtype=want_dtype, **kw)
    assert_scanned(got, x, want, dtype)
    (total, status), = launched
    assert status.dtype == np.uint64 and status.shape == (2 * total,)


def test_rows_of_many_tiles_each_with_vector_tiles(launched):
    """Two rows of 41 tiles (a segment each), 32 threads x 4 items: the int32 -> int64
    vector tile (4 int32 lanes in, 2 int64 out) beside the pair status words."""
    x = np.random.default_rng(8).integers(-2**31, 2**31, (2, 40 * 128 + 5)).astype(np.int32)
    strategy = lookback(True, threads=32, items=4)
    got = host(nk.cumsum(cuda.to_device(x), axis=1, strategy=strategy, layout="tiles"))
    np.testing.assert_array_equal(got, np.cumsum(x, axis=1, dtype=np.int64))
    (total, status), = launched
    assert total == 2 * 41 and status.shape == (2 * total,)


def test_four_byte_states_keep_the_packed_word(launched):
    x = np.random.default_rng(9).integers(-100, 100, N).astype(np.float32)
    got = host(nk.cumsum(cuda.to_device(x), strategy=lookback()))
    np.testing.assert_array_equal(got, np.cumsum(x.astype(np.float64)))
    (total, status), = launched
    assert status.dtype == np.uint64 and status.shape == (total,)
    if SIMULATOR:  # status in the high half, the float32 bits below
        words = host(status)[:total]
        np.testing.assert_array_equal(words >> np.uint64(32), STATUS_P)


def test_a_two_field_eight_byte_state_keeps_separate_words(launched):
    x = np.arange(N, dtype=np.int64)
    a, b = nk.associative_scan(cuda.to_device(x), PAIR, strategy=lookback(False))
    np.testing.assert_array_equal(host(a), np.cumsum(x))
    (total, status), = launched
    assert status.dtype == np.uint32 and status.shape == (total,)


@pytest.mark.parametrize("dtype, reverse", [("float64", False), ("int64", True)])
def test_segmented_eight_byte_scans_carry_the_flag_byte_in_the_status_word(dtype, reverse,
                                                                          launched):
    """Segments that cross tiles and end inside them: a look-back reads flag bytes and
    values from the pairs (a tile with a head stops the look-back of those after it).
    Checked after the scan: status P and the byte of ``flags | ...`` a tile holds."""
    rng = np.random.default_rng(10)
    lengths = [3, 75, 0, 1, 500, 33, 32, 625, 16]  # 1285 elements: 41 tiles of 32
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    if dtype == "float64":
        x = rng.standard_normal(offsets[-1])
    else:
        x = rng.integers(-2**40, 2**40, offsets[-1], dtype=np.int64)
    strategy = lookback(False)
    got = host(nk.segmented_scan(cuda.to_device(x), offsets, reverse=reverse,
                                 strategy=strategy))
    parts = [np.cumsum(x[a:b][::-1])[::-1] if reverse else np.cumsum(x[a:b])
             for a, b in zip(offsets[:-1], offsets[1:])]
    want = np.concatenate(parts)
    assert_scanned(got, x, want, dtype)
    (total, status), = launched
    assert status.dtype == np.uint64 and status.shape == (2 * total,)
    heads = host(status)[0:2 * total:2]
    assert set(np.unique(heads & np.uint64(0xFF))) <= {STATUS_A, STATUS_P}
    assert np.any(heads >> np.uint64(8))  # some tile published a flag byte
