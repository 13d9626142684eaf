"""Decoupled look-back's status words (numbakern/strategies/decoupled_lookback.py): states
packed beside their status in one 64-bit word, a (byte, up to 32-bit) pair included,
scanned across many tiles so that every tile but the first reads its predecessors'
words. Exact against NumPy: integer fields wrap as NumPy's, float fields hold small
integers."""

import numpy as np
import pytest

import numbakern as nk
from numbakern.ops.state import state_kit
from numbakern.runtime.device import SIMULATOR
from numbakern.strategies import Blelloch, HillisSteele, ReduceThenScan, WarpShuffle
from numbakern.strategies.decoupled_lookback import DecoupledLookback, _packs

# (wrapping int8 sum, float32 sum): a pair whose byte goes negative
PAIR = nk.Op("byte_and_sum", lambda a0, a1, b0, b1: (a0 + b0, a1 + b1), (0, 0.0),
             fields=2, map=lambda v, i: (v, v),
             state_dtypes=lambda d, dt=None: (np.int8, np.float32))


@pytest.mark.parametrize("publish_prefix", [True, False])
def test_a_byte_and_float_pair_is_packed_and_scans_across_tiles(publish_prefix):
    kit = state_kit(PAIR, (np.dtype(np.int8), np.dtype(np.float32)))
    assert _packs(kit)
    x = np.random.default_rng(3).integers(-100, 100, 1000).astype(np.int8)
    strategy = DecoupledLookback(WarpShuffle(threads=64),
                                 publish_prefix=publish_prefix)
    wrapped, sums = nk.associative_scan(x, PAIR, strategy=strategy)
    np.testing.assert_array_equal(wrapped, np.cumsum(x, dtype=np.int8))
    np.testing.assert_array_equal(sums, np.cumsum(x.astype(np.float64)).astype(np.float32))
    assert wrapped.min() < 0  # the byte's sign survives its word


def test_only_states_that_fit_one_word_beside_the_status_are_packed():
    def kit(*dtypes):
        return state_kit(PAIR if len(dtypes) == 2 else nk.ops.SUM,
                         tuple(np.dtype(d) for d in dtypes))

    assert _packs(kit(np.float32)) and not _packs(kit(np.float64))
    assert _packs(kit(np.int8, np.float32)) and _packs(kit(np.bool_, np.int32))
    assert not _packs(kit(np.int8, np.float64)) and not _packs(kit(np.int16, np.float32))


def test_items_on_a_gpu_are_sized_by_the_input_where_the_state_widens_it(monkeypatch):
    """``auto_items`` as it runs on a GPU (the simulator always takes 2): int32 summed
    in int64 gets int32's 16 items a thread (34 KB of tile at 256 threads), as do the
    one-field 8-byte states of 8-byte inputs; two 4-byte fields keep 64 bytes a thread
    (8 items), and a tile that would pass the limit halves."""
    from numbakern.kernels import scan_tiles

    monkeypatch.setattr(scan_tiles, "SIMULATOR", False)
    assert scan_tiles.auto_items(8, 256, 4) == 16
    assert scan_tiles.auto_items(8, 256) == 16 and scan_tiles.auto_items(8, 512) == 8
    assert scan_tiles.auto_items(8, 256, fields=2) == 8
    assert scan_tiles.auto_items(4, 256) == 16 and scan_tiles.auto_items(4, 512) == 8
    assert scan_tiles.auto_items(8, 512, 4) == 8  # 16 items would take 67 KB
    assert scan_tiles.auto_items(8, 128, 1) == 16  # at most 16


def test_the_scan_job_sizes_items_by_a_narrower_input():
    from numbakern.core.jobs import ScanJob

    def value_bytes(x_dtype, state_dtypes, fields=1):
        job = ScanJob.__new__(ScanJob)  # the property reads the input and kit only
        job.x = np.empty((1, 1, 4), x_dtype)
        job.kit = type("Kit", (), {"fields": fields,
                                   "dtypes": tuple(np.dtype(d) for d in state_dtypes)})()
        return job.value_bytes

    assert value_bytes(np.int32, (np.int64,)) == 4
    assert value_bytes(np.uint8, (np.uint64,)) == 1
    assert value_bytes(np.float64, (np.float64,)) is None
    assert value_bytes(np.float32, (np.float32,)) is None
    assert value_bytes(np.int32, (np.int64, np.int64), fields=2) is None


# Under the simulator a tile is 64 threads of 2 items: 128 elements.
@pytest.mark.parametrize("n", [1, 31, 32, 33, 127, 128, 129])
@pytest.mark.parametrize("block", nk.strategies.available("block", scan=True))
def test_one_tile_a_segment_needs_no_zeroed_status_words(block, n):
    """A scan of one tile a segment takes its tile from its block index and never
    reads the status words (they are not zeroed: garbage must not matter); more
    tiles look back as before. float32 against float64 NumPy, rtol 1e-5, atol 1e-4."""
    from numba import cuda

    h = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    strategy = f"decoupled_lookback/{block}"
    for kw, want in [({}, np.cumsum(h.astype(np.float64))),
                     ({"exclusive": True}, np.cumsum(h.astype(np.float64)) - h),
                     ({"reverse": True}, np.cumsum(h[::-1].astype(np.float64))[::-1])]:
        got = nk.cumsum(cuda.to_device(h), strategy=strategy, **kw).copy_to_host()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    rows = np.random.default_rng(n + 1).standard_normal((3, n)).astype(np.float32)
    got = nk.cumsum(cuda.to_device(rows), axis=1, strategy=strategy).copy_to_host()
    np.testing.assert_allclose(got, np.cumsum(rows.astype(np.float64), axis=1), rtol=1e-5,
                               atol=1e-4)


@pytest.mark.skipif(not SIMULATOR, reason="the simulator's tiles (a GPU's hold 4096)")
@pytest.mark.parametrize("n, launches", [(100, 1), (128, 1), (129, 2)])
def test_a_repeated_one_tile_scan_replays_as_one_launch(n, launches):
    from numba import cuda

    from numbakern.runtime import replay

    replay.forget()  # this test's recording alone in the table
    x = cuda.to_device(np.arange(n, dtype=np.float32))
    nk.cumsum(x)  # recorded
    before = replay.counts["replayed"]
    got = nk.cumsum(x)
    assert replay.counts["replayed"] == before + 1
    (program,) = nk.cumsum.tensor_replay_table.values()
    assert len(program.steps) == launches  # more tiles: the status words' zeroing too
    np.testing.assert_array_equal(got.copy_to_host(), np.cumsum(np.arange(n)))


def _logcumsumexp_reference(x):
    return np.logaddexp.accumulate(x.astype(np.float64))


@pytest.mark.parametrize("grid", [DecoupledLookback, ReduceThenScan])
def test_a_wide_block_takes_the_items_its_shared_memory_holds(grid):
    """16-byte states (logcumsumexp's float64 (max, sum)) in blocks of 1024: the items
    a thread are chosen so that the tile and Blelloch's own states fit a block's 48
    KiB together (the simulator's two items a thread did not)."""
    x = np.random.default_rng(4).standard_normal(1500)  # two tiles of 1024
    got = nk.logcumsumexp(x, strategy=grid(Blelloch(threads=1024)))
    np.testing.assert_allclose(got, _logcumsumexp_reference(x), rtol=1e-12)


def test_a_block_scan_whose_states_leave_no_room_for_a_tile_is_named():
    """Hillis-Steele's 2 x 1024 16-byte states and a tile of one item a thread need
    more than 48 KiB: the error says what to change (the items were not the caller's)."""
    x = np.zeros(3000)
    with pytest.raises(ValueError, match=r"items=1 x threads=1024 x 16-byte states need "
                                         r"49664 bytes .* use fewer threads or another "
                                         r"block strategy than HillisSteele"):
        nk.logcumsumexp(x, strategy=DecoupledLookback(HillisSteele(threads=1024)))
    with pytest.raises(ValueError, match=r"items=16 x threads=256 .* use fewer items$"):
        nk.logcumsumexp(x, strategy=DecoupledLookback(Blelloch(threads=256), items=16))
