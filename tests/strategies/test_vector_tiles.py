"""Vector tiles of the decoupled look-back scan (numbakern/kernels/scan_tiles.py: 16-byte
loads and stores of contiguous, 16-byte aligned rows) against the scalar tiles and
NumPy.

The vector tile only changes how elements reach the blocked arrangement and leave it,
so its results must be the scalar tile's bit for bit (same tile shape, same combines):
every test compares the two, and checks that the path it means to exercise was the
one the strategy chose (the ``Vectors`` in its kernel key), so that a silent fallback
to scalars fails. Tiles of 32 threads x 4 items (128 elements; the simulator's default
2 items hold no whole float32 vector). float32 sums against float64 NumPy within
``n * eps`` of the running sum of magnitudes; int32 summed in int64 exactly.
"""

import numpy as np
import pytest
from numba import cuda

import numbakern as nk
from numbakern.kernels import scan_tiles
from numbakern.kernels.scan_tiles import Vectors, pad_every
from numbakern.ops.state import state_kit
from numbakern.runtime.device import WARP
from numbakern.runtime.views import device_view
from numbakern.strategies import WarpShuffle
from numbakern.strategies.decoupled_lookback import DecoupledLookback

TILE = 32 * 4
SIZES = [1, 3, 4, 5, 31, 32, 33, 127, 128, 129, 3 * TILE + 37]


def lookback(vectors: bool, threads: int = 32, items: int = 4):
    return DecoupledLookback(WarpShuffle(threads=threads), items=items, vectors=vectors)


def scan(x, vectors: bool, scan=nk.cumsum, **kw):
    got = scan(x, strategy=lookback(vectors), layout="tiles", **kw)
    return got.copy_to_host() if hasattr(got, "copy_to_host") else got


def both(x, chosen, **kw):
    """The vector and the scalar scan of ``x``, and what the vector call chose."""
    vec = scan(x, True, **kw)
    choice = chosen[-1]
    ref = scan(x, False, **kw)
    assert chosen[-1] is None
    assert vec.dtype == ref.dtype and vec.tobytes() == ref.tobytes()  # bit for bit
    return vec, choice


def reference(x, exclusive=False, reverse=False):
    x64 = x.astype(np.float64 if x.dtype.kind == "f" else np.int64)
    y = np.flip(np.cumsum(np.flip(x64, -1), -1), -1) if reverse else np.cumsum(x64, -1)
    if exclusive:
        y = y - x64
    return y


def assert_float_close(got, x, want):
    bound = np.cumsum(np.abs(x.astype(np.float64)), -1) * x.shape[-1] * \
        np.finfo(np.float32).eps + 1e-30
    assert np.all(np.abs(got.astype(np.float64) - want) <= bound)


@pytest.mark.parametrize("n", SIZES)
def test_float32_vector_tiles_around_vector_warp_and_tile_boundaries(n, chosen):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    got, choice = both(x, chosen)
    assert choice == Vectors(4, 4, "<f4")
    assert_float_close(got, x, reference(x))


@pytest.mark.parametrize("n", SIZES)
def test_int32_summed_in_int64_vector_tiles_exactly(n, chosen):
    x = np.random.default_rng(n).integers(-2**31, 2**31, n).astype(np.int32)
    got, choice = both(x, chosen)
    assert choice == Vectors(4, 2, "<i8", "<i4")  # 4 int32 a load, 2 int64 a store
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, reference(x))


@pytest.mark.parametrize("n", [5, 129, 3 * TILE + 37])
def test_exclusive_vector_tiles(n, chosen):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    got, choice = both(x, chosen, exclusive=True)
    assert choice is not None and got[0] == 0
    assert_float_close(got, x, reference(x, exclusive=True))
    i = rng.integers(-1000, 1000, n).astype(np.int32)
    got, choice = both(i, chosen, exclusive=True)
    assert choice is not None
    np.testing.assert_array_equal(got, reference(i, exclusive=True))


def test_float64_and_int64_take_two_lanes_a_vector(chosen):
    n = 2 * TILE + 3
    x = np.random.default_rng(1).standard_normal(n)
    got, choice = both(x, chosen)
    assert choice == Vectors(2, 2, "<f8")
    np.testing.assert_allclose(got, np.cumsum(x), rtol=1e-12, atol=1e-12)
    i = np.arange(n, dtype=np.int64) - 100
    got, choice = both(i, chosen)
    assert choice == Vectors(2, 2, "<i8")
    np.testing.assert_array_equal(got, np.cumsum(i))


@pytest.mark.parametrize("n", [33, 3 * TILE + 37])
def test_a_reverse_scan_takes_scalars_with_the_same_results(n, chosen):
    """A reverse scan's view runs backwards: scalar loads and stores."""
    x = np.random.default_rng(n).integers(-1000, 1000, n).astype(np.int32)
    got, choice = both(x, chosen, reverse=True)
    assert choice is None
    np.testing.assert_array_equal(got, reference(x, reverse=True))
    f = x.astype(np.float32) / 7
    got, choice = both(f, chosen, reverse=True, exclusive=True)
    assert choice is None
    assert_float_close(np.flip(got), np.flip(f), reference(np.flip(f), exclusive=True))


def test_a_misaligned_device_view_takes_scalars(chosen):
    """``x[1:]`` of an aligned device array starts 4 bytes past a 16-byte boundary
    (CUB's ``LOAD_VECTORIZE`` condition fails); ``x[4:]`` starts on one."""
    n = 2 * TILE + 9
    host = np.random.default_rng(5).integers(-1000, 1000, n + 4).astype(np.int32)
    d = cuda.to_device(host)
    got, choice = both(d[1:], chosen)
    assert choice is None
    np.testing.assert_array_equal(got, np.cumsum(host[1:], dtype=np.int64))
    got, choice = both(d[4:], chosen)
    assert choice == Vectors(4, 2, "<i8", "<i4")
    np.testing.assert_array_equal(got, np.cumsum(host[4:], dtype=np.int64))


def test_a_misaligned_out_takes_scalars(chosen):
    n = TILE + 5
    x = np.arange(n, dtype=np.float32)
    target = cuda.device_array(n + 1, np.float32)
    out = target[1:]
    vec = nk.cumsum(cuda.to_device(x), out=out, strategy=lookback(True), layout="tiles")
    assert chosen[-1] is None
    np.testing.assert_array_equal(vec.copy_to_host(), np.cumsum(x))


@pytest.mark.parametrize("length, vector", [(132, True), (130, False), (4, True), (6, False)])
def test_rows_along_the_last_axis(length, vector, chosen):
    """Rows of a C-contiguous 2-D array are 16-byte aligned when their length is a
    multiple of 4 (float32, int32): vectors; else scalars for every row."""
    rng = np.random.default_rng(length)
    x = rng.standard_normal((3, length)).astype(np.float32)
    got, choice = both(x, chosen, axis=-1)
    assert (choice == Vectors(4, 4, "<f4")) if vector else choice is None
    assert_float_close(got, x, reference(x))
    i = rng.integers(-1000, 1000, (3, length)).astype(np.int32)
    got, choice = both(i, chosen, axis=-1, exclusive=True)
    # int64 rows are aligned whenever int32 rows are
    assert (choice == Vectors(4, 2, "<i8", "<i4")) if vector else choice is None
    np.testing.assert_array_equal(got, reference(i, exclusive=True))


def test_two_items_a_thread_hold_no_float32_vector(chosen):
    """The simulator's default tile (2 items) cannot hold a 4-lane vector: scalars."""
    x = np.arange(100, dtype=np.float32)
    got = nk.cumsum(x, strategy=lookback(True, items=2), layout="tiles")
    assert chosen[-1] is None
    np.testing.assert_array_equal(got, np.cumsum(x))


def test_multi_field_states_keep_scalar_tiles(chosen):
    x = np.array([3, 1, 4, 1, 5, 9, 2, 6] * 20, np.float32)
    values, where = nk.cummax(x, strategy=lookback(True), layout="tiles")
    assert chosen[-1] is None
    np.testing.assert_array_equal(values, np.maximum.accumulate(x))


def _slots(positions, every):
    return [p + p // every for p in positions]


@pytest.mark.parametrize("state_bytes, width", [(4, 4), (4, 8), (8, 4), (8, 2), (8, 8)])
@pytest.mark.parametrize("items", [8, 16])
def test_the_vector_tile_padding_is_free_of_bank_conflicts(state_bytes, width, items):
    """pad_every's claim, counted: a warp's accesses of a vector tile's transposes (lane
    stride ``width``) and of the blocked reads (lane stride ``items``) fall in distinct
    banks (4-byte states) or in distinct bank pairs per half-warp (8-byte states)."""
    every = pad_every(state_bytes, Vectors(width, width, "<f4"))
    threads = 256
    for warp in range(threads // WARP):
        lanes = range(warp * WARP, (warp + 1) * WARP)
        patterns = [[(c * threads + t) * width + w for t in lanes]
                    for c in range(items // width) for w in range(width)]
        patterns += [[t * items + k for t in lanes] for k in range(items)]
        for pattern in patterns:
            slots = _slots(pattern, every)
            if state_bytes == 4:
                assert len({s % 32 for s in slots}) == WARP
            else:
                for half in (slots[:16], slots[16:]):
                    assert len({s % 16 for s in half}) == 16


def test_the_vector_tile_fits_shared_memory_or_falls_back(monkeypatch):
    """A tile whose padded vector layout would pass a block's shared memory takes
    scalars (the scalar tile's own limit is ``tile_items``')."""
    x = device_view(cuda.device_array((1, 1, 64), np.int32))
    out = device_view(cuda.device_array((1, 1, 64), np.int64))
    kit = state_kit(nk.ops.SUM, (np.dtype(np.int64),))
    assert scan_tiles.tile_vectors(x, out, kit, WarpShuffle(threads=32), 4, True) is not None
    monkeypatch.setattr(scan_tiles, "SHARED_LIMIT", 8 * 128)
    assert scan_tiles.tile_vectors(x, out, kit, WarpShuffle(threads=32), 4, True) is None
    assert scan_tiles.tile_vectors(x, out, kit, WarpShuffle(threads=32), 4, False) is None


def test_vector_tiles_replay_on_new_data(chosen):
    """A repeated call replays its recorded launches (numbakern/runtime/replay.py) with
    the spans of the new arrays patched in: a span starts at its view's address."""
    from numbakern.runtime import replay

    replay.forget()
    before = replay.counts["replayed"]
    strategy = lookback(True)
    rng = np.random.default_rng(9)
    kept = []
    for _ in range(3):
        h = rng.integers(-1000, 1000, 2 * TILE + 7).astype(np.int32)
        kept.append((nk.cumsum(cuda.to_device(h), strategy=strategy, layout="tiles"), h))
    assert chosen == [Vectors(4, 2, "<i8", "<i4")]  # built once, replayed twice
    assert replay.counts["replayed"] - before == 2
    for got, h in kept:
        np.testing.assert_array_equal(got.copy_to_host(), np.cumsum(h, dtype=np.int64))


@pytest.mark.parametrize("dtype, vectors", [
    (np.int8, Vectors(16, 2, "<i8")), (np.uint16, Vectors(8, 2, "<u8")),
    (np.float16, Vectors(8, 8, "<f2")),  # float32 states, float16 out: eight a store
])
def test_narrow_inputs_take_words_of_lanes(dtype, vectors, chosen):
    """Lanes of 1 and 2 bytes (``vector.py``'s ``<4 x i32>`` words) need 16 items a
    thread: tiles of 32 x 16, two of them and a ragged tail."""
    n = 2 * 512 + 37
    x = (np.random.default_rng(7).integers(0, 100, n)).astype(dtype)
    vec = nk.cumsum(x, strategy=lookback(True, items=16), layout="tiles")
    assert chosen[-1] == vectors
    ref = nk.cumsum(x, strategy=lookback(False, items=16), layout="tiles")
    assert vec.dtype == ref.dtype and vec.tobytes() == ref.tobytes()
    if dtype == np.float16:
        np.testing.assert_allclose(vec, np.cumsum(x.astype(np.float64)), rtol=2e-3)
    else:
        np.testing.assert_array_equal(vec, np.cumsum(x))


@pytest.mark.parametrize("exclusive", [False, True])
def test_vector_tiles_holding_prefixes_in_registers(exclusive, chosen):
    n = 2 * TILE + 37
    x = np.random.default_rng(11).integers(-1000, 1000, n).astype(np.int32)
    runs = [nk.cumsum(x, exclusive=exclusive, layout="tiles", strategy=DecoupledLookback(
        WarpShuffle(threads=32), items=4, hold="registers", vectors=v)) for v in (True, False)]
    assert chosen == [Vectors(4, 2, "<i8"), None]  # prefixes in registers: not narrow
    np.testing.assert_array_equal(runs[0], runs[1])
    np.testing.assert_array_equal(runs[0], reference(x, exclusive=exclusive))


@pytest.mark.parametrize("n", SIZES)
def test_narrow_tiles_scan_4_byte_inputs_in_8_byte_states(n, chosen):
    """float32 summed in float64 and uint32 in uint64 transpose their inputs at 4 bytes
    (``scan_tiles.narrows``), with the scalar tile's bits."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    got, choice = both(x, chosen, dtype=np.float64)
    assert choice == Vectors(4, 2, "<f8", "<f4")
    np.testing.assert_allclose(got, np.cumsum(x.astype(np.float64)), rtol=1e-12, atol=1e-12)
    u = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    got, choice = both(u, chosen)
    assert choice == Vectors(4, 2, "<u8", "<u4") and got.dtype == np.uint64
    np.testing.assert_array_equal(got, np.cumsum(u.astype(np.uint64)))


@pytest.mark.parametrize("op, low, high", [("max", -2**31, -1), ("min", 1, 2**31),
                                           ("prod", -1, 2)])
@pytest.mark.parametrize("exclusive", [False, True])
def test_narrow_tiles_never_combine_what_lies_past_a_segment(op, low, high, exclusive,
                                                             chosen):
    """A narrow tile fills the places past a segment's end with zeros, not the identity:
    a max of negatives, a min of positives and a product of signs would all change if
    a zero ever reached an output."""
    n = 3 * TILE + 37  # a partial last tile, its last vector partial too
    x = np.random.default_rng(5).integers(low, high, n).astype(np.int32)
    if op == "prod":  # signs: a zero reaching an output shows
        x = np.where(x >= 0, 1, -1).astype(np.int32)
    ufunc = {"max": np.maximum, "min": np.minimum, "prod": np.multiply}[op]
    want = ufunc.accumulate(x.astype(np.int64))
    got, choice = both(x, chosen, op=op, dtype=np.int64, exclusive=exclusive,
                       scan=nk.associative_scan)
    assert choice == Vectors(4, 2, "<i8", "<i4")
    if exclusive:
        identity = {"max": np.iinfo(np.int64).min, "min": np.iinfo(np.int64).max,
                    "prod": 1}[op]
        want = np.concatenate([[identity], want[:-1]])
    np.testing.assert_array_equal(got, want)


def test_narrow_tiles_scan_rows_each_in_its_own_tiles(chosen):
    """Rows of a 2-D scan are segments: each row's last tile ends in zeros that its
    successor row must never see."""
    x = np.random.default_rng(9).integers(-2**31, 2**31, (3, 2 * TILE + 36)).astype(np.int32)
    got, choice = both(x, chosen, axis=1)
    assert choice == Vectors(4, 2, "<i8", "<i4")
    np.testing.assert_array_equal(got, np.cumsum(x.astype(np.int64), axis=1))
