"""``histogram`` with ``bins`` an array of edges, against ``np.histogram`` exactly:
counts, edges and their dtypes, over the input dtypes and the edges' dtypes whose common
dtype NumPy compares in, values on and beside every edge, repeated edges, every
histogram strategy, weights and density, device and tensor input, and the refusals."""

import warnings

import numpy as np
import pytest
from numba import cuda

import numbakern as nk

RNG = np.random.default_rng(23)
STRATEGIES = [s for t in (32, 64) for s in nk.strategies.every("histogram", threads=t, blocks=2)]
EDGES = {
    "ints, repeated": np.array([-3, 0, 1, 1, 2, 5]),
    "floats, repeated last": np.array([-3.5, 0.25, 0.25, 7.0, 7.0]),
    "float32": np.array([-1.5, 0.1, 1.0, 4.0], np.float32),
    "uint32": np.array([0, 1, 3, 300], np.uint32),
    "float16": np.array([-2.0, 0.1, 3.0], np.float16),
}


def values_about(edges: np.ndarray, dtype, n: int) -> np.ndarray:
    """``n`` values of ``dtype``: every edge and its neighbours in ``dtype`` (the
    float edges' nearest values either side), values between and beyond them, NaN and
    infinities for floats."""
    dtype = np.dtype(dtype)
    spread = RNG.uniform(float(edges[0]) - 2, float(edges[-1]) + 2, n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dtype.kind == "f":
            at = edges.astype(dtype)
            near = np.concatenate([at, np.nextafter(at, dtype.type(-np.inf)),
                                   np.nextafter(at, dtype.type(np.inf)),
                                   np.array([np.nan, np.inf, -np.inf], dtype)])
            return np.concatenate([near, spread.astype(dtype)])[:max(n, near.size)]
        at = np.round(edges.astype(np.float64))
        near = np.concatenate([at - 1, at, at + 1])
        values = np.concatenate([near, np.round(spread)])
        if dtype.kind == "u":
            values = np.abs(values)
        if dtype.kind == "b":
            values = values != 0
        return values.astype(dtype)[:max(n, near.size)]


def same(got, want):
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("edges", EDGES.values(), ids=EDGES.keys())
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, np.int64, np.int32,
                                   np.uint64, np.uint32, np.int16, np.uint8, np.bool_])
def test_counts_and_edges_are_numpys(dtype, edges):
    x = values_about(edges, dtype, 129)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # bool input: NumPy's conversion warning, both
        same(nk.histogram(x, bins=edges), np.histogram(x, bins=edges))


@pytest.mark.parametrize("n", [1, 31, 32, 33, 127, 128, 129])
@pytest.mark.parametrize("strategy", STRATEGIES, ids=[f"{s.name}-{s.threads}" for s in STRATEGIES])
def test_every_strategy_and_size(strategy, n):
    edges = np.sort(RNG.uniform(-2, 2, 40))
    x = RNG.standard_normal(n).astype(np.float32)
    same(nk.histogram(x, bins=edges, strategy=strategy), np.histogram(x, bins=edges))


def test_integers_compare_exactly_past_float64s_precision():
    # int64 against int64 edges compares in int64 (NumPy's common dtype); float edges
    # make it float64, where 2**53 + 1 rounds down to 2**53
    x = np.array([2**53 + 1, 2**53 + 2, 2**62], np.int64)
    for edges in (np.array([2**53 + 1, 2**53 + 2, 2**62], np.int64),
                  np.array([2.0**53 + 2, 2.0**62])):
        same(nk.histogram(x, bins=edges), np.histogram(x, bins=edges))
    u = np.array([2**63 + 5, 3], np.uint64)  # uint64 with int64 edges: float64
    edges = np.array([0, 2**62, 2**63 - 1], np.int64)
    same(nk.histogram(u, bins=edges), np.histogram(u, bins=edges))


def test_weights_density_and_range_ignored():
    x = values_about(EDGES["floats, repeated last"], np.float64, 200)
    edges = EDGES["floats, repeated last"]
    w = RNG.uniform(0, 3, x.size)
    got, got_edges = nk.histogram(x, bins=edges, weights=w, range=(9, 1))
    want, want_edges = np.histogram(x, bins=edges, weights=w, range=(9, 1))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    same((got_edges,), (want_edges,))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a zero-width bin: NumPy's 0 / 0
        got = nk.histogram(x, bins=edges, density=True)[0]
        want = np.histogram(x, bins=edges, density=True)[0]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    ints = np.arange(10)
    same(nk.histogram(ints, bins=[0, 4, 9], weights=ints.astype(np.int8)),
         np.histogram(ints, bins=[0, 4, 9], weights=ints.astype(np.int8)))


@pytest.mark.parametrize("edges", [[2.0], np.zeros(0)])
def test_one_edge_or_none_makes_no_bins(edges):
    x = np.arange(5.0)
    same(nk.histogram(x, bins=edges), np.histogram(x, bins=edges))
    same(nk.histogram(x, bins=edges, weights=np.ones(5, np.float32)),
         np.histogram(x, bins=edges, weights=np.ones(5, np.float32)))


def test_device_and_tensor_input_return_their_kind():
    x = values_about(EDGES["float32"], np.float32, 100)
    edges = EDGES["float32"]
    want = np.histogram(x, bins=edges)
    hist, got_edges = nk.histogram(cuda.to_device(x), bins=cuda.to_device(edges))
    same((hist.copy_to_host(), got_edges.copy_to_host()), want)
    torch = pytest.importorskip("torch")
    hist, got_edges = nk.histogram(torch.from_numpy(x), bins=torch.from_numpy(edges))
    assert isinstance(hist, torch.Tensor) and isinstance(got_edges, torch.Tensor)
    same((hist.numpy(), got_edges.numpy()), want)


def test_bfloat16_values_against_numpys_bfloat16():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = values_about(EDGES["floats, repeated last"], np.float32, 150).astype(ml_dtypes.bfloat16)
    for edges in (EDGES["floats, repeated last"], EDGES["ints, repeated"]):
        same(nk.histogram(x, bins=edges), np.histogram(x, bins=edges))
    edges = np.array([-1, 0.5, 2], ml_dtypes.bfloat16)  # read through a float32 copy
    with pytest.warns(nk.CopyWarning, match="bins is bfloat16"):
        got = nk.histogram(x, bins=edges)
    want = np.histogram(x, bins=edges)
    same((got[0], got[1]), (want[0], want[1].astype(np.float32)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # (NumPy says nothing; nor the table)
        for edges in (np.linspace(-2, 2, 5), np.array([-2, 0, 3])):
            same(nk.histogram(x, bins=edges), np.histogram(x, bins=edges))
    for bins, weights, what in ((np.array([0, 1], np.uint16), None, "bins"),
                                ([0, 1], np.ones(x.shape, np.uint16), "weights")):
        with pytest.raises(TypeError, match=f"uint16 {what} of bfloat16 x"):
            nk.histogram(x, bins=bins, weights=weights)


@pytest.mark.parametrize("weights", [np.array([2**53, 1, 1], np.int64),
                                     np.array([2**64 - 1, 2, 1], np.uint64),
                                     np.array([2**62, 2**62, 1], np.int64),
                                     np.array([100, 100, 1], np.int8)],
                         ids=["past 2**53", "uint64 wraps", "int64 wraps", "int8 wraps"])
def test_integer_weights_sum_exactly_and_wrap_as_numpys_running_sums(weights):
    x = np.array([0.0, 0.5, 1.5])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no cast of an out-of-range float
        got = nk.histogram(x, bins=[0, 1, 2], weights=weights)
        equal_width = nk.histogram(x, 2, range=(0, 2), weights=weights)[0]
    same(got, np.histogram(x, bins=[0, 1, 2], weights=weights))
    same((equal_width,), (got[0],))  # the exact sums whatever the bins' form
    d = nk.histogram(cuda.to_device(x), bins=[0, 1, 2], weights=cuda.to_device(weights))[0]
    same((d.copy_to_host(),), (got[0],))  # wrapped on the device too, not saturated


def test_float_weights_are_each_bins_sum_rounded_once():
    # NumPy subtracts float32 running sums here: 1e8 + 1 - 1e8 is 0 in float32
    x, w = np.array([0.0, 0.5, 1.5]), np.array([1e8, 1, 1], np.float32)
    got = nk.histogram(x, bins=[0, 1, 2], weights=w)[0]
    assert got.dtype == np.float32 and got.tolist() == [1e8, 1.0]
    assert np.histogram(x, bins=[0, 1, 2], weights=w)[0].tolist() == [1e8, 0.0]


def test_bool_weights_between_edges_are_refused_as_numpy_refuses_them():
    x, w = np.arange(3.0), np.ones(3, bool)
    with pytest.raises(TypeError):
        np.histogram(x, bins=[0, 1, 2], weights=w)
    with pytest.raises(TypeError, match="bool weights with bins as an array of edges"):
        nk.histogram(x, bins=[0, 1, 2], weights=w)
    same(nk.histogram(x, 2, weights=w), np.histogram(x, 2, weights=w))
    # with no values NumPy adds nothing and returns bool zeros
    empty = (np.empty(0), np.empty(0, bool))
    same(nk.histogram(empty[0], bins=[0, 1, 2], weights=empty[1]),
         np.histogram(empty[0], bins=[0, 1, 2], weights=empty[1]))


def test_strided_and_reversed_edges_on_either_side():
    x = np.arange(8.0)
    d, backwards = cuda.to_device(x), cuda.to_device(x[::-1].copy())
    want = np.histogram(x, bins=x[::2])
    for bins in (d[::2], backwards[::-2], x[::2]):  # [0, 2, 4, 6], the middle one reversed
        same(nk.histogram(x, bins=bins), want)
        hist, edges = nk.histogram(cuda.to_device(x), bins=bins)
        same((hist.copy_to_host(), edges.copy_to_host()), want)
    same(nk.histogram(x, bins=backwards[::-1]), np.histogram(x, bins=x))  # every edge


@pytest.mark.parametrize("bins, error, words", [
    ([2, 1], ValueError, "`bins` must increase monotonically, when an array"),
    ([[0, 1], [1, 2]], ValueError, "`bins` must be 1d, when an array"),
    ([0, np.nan, 2], ValueError, "bins must not hold NaN"),
    (np.array([0, 1j]), TypeError, "real numbers .* got dtype complex128"),
    (["a", "b"], TypeError, "real numbers .* got dtype <U1"),
    ("auto", TypeError, "estimators by name are not supported"),
])
def test_bad_edges_are_refused(bins, error, words):
    with pytest.raises(error, match=words):
        nk.histogram(np.arange(4.0), bins=bins)


@pytest.mark.gpu
def test_many_uneven_edges_on_the_gpu():
    x = RNG.standard_normal(1 << 22).astype(np.float32)
    edges = np.unique(np.concatenate([np.geomspace(1e-3, 5, 500), -np.geomspace(1e-3, 5, 500),
                                      x[:24].astype(np.float64)]))
    for strategy in nk.strategies.every("histogram"):
        same(nk.histogram(cuda.to_device(x), bins=edges, strategy=strategy)[0:1],
             np.histogram(x, bins=edges)[0:1])
