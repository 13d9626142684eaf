"""Decoupled look-back's status words (numbakern/strategies/decoupled_lookback.py): states
packed beside their status in one 64-bit word, a (byte, up to 32-bit) pair included,
scanned across many tiles so that every tile but the first reads its predecessors'
words. Exact against NumPy: integer fields wrap as NumPy's, float fields hold small
integers."""

import numpy as np
import pytest

import numbakern as nk
from numbakern.ops.state import state_kit
from numbakern.strategies import WarpShuffle
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
