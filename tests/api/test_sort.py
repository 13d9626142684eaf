"""sort and argsort against NumPy's stable sort, under the simulator (small sizes)."""

import warnings

import numpy as np
import pytest
from numba import cuda

import numbakern as nk
from numbakern.runtime.device import SIMULATOR_SHORT
from numbakern.strategies import BitonicSort, RadixSort

DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
          np.uint64, np.float16, np.float32, np.float64]
RNG = np.random.default_rng(7)


def strategies(threads=32):
    return [BitonicSort(threads=threads, max_size=256), RadixSort(threads=threads, items=2)]


def values(dtype, n, rng=RNG):
    """Random values of ``dtype`` with duplicates; floats with NaN, +-inf, +-0.0."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        x[::3] = x[0]  # duplicates
        return x
    x = (rng.standard_normal(n) * 100).astype(dtype)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, np.nan, -0.0, 0.0], dtype)
    k = min(n, len(special))
    x[rng.permutation(n)[:k]] = special[:k]
    return x


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and \
        np.array_equal(a.view(f"u{a.dtype.itemsize}"), b.view(f"u{b.dtype.itemsize}"))


def descending_reference(x):
    """Stable descending argsort: NaN (NumPy's largest) first, equal values in order."""
    _, rank = np.unique(x, return_inverse=True)  # -0.0 == +0.0, NaNs equal and last
    return np.argsort(-rank.reshape(-1), kind="stable")


# One radix call a dtype (a radix pass costs the simulator about the same whatever the
# op: a sweep of both ops and both orders on every dtype was most of this file's time).
# The (op, descending) pairs are spread so that signed, unsigned and float keys each meet
# sort and argsort, ascending and descending, at several widths; the other tests add
# argsorts of int8/int16/float16/float32/int64 and sorts of float32.
RADIX_CASES = {"bool": ("sort", False), "int8": ("argsort", True), "uint8": ("sort", True),
               "int16": ("sort", False), "uint16": ("argsort", True),
               "int32": ("argsort", False), "uint32": ("sort", False),
               "int64": ("sort", True), "uint64": ("argsort", False),
               "float16": ("sort", True), "float32": ("argsort", False),
               "float64": ("sort", False)}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype_radix_and_bitonic(dtype):
    """Every dtype through both sorts. Radix: 3 tiles of 64 in a row (the last of 2),
    the op and order of RADIX_CASES; a sort moves the input's own bits (no indices),
    -0.0 and +0.0 in input order. Bitonic (cheap): argsort and sort, ascending."""
    x = values(dtype, 130)
    op, down = RADIX_CASES[np.dtype(dtype).name]
    order = descending_reference(x) if down else np.argsort(x, kind="stable")
    s = RadixSort(threads=32, items=2)
    if op == "argsort":
        assert np.array_equal(nk.argsort(x, descending=down, strategy=s), order)
    else:
        assert same_bits(nk.sort(x, descending=down, strategy=s), x[order])
    assert np.array_equal(nk.argsort(x, strategy=BitonicSort(threads=32, max_size=256)),
                          np.argsort(x, kind="stable"))
    got = nk.sort(x[:100], strategy=BitonicSort(threads=32, max_size=128))
    assert same_bits(got, np.sort(x[:100], kind="stable"))


@pytest.mark.parametrize("n", [1, 2, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256])
@pytest.mark.parametrize("threads", [32])
def test_bitonic_sizes(n, threads):
    x = values(np.float32, n)
    got = nk.argsort(x, strategy=BitonicSort(threads=threads, max_size=256))
    assert np.array_equal(got, np.argsort(x, kind="stable"))


@pytest.mark.parametrize("n", [1, 31, 33, 64, 65, 257])
def test_radix_sizes_around_tiles(n):
    x = values(np.uint8, n)  # one pass; tiles of 64
    assert np.array_equal(nk.argsort(x, strategy=RadixSort(threads=32, items=2)),
                          np.argsort(x, kind="stable"))


@pytest.mark.parametrize("start", [0, 1])
def test_radix_histogram_reads_vectors_only_where_aligned(start):
    """The digit histogram loads 16-byte vectors of 4 keys where every row starts
    16-byte aligned, else single keys: a device view starting ``start`` float32 in,
    530 keys over two histogram blocks with a partial vector at the end; rows of 68
    (whole vectors) and of 67 (not)."""
    from numbakern.runtime.views import device_view
    from numbakern.strategies import radix_sort

    x = values(np.float32, 540)
    d = cuda.to_device(x)[start:start + 530]
    assert radix_sort._histogram_lanes(device_view(d), 1, 530) == (4 if start == 0 else 1)
    s = RadixSort(threads=32, items=8)
    assert np.array_equal(nk.argsort(d, strategy=s).copy_to_host(),
                          np.argsort(x[start:start + 530], kind="stable"))
    for n in (68, 67):
        rows = x[:2 * n].reshape(2, n)
        flat = device_view(cuda.to_device(rows).reshape(2 * n))
        assert radix_sort._histogram_lanes(flat, 2, n) == (4 if n == 68 else 1)
        assert np.array_equal(nk.argsort(rows, strategy=s),
                              np.argsort(rows, axis=-1, kind="stable"))


@pytest.mark.parametrize("make", [np.sort, lambda a: np.sort(a)[::-1].copy()],
                         ids=["sorted", "reversed"])
def test_sorted_and_reversed_input(make):
    x = make(values(np.float32, 90))
    for s in strategies():
        assert same_bits(nk.sort(x, strategy=s), np.sort(x, kind="stable")), s


def test_stability_many_duplicates():
    x = RNG.integers(0, 4, 200).astype(np.int16)  # 2 radix passes, 2 warps a block
    x[::7] = -5
    expected = np.argsort(x, kind="stable")
    for s in strategies(64):
        assert np.array_equal(nk.argsort(x, strategy=s), expected), s
    zeros = np.where(RNG.integers(0, 2, 150) == 1, 0.0, -0.0).astype(np.float16)
    for s in strategies():
        assert np.array_equal(nk.argsort(zeros, strategy=s), np.arange(150)), s


@pytest.mark.parametrize("dtype", [np.int16, np.float32])
def test_descending(dtype):
    """Descending argsorts on both strategies; descending sorts on bitonic here (the
    radix's: RADIX_CASES)."""
    x = values(dtype, 90)
    expected = descending_reference(x)
    for s in strategies():
        idx = nk.argsort(x, descending=True, strategy=s)
        assert np.array_equal(idx, expected), s
    b = BitonicSort(threads=32, max_size=128)
    assert same_bits(nk.sort(x, descending=True, strategy=b), x[expected])


@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_axes(axis):
    """The axis is moved last (and back) before any strategy sees the rows
    (api/sort.py along_rows), so every axis goes through the cheap bitonic sort and
    argsort; the radix sort (a block per row and pass, the simulator's dearest) takes
    the last axis and the flattened array."""
    x = values(np.float32, 3 * 2 * 5).reshape(3, 2, 5)
    b = BitonicSort(threads=32, max_size=64)
    assert same_bits(nk.sort(x, axis=axis, strategy=b), np.sort(x, axis=axis, kind="stable"))
    assert np.array_equal(nk.argsort(x, axis=axis, strategy=b),
                          np.argsort(x, axis=axis, kind="stable"))
    if axis in (-1, None):
        x8 = values(np.int8, 30).reshape(3, 2, 5)  # radix: one pass
        assert np.array_equal(nk.argsort(x8, axis=axis, strategy=RadixSort(threads=32, items=2)),
                              np.argsort(x8, axis=axis, kind="stable"))


def test_batch_of_rows_radix():
    x = values(np.int16, 3 * 70).reshape(3, 70)  # 3 rows, 2 tiles each
    assert np.array_equal(nk.argsort(x, strategy=RadixSort(threads=32, items=2)),
                          np.argsort(x, kind="stable"))


def test_radix_other_counter_and_scan():
    x = values(np.int16, 150)
    s = RadixSort(threads=32, items=2, histogram="warp_privatized",
                  scan="reduce_then_scan/blelloch")
    assert np.array_equal(nk.argsort(x, strategy=s), np.argsort(x, kind="stable"))


def test_a_histogram_object_gives_its_threads_where_the_sort_gives_none():
    """RadixSort(histogram=WarpPrivatized(threads=32)): the histogram kernel takes the
    object's 32 threads (it was refused against a default the caller never set); given
    both, they must agree. The repr shows the objects as given."""
    from numbakern.strategies import DecoupledLookback, WarpPrivatized, WarpShuffle

    x = values(np.float32, 150)
    s = RadixSort(histogram=WarpPrivatized(threads=32),
                  scan=DecoupledLookback(WarpShuffle(threads=64)))
    assert s.threads == 32 and "WarpShuffle(threads=64)" in repr(s)
    assert np.array_equal(nk.argsort(x, strategy=s), np.argsort(x, kind="stable"))
    with pytest.raises(ValueError, match="the histogram strategy has 32 threads, the sort 64"):
        RadixSort(threads=64, histogram=WarpPrivatized(threads=32))


def test_default_strategy_and_list_input():
    assert np.array_equal(nk.sort([3, 1, 2]), np.array([1, 2, 3]))
    # longer than the simulator's bitonic rows (256): radix, 64 threads (two warps) of
    # 2 keys, 3 tiles of 128 and the last of one key
    x = values(np.float32, 257)
    assert same_bits(nk.sort(x), np.sort(x, kind="stable"))


def test_empty_and_zero_d():
    for shape, axis in [((0,), -1), ((3, 0), -1), ((0, 4), 0), ((2, 0), None)]:
        x = np.zeros(shape, np.float32)
        assert nk.sort(x, axis=axis).shape == np.sort(x, axis=axis).shape
        got = nk.argsort(x, axis=axis)
        assert got.shape == np.argsort(x, axis=axis).shape and got.dtype == np.int64
    assert np.array_equal(nk.sort(np.float32(2.5), axis=None), np.array([2.5], np.float32))
    with pytest.raises(np.exceptions.AxisError):
        nk.sort(np.float32(2.5))


def test_errors():
    with pytest.raises(TypeError, match="x must have"):
        nk.sort(np.zeros(3, np.complex64))
    with pytest.raises(TypeError, match="x must have .* at most 8 bytes, got float128"):
        nk.argsort(np.zeros(3, np.longdouble))  # found by a fresh-user trial
    with pytest.raises(np.exceptions.AxisError):
        nk.argsort(np.zeros((2, 3)), axis=2)
    with pytest.raises(ValueError, match="unknown sort strategy"):
        nk.sort(np.zeros(3), strategy="quick")
    with pytest.raises(ValueError, match="at most 64"):
        nk.sort(np.zeros(65), strategy=BitonicSort(threads=32, max_size=64))
    with pytest.raises(TypeError, match="descending"):
        nk.sort(np.zeros(3), descending="yes")
    with pytest.raises(ValueError, match="max_size"):
        BitonicSort(max_size=100)
    for bad in (128.0, True, "128"):  # found by a fresh-user trial
        with pytest.raises(TypeError, match="max_size must be an int"):
            BitonicSort(max_size=bad)
    assert BitonicSort(max_size=np.int64(128)).max_size == 128
    with pytest.raises(ValueError, match="unknown"):
        RadixSort(scan="no_such_scan")  # at construction, not at the first sort
    with pytest.raises(TypeError):
        RadixSort(scan=123)
    with pytest.raises(ValueError, match="histogram"):
        RadixSort(histogram="global_atomic")


def test_zero_d_inputs_as_numpy():
    x = np.array(3.0)
    for axis in (-1, 0, None):
        np.testing.assert_array_equal(nk.argsort(x, axis=axis), np.argsort(x, axis=axis))
    np.testing.assert_array_equal(nk.sort(x, axis=None), np.sort(x, axis=None))
    with pytest.raises(np.exceptions.AxisError):
        nk.sort(x)  # NumPy's sort of a 0-d array along -1 raises too


def test_radix_look_back_walks_aggregates():
    """The look-back sums published aggregates back to the nearest inclusive prefix,
    across several windows of reads (under the simulator every earlier tile has its
    prefix already, so the words are built here)."""
    # The lessons in strategies/ live beside the package, not in it: a test run of an
    # installed numbakern from outside the checkout has none to read.
    lesson = pytest.importorskip("strategies.radix_sort")
    RADIX, STATUS_A, STATUS_P = lesson.RADIX, lesson.STATUS_A, lesson.STATUS_P
    _look_back = lesson._look_back

    tiles = 40
    counts = RNG.integers(0, 1000, (tiles, RADIX))
    status = np.full(tiles, STATUS_A)
    status[[0, 5, 20]] = STATUS_P  # rows' first tiles (0, 20) and one prefix (5)
    words = ((status[:, None] << 30) | counts).astype(np.uint32).reshape(-1)
    look_back = _look_back(np.uint32, 30, np.uint32((1 << 30) - 1))

    @cuda.jit
    def run(words, g, first, out):
        d = cuda.threadIdx.x
        out[d] = look_back(words, 0, g, first, d)

    for g, first, stop in [(39, 20, 20), (19, 0, 5), (6, 0, 5), (1, 0, 0)]:
        out = np.zeros(RADIX, np.int64)
        run[1, RADIX](words, g, first, out)
        assert np.array_equal(out, counts[stop:g].sum(axis=0)), (g, first)


def test_radix_items_and_wide_counter_fallback():
    with pytest.raises(ValueError, match="items=128 with 256 threads needs .* shared memory"):
        nk.sort(np.zeros(10, np.float64), strategy=RadixSort(threads=256, items=128))
    x = values(np.int64, 150)  # 8 passes x 256 digits x 7 warps: per-block counters
    s = RadixSort(threads=224, items=1, histogram="warp_privatized")
    assert np.array_equal(nk.argsort(x, strategy=s), np.argsort(x, kind="stable"))


def test_radix_tile_past_48_kib():
    """A tile in dynamic shared memory past the 48 KiB a block has without opting in:
    64 x 96 keys of 4 bytes, their int32 indices and digits (54 KiB), over a tile and
    a partial one."""
    x = values(np.float32, 64 * 96 + 100)
    s = RadixSort(threads=64, items=96)
    assert np.array_equal(nk.argsort(x, strategy=s), np.argsort(x, kind="stable"))


@pytest.mark.parametrize("items, error", [(0, ValueError), (-3, ValueError),
                                          (2.0, TypeError), (True, TypeError),
                                          ("4", TypeError)])
def test_radix_items_checked(items, error):
    with pytest.raises(error, match="items must be"):
        RadixSort(threads=32, items=items)


def test_radix_takes_numpy_integers():
    s = RadixSort(threads=np.int64(32), items=np.int32(2))
    assert (s.threads, s.items) == (32, 2) and type(s.items) is int
    x = values(np.float16, 100)
    assert np.array_equal(nk.sort(x, strategy=s), np.sort(x), equal_nan=True)


# (key bytes, index bytes): a 4-byte sort, an 8-byte sort, a 4-byte argsort, an
# 8-byte argsort (of rows under 2**31: int32 indices)
WIDTHS = [(4, 0), (8, 0), (4, 4), (8, 4)]


@pytest.fixture
def on_h200(monkeypatch):
    """The radix sort's tile choice as on an H200: no simulator, 227 KiB of shared
    memory a block may opt in to, 228 KiB a multiprocessor."""
    from numbakern.strategies import radix_sort

    monkeypatch.setattr(radix_sort, "SIMULATOR", False)
    monkeypatch.setattr(radix_sort, "shared_capacity", lambda: (227 * 1024, 228 * 1024))
    return radix_sort


def test_radix_default_tile_by_key_width(on_h200):
    """Without ``threads`` a pass's tile is the table's for its keys (384 threads for
    8-byte sorts and 4-byte argsorts), fewer keys where it does not fit."""
    s = RadixSort()
    assert [s.tile_shape(*w) for w in WIDTHS] == [(256, 28), (384, 16), (384, 16), (256, 12)]
    # 4-byte integer keys sorted (not argsorted): a larger tile
    assert s.tile_shape(4, 0, np.int32) == s.tile_shape(4, 0, np.uint32) == (256, 32)
    assert s.tile_shape(4, 4, np.uint32) == (384, 16) and s.tile_shape(8, 0, np.int64) == (384, 16)
    assert s.tile_shape(4, 0, np.float32) == (256, 28)
    on_h200.shared_capacity = lambda: (48 * 1024, 228 * 1024)
    assert s.tile_shape(4, 0) == (256, 12) and s.tile_shape(8, 0) == (384, 4)
    assert s.tile_shape(4, 0, np.int32) == (256, 12)


def test_radix_given_threads_or_items_kept(on_h200):
    """Given ``threads``, every kernel has them and keys a thread are the table's (or
    fewer); given ``items`` alone, the table's threads carry them."""
    s = RadixSort(threads=128)
    assert [s.tile_shape(*w) for w in WIDTHS] == [(128, 28), (128, 16), (128, 16), (128, 12)]
    assert s.threads == s.counter.threads == 128
    assert RadixSort(threads=512, items=8).tile_shape(8, 4) == (512, 8)
    assert RadixSort(items=20).tile_shape(8, 0) == (384, 20)
    with pytest.raises(ValueError, match="items=200 with 384 threads needs"):
        RadixSort(items=200).tile_shape(4, 4)


@pytest.mark.simulator
def test_rows_past_the_simulators_short_length_sort_in_wide_tiles():
    """A row just past ``SIMULATOR_SHORT`` sorts in tiles of 16 keys a thread (several
    tiles and a partial one), its keys and its stable order exactly as NumPy's."""
    x = np.random.default_rng(5).integers(-50, 50, SIMULATOR_SHORT + 33).astype(np.float32)
    x[::97] = np.nan
    np.testing.assert_array_equal(nk.sort(x), np.sort(x))
    np.testing.assert_array_equal(nk.argsort(x, stable=True), np.argsort(x, kind="stable"))


@pytest.mark.simulator
def test_radix_simulator_tile_and_key():
    """Under the simulator a default pass is the strategy's 64 threads of 2 keys
    whatever the keys, 16 for rows past ``SIMULATOR_SHORT``; a default strategy's key
    and repr are not those of one given the same threads."""
    s = RadixSort()
    assert {s.tile_shape(*w) for w in WIDTHS} == {(64, 2)}
    assert s.tile_shape(4, 0, None, SIMULATOR_SHORT) == (64, 2)
    assert s.tile_shape(4, 0, None, SIMULATOR_SHORT + 1) == (64, 16)
    assert RadixSort(threads=96).tile_shape(8, 4) == (96, 2)
    assert RadixSort(items=3).tile_shape(4, 0) == (64, 3)
    given = RadixSort(threads=64)
    assert s.key != given.key and s.key == RadixSort().key
    assert "threads=None" in repr(s) and "threads=64" in repr(given)


def test_radix_passes_launch_their_own_threads(monkeypatch):
    """Passes of other threads than the histogram's (96 against 32; the shape a
    default strategy takes on a GPU, scaled down): the histogram and passes launch
    each their own, over tiles of 192 around the row's end, and the sort and argsort
    match NumPy's."""
    from numbakern.strategies import radix_sort

    launches = []
    real = radix_sort.launch

    def record(kernel, blocks, threads, *args, **kw):
        launches.append(threads)
        return real(kernel, blocks, threads, *args, **kw)

    monkeypatch.setattr(radix_sort, "launch", record)
    monkeypatch.setattr(RadixSort, "tile_shape", lambda self, *widths: (96, 2))
    s = RadixSort(threads=32)
    x = values(np.float32, 385)
    assert same_bits(nk.sort(x, strategy=s), np.sort(x, kind="stable"))
    assert launches == [32] + [96] * 4
    x = values(np.int16, 191)
    assert np.array_equal(nk.argsort(x, strategy=s), np.argsort(x, kind="stable"))


# the default strategy (tiles of 64 x 2 under the simulator): rows one key short of a
# tile, a whole one, one key into a second and into a third
@pytest.mark.parametrize("dtype, n", [(np.float32, 127), (np.float32, 129), (np.float64, 128),
                                      (np.int64, 129), (np.uint32, 128), (np.uint32, 257)])
def test_radix_default_around_tiles(dtype, n):
    x = values(dtype, n)
    order = np.argsort(x, kind="stable")
    assert same_bits(nk.sort(x, strategy="radix"), x[order])
    assert np.array_equal(nk.argsort(x, strategy="radix"), order)


def test_numpy_signature_compatibility():
    """Found by a fresh-user trial: NumPy's kind= and stable= are taken (the sort is
    always stable), and a big-endian input's byte order comes back as NumPy gives it."""
    x = np.array([3, 1, 2, 1], ">i4")
    got = nk.sort(x)
    assert got.dtype == x.dtype and got.tolist() == [1, 1, 2, 3]
    assert nk.argsort(x).tolist() == [1, 3, 2, 0]
    assert nk.sort(np.array([2.0, 1.0]), stable=True).tolist() == [1.0, 2.0]
    for kind in ("quicksort", "mergesort", "heapsort", "stable", "Q"):
        assert nk.argsort(np.array([2, 1, 2]), kind=kind).tolist() == [1, 0, 2]
    for bad in ("bogus", ""):
        with pytest.raises(ValueError, match="kind must be"):
            nk.sort(np.array([1]), kind=bad)
    with pytest.raises(TypeError, match="kind must be None or a str, got int"):
        nk.sort(np.array([1]), kind=3)  # NumPy's TypeError too
    with pytest.raises(TypeError, match="stable must be"):
        nk.sort(np.array([1]), stable="yes")


@pytest.mark.parametrize("fn", [nk.sort, nk.argsort])
def test_kind_and_stable_together_raise_as_numpy(fn):
    x = np.array([3, 1, 2])
    with pytest.raises(ValueError, match="`kind` and keyword parameters"):
        fn(x, kind="quicksort", stable=True)
    with pytest.raises(ValueError, match="kind must be"):
        fn(x, kind="bogosort")
    with pytest.raises(TypeError, match="stable"):
        fn(x, stable="yes")
    # either alone, as NumPy's: always a stable sort
    assert np.array_equal(fn(x, kind="quicksort"), np.sort(x) if fn is nk.sort
                          else np.argsort(x, kind="stable"))
    assert np.array_equal(fn(x, stable=False), np.sort(x) if fn is nk.sort
                          else np.argsort(x, kind="stable"))
    # NumPy's order= names structured fields: None is taken, as NumPy's default
    assert np.array_equal(fn(x, order=None), fn(x))
    with pytest.raises(ValueError, match="order is not supported"):
        fn(x, order="f0")


BF16_SPECIALS = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e38, -1e-38, 3.5, 3.5]


# bitonic: one key, warp edges and a padded row; radix (tiles of 128 keys under the
# simulator): one tile partial, then 3 tiles with the last of one key
@pytest.mark.parametrize("strategy, n", [("bitonic", 1), ("bitonic", 31), ("bitonic", 33),
                                         ("bitonic", 129), ("radix", 33), ("radix", 257)])
def test_bfloat16_sorts_its_bits_without_a_copy(strategy, n):
    """bfloat16 (ml_dtypes) is keyed by its own bits, as NumPy orders its float32
    values (NaN last, -0.0 and +0.0 equal and stable), with no float32 working copy."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(n)
    a = (rng.standard_normal(n) * 4).astype(np.float32)
    a[:: 3] = a[0]  # ties
    a[rng.integers(0, n, min(n, len(BF16_SPECIALS)))] = BF16_SPECIALS[:min(n, 10)]
    x = a.astype(ml_dtypes.bfloat16)
    wide = x.astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", nk.CopyWarning)
        got = nk.sort(x, strategy=strategy)
        order = nk.argsort(x, strategy=strategy)
        down = nk.argsort(x, descending=True, strategy=strategy)
    assert got.dtype == x.dtype
    assert np.array_equal(got.view(np.uint16), x[np.argsort(wide, kind="stable")].view(np.uint16))
    assert np.array_equal(order, np.argsort(wide, kind="stable"))
    assert np.array_equal(down, descending_reference(wide))


def test_bfloat16_rows_of_torch_tensors_sort_as_torch():
    torch = pytest.importorskip("torch")
    x = torch.randn(4, 70).to(torch.bfloat16)
    x[1, 3] = float("nan")
    for axis, dim in ((-1, -1), (0, 0)):
        got = nk.sort(x, axis=axis)
        want = torch.sort(x, dim=dim, stable=True)
        assert got.dtype == torch.bfloat16 and torch.equal(got.isnan(), want.values.isnan())
        assert torch.equal(got.nan_to_num(), want.values.nan_to_num())
        assert torch.equal(nk.argsort(x, axis=axis), want.indices)


class _Strided:
    """What the layout reads of a CuPy array that is not C-contiguous."""

    class flags:  # noqa: N801 (CuPy's attribute)
        c_contiguous = False

    shape = (4, 3)

    def reshape(self, *shape):
        return "copied"


def test_a_device_row_layout_copy_is_announced():
    """Device input whose rows are not contiguous is copied contiguous (the sorts,
    selections and histograms read contiguous rows): with a CopyWarning. Host input
    is copied to the device anyway, without one."""
    from numbakern.core.arrays import flattened

    with pytest.warns(nk.CopyWarning, match=r"copied a \(4, 3\) device input"):
        assert flattened(_Strided()) == "copied"
    with warnings.catch_warnings():
        warnings.simplefilter("error", nk.CopyWarning)
        assert flattened(np.ones((4, 3)).T).shape == (12,)


@pytest.mark.gpu
def test_cupy_rows_that_are_not_contiguous_are_copied_with_a_warning():
    cupy = pytest.importorskip("cupy")
    h = RNG.random((64, 48)).astype(np.float32)
    x = cupy.asarray(h)
    with warnings.catch_warnings():
        warnings.simplefilter("error", nk.CopyWarning)
        nk.sort(x), nk.topk(x, 3), nk.median(x, axis=-1), nk.sort(x, axis=None)
    for call, expected in [
            (lambda: nk.sort(x, axis=0), np.sort(h, axis=0)),
            (lambda: nk.sort(x[:, ::2]), np.sort(h[:, ::2])),
            (lambda: nk.argsort(x.T, axis=None), np.argsort(h.T, axis=None, stable=True)),
            (lambda: nk.topk(x, 3, axis=0).values, -np.sort(-h, axis=0)[:3]),
            (lambda: nk.median(x, axis=0), np.median(h, axis=0)),
            (lambda: nk.histogram(x[:, ::2], bins=4, range=(0, 1))[0],
             np.histogram(h[:, ::2], bins=4, range=(0, 1))[0])]:
        with pytest.warns(nk.CopyWarning, match="device input to lay it out contiguously"):
            got = call()
        np.testing.assert_allclose(cupy.asnumpy(got), expected, rtol=1e-6)


def test_argsort_takes_descending_third_as_sort_and_torch():
    """``argsort(x, -1, True)`` is descending, as ``sort(x, -1, True)`` and
    ``torch.argsort(x, -1, True)``; ``stable`` and ``kind`` are keywords only."""
    x = np.array([3, 1, 2, 3])
    assert nk.argsort(x, -1, True).tolist() == [0, 3, 2, 1]
    assert nk.sort(x, -1, True).tolist() == [3, 3, 2, 1]
    with pytest.raises(TypeError, match="descending must be True or False"):
        nk.argsort(x, -1, "stable")  # NumPy's third is kind: refused, not misread
    assert nk.argsort(x, -1, stable=True).tolist() == [1, 2, 0, 3]


def test_sort_and_argsort_take_torchs_dim():
    """``dim=`` reads as ``axis=``, as ``torch.sort(x, dim=0)``; giving both is a
    TypeError naming them; a 0-d input's default axis is refused as NumPy's."""
    x = np.array([[3, 1, 2], [0, 5, 2], [3, 0, 1]], np.int32)
    for fn, ref in ((nk.sort, np.sort), (nk.argsort, np.argsort)):
        for dim in (0, 1, -2):
            np.testing.assert_array_equal(fn(x, dim=dim), ref(x, axis=dim, stable=True))
        np.testing.assert_array_equal(fn(x, dim=0, descending=True),
                                      ref(-x, axis=0, stable=True) if fn is nk.argsort
                                      else -ref(-x, axis=0, stable=True))
        with pytest.raises(TypeError, match="not both"):
            fn(x, 0, dim=1)
        with pytest.raises(np.exceptions.AxisError):
            fn(x, dim=2)
    with pytest.raises(np.exceptions.AxisError):
        nk.sort(np.array(1.0))
