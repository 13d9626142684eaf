"""Scans started from an initial carry (numbakern/api/scans.py's ``scan_with_carry``):
what a chunked scan gives each chunk, read by the kernels on the device.

Every scan strategy the registry lists that takes a carry, with blocks of 32 threads
and 2 items (tiles of 64), at sizes around warp and tile edges; the warp rows; NumPy
and device input. References: integers exactly; floats against a float64 scan of the
carry followed by the elements, within the nesting-depth bound of test_scans.py; a
non-commutative op against a Python loop with the carry first in the scan's order.
"""

import numpy as np
import pytest
from numba import cuda

import numbakern as nk
from numbakern.api.scans import scan_with_carry, takes_carry
from numbakern.strategies import REGISTRY, DecoupledLookback, ReduceThenScan, WarpShuffle

CARRIED = [s for s in nk.strategies.available("scan")
           if getattr(REGISTRY["scan"][s.split("/")[0]], "takes_carry", False)]
MODES = [(False, False), (True, False), (False, True), (True, True)]  # (exclusive, reverse)


@nk.op(identity=0.0, commutative=False)
def last_nonzero(a, b):
    return b if b != 0 else a


def make(spec: str, threads: int = 32, items: int = 2):
    grid, block = spec.split("/")
    blk = REGISTRY["block"][block](threads)
    if grid == "reduce_then_scan":
        return ReduceThenScan(blk, blocks=3, items=items)
    return REGISTRY["scan"][grid](blk, items=items)


def carried_ref(x, carry, f, exclusive, reverse):
    """The scan of ``[carry] + x`` in the scan's order, less the carry's own output:
    ``f.accumulate`` (a ufunc) or a Python loop over an Op's combine."""
    seq = np.concatenate([[carry], x[::-1] if reverse else x])
    if isinstance(f, np.ufunc):
        acc = f.accumulate(seq)
    else:
        acc = [seq[0]]
        for v in seq[1:]:
            acc.append(f(acc[-1], v))
        acc = np.array(acc)
    out = acc[:-1] if exclusive else acc[1:]
    return out[::-1] if reverse else out


def float_close(got, x64, carry, exclusive, reverse, depth=64):
    ref = carried_ref(x64, carry, np.add, exclusive, reverse)
    scale = carried_ref(np.abs(x64), abs(carry), np.add, exclusive, reverse)
    eps = np.finfo(got.dtype).eps
    return np.all(np.abs(got.astype(np.float64) - ref) <= 4 * eps * depth * scale + 1e-30)


def test_registry_lists_strategies_that_take_a_carry():
    assert {s.split("/")[0] for s in CARRIED} == {"decoupled_lookback", "reduce_then_scan"}


@pytest.mark.parametrize("spec", CARRIED)
def test_every_strategy_sizes_and_modes(spec):
    """Sizes around the warp and the tile (64); each in one mode (exclusive, reverse),
    the modes in turn; int32 into int64 (exact) and float32 alternately."""
    g = make(spec)
    rng = np.random.default_rng(len(spec))
    for k, n in enumerate([1, 33, 63, 64, 65, 3 * 64 + 5]):
        exclusive, reverse = MODES[k % 4]
        if k % 2:
            x = rng.integers(-1000, 1000, n).astype(np.int32)
            got = scan_with_carry(x, "sum", np.array([-12345], np.int64), dtype=np.int64,
                                  exclusive=exclusive, reverse=reverse, strategy=g)
            want = carried_ref(x.astype(np.int64), -12345, np.add, exclusive, reverse)
            np.testing.assert_array_equal(got, want, err_msg=f"{spec} n={n}")
        else:
            x = rng.uniform(-1, 1, n).astype(np.float32)
            got = scan_with_carry(x, "sum", np.array([7.5], np.float32), exclusive=exclusive,
                                  reverse=reverse, strategy=g)
            assert got.dtype == np.float32 and got.shape == (n,)
            assert float_close(got, x.astype(np.float64), 7.5, exclusive, reverse), (spec, n)


@pytest.mark.parametrize("spec", CARRIED)
def test_non_commutative_op_has_the_carry_on_the_left(spec):
    """last_nonzero keeps the latest non-zero: the carry shows until the first non-zero
    element in the scan's order (the end, for a reverse scan), so a carry on the right
    or folded in twice would show."""
    g = make(spec)
    n = 3 * 64 + 5
    v = np.zeros(n)
    v[[70, 71, 150]] = [2.0, 3.0, 4.0]
    for exclusive, reverse in MODES:
        got = scan_with_carry(v, last_nonzero, np.array([9.0]), exclusive=exclusive,
                              reverse=reverse, strategy=g)
        want = carried_ref(v, 9.0, last_nonzero.combine, exclusive, reverse)
        np.testing.assert_array_equal(got, want, err_msg=f"{exclusive} {reverse}")
        assert (got == 9.0).any()


def test_warp_rows_per_row_carries_and_the_whole_calls_bits():
    """Rows of 2 (16 rows a warp) and 40 (two chunks of 32): each row its own carry.
    A row's second half scanned from the first half's last result gives the whole
    row's bits (chunk edges at 32: the same combines in the same order)."""
    rng = np.random.default_rng(5)
    for n in (2, 40):
        x = rng.integers(-100, 100, (9, n)).astype(np.int16)
        carry = rng.integers(-1000, 1000, (9, 1)).astype(np.int64)
        for exclusive, reverse in MODES:
            got = scan_with_carry(x, "sum", carry, axis=1, exclusive=exclusive,
                                  reverse=reverse, dtype=np.int64, layout="warp")
            want = np.array([carried_ref(r.astype(np.int64), c, np.add, exclusive, reverse)
                             for r, c in zip(x, carry[:, 0])])
            np.testing.assert_array_equal(got, want, err_msg=f"n={n} {exclusive} {reverse}")
    f = rng.standard_normal((5, 70)).astype(np.float32)
    whole = nk.cumsum(f, axis=1, layout="warp")
    tail = scan_with_carry(f[:, 32:], "sum", whole[:, 31:32], axis=1, layout="warp")
    np.testing.assert_array_equal(tail, whole[:, 32:])


def test_axes_and_device_input_carry_per_row():
    """A carry per scanned row, rows in the C order of the other axes: a 3-D input
    along its middle axis, on the host and on the device (a strided device carry is
    made contiguous first); max keeps the carry where it is larger."""
    rng = np.random.default_rng(2)
    x = rng.integers(-50, 50, (3, 70, 4)).astype(np.int64)
    carry = rng.integers(-60, 60, (3, 1, 4)).astype(np.int64)
    want = np.maximum.accumulate(np.concatenate([carry, x], axis=1), axis=1)[:, 1:]
    for layout in ("tiles", "warp"):
        got = scan_with_carry(x, "max", carry, axis=1, layout=layout,
                              strategy=DecoupledLookback(WarpShuffle(32), items=2))
        np.testing.assert_array_equal(got, want, err_msg=layout)
    wide = cuda.to_device(np.repeat(carry, 2, axis=1))  # (3, 2, 4): a strided slice
    got = scan_with_carry(cuda.to_device(x), "max", wide[:, :1, :], axis=1)
    np.testing.assert_array_equal(got.copy_to_host(), want)


def test_nan_carry_is_a_state_not_an_element():
    """nansum maps a NaN element to 0, but a carry is a result: NaN stays NaN (NumPy's
    nancumsum of [inf, -inf, ...] is NaN from there on)."""
    x = np.array([1.0, np.nan, 2.0])
    got = scan_with_carry(x, "nansum", np.array([np.nan]))
    assert np.isnan(got).all()
    got = scan_with_carry(x, "nansum", np.array([1.0]), exclusive=True)
    np.testing.assert_array_equal(got, [1.0, 2.0, 2.0])


def test_what_takes_a_carry_and_errors():
    assert takes_carry("sum", np.float32)
    assert takes_carry("prod", np.int64) and not takes_carry("prod", np.float32)
    assert not takes_carry(nk.ops.arg_op("max"), np.float32)

    class NoCarry(DecoupledLookback):
        takes_carry = False

    assert not takes_carry("sum", np.float32, NoCarry())
    assert takes_carry("sum", np.float32, NoCarry(), layout="warp")
    x = np.arange(6.0).reshape(2, 3)
    with pytest.raises(ValueError, match=r"carry must have shape \(2, 1\)"):
        scan_with_carry(x, "sum", np.zeros((1, 2)), axis=1)
    with pytest.raises(ValueError, match=r"shape \(1,\)"):
        scan_with_carry(x, "sum", np.zeros(2))
    with pytest.raises(TypeError, match="dtype float64"):
        scan_with_carry(x, "sum", np.zeros((2, 1), np.float32), axis=1)
    with pytest.raises(TypeError, match="kind"):
        scan_with_carry(x, "sum", [[0.0], [0.0]], axis=1)
    with pytest.raises(ValueError, match="prod takes no initial carry"):
        scan_with_carry(x, "prod", np.ones((2, 1)), axis=1)
    with pytest.raises(ValueError, match="takes no initial carry"):
        scan_with_carry(x, "sum", np.ones((1,)), strategy=NoCarry())
