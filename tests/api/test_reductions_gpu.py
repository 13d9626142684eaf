"""Whole-array reductions on a real GPU (marked `gpu`; skipped under the simulator).

Same contract as tests/test_reductions.py at realistic sizes, with default grids
(256 threads, enough blocks to fill the device), CuPy input and output, streams, and
inputs past 2**31 elements. Float tolerance: the tree-sum bound of that file,
``4 * eps(acc) * sum(|x|)`` plus the final rounding.
"""

import numpy as np
import pytest

import numbakern as nk

pytestmark = pytest.mark.gpu

STRATEGIES = nk.strategies.available()


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


def close(got, ref, scale, acc=np.float32):
    return abs(float(got) - float(ref)) <= 4 * np.finfo(acc).eps * float(scale) + 1e-30


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("n", [1, 31, 32, 33, 127, 128, 129, 1000, (1 << 20) + 7, 1 << 28])
def test_sum_max_sizes(cp, strategy, n):
    x = cp.random.standard_normal(n, dtype=cp.float32)
    x64 = x.astype(cp.float64)
    got = nk.sum(x, strategy=strategy)
    assert isinstance(got, cp.ndarray) and got.shape == () and got.dtype == cp.float32
    assert close(got, x64.sum(), cp.abs(x64).sum())
    assert nk.max(x, strategy=strategy) == x.max()
    xi = cp.random.randint(-1000, 1000, n, dtype=cp.int32)
    assert int(nk.min(xi, strategy=strategy)) == int(xi.min())
    assert int(nk.sum(xi, strategy=strategy)) == int(xi.sum())


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int16", "uint16", "int32",
                                   "uint32", "int64", "uint64", "float16", "float32",
                                   "float64"])
def test_every_dtype(cp, strategy, dtype):
    rng = np.random.default_rng(5)
    n = (1 << 20) + 3
    if dtype == "bool":
        host = rng.integers(0, 2, n).astype(bool)
    elif dtype.startswith("float"):
        host = rng.uniform(-10, 10, n).astype(dtype)
    else:
        host = rng.integers(0, 100, n).astype(dtype)
    x = cp.asarray(host)
    if dtype.startswith("float"):
        acc = np.float32 if dtype == "float16" else np.dtype(dtype)
        ref = host.astype(np.float64)
        got = nk.sum(x, strategy=strategy)
        tol = 4 * np.finfo(acc).eps * np.abs(ref).sum() + np.finfo(dtype).eps * abs(ref.sum())
        assert abs(float(got) - ref.sum()) <= tol
    else:
        assert int(nk.sum(x, strategy=strategy)) == int(np.sum(host))
        assert int(nk.xor_sum(x, strategy=strategy)) == int(np.bitwise_xor.reduce(host))
        assert int(nk.bitwise_or_sum(x, strategy=strategy)) == int(np.bitwise_or.reduce(host))
    assert nk.max(x, strategy=strategy) == host.max()
    assert nk.min(x, strategy=strategy) == host.min()
    if dtype.startswith("float"):
        small = rng.uniform(0.9, 1.1, 40).astype(dtype)
        rtol = 1e-2 if dtype == "float16" else 1e-5
        got = nk.prod(cp.asarray(small), strategy=strategy)
        assert np.isclose(float(got), np.prod(small.astype(np.float64)), rtol=rtol)
    else:
        small = rng.integers(0, 3, 40).astype(dtype)
        assert nk.prod(small, strategy=strategy) == np.prod(small)


def test_nan_forms_read_their_all_nan_flags_on_every_call(cp):
    """The all-NaN flags are read after the launches on every call, replayed or not
    (a pinned copy of the codes; a strided index ``out`` through the general copy)."""
    x = cp.asarray(np.array([[1.0, np.nan], [np.nan, np.nan], [3.0, 2.0]]))
    for _ in range(3):  # the later calls replay the launches
        with pytest.warns(RuntimeWarning, match="All-NaN slice encountered"):
            got = nk.nanmax(x, axis=1)
        np.testing.assert_array_equal(cp.asnumpy(got), [1.0, np.nan, 3.0])
        with pytest.raises(ValueError, match="All-NaN slice encountered"):
            nk.nanargmax(x, axis=1)
        out = cp.full((2, 2), -1, cp.int64)[:, 0]
        assert nk.nanargmax(x[::2], axis=1, out=out) is out
        assert out.tolist() == [0, 0]
        with pytest.warns(RuntimeWarning, match="All-NaN slice encountered"):
            assert cp.isnan(nk.nanmin(cp.full(1000, cp.nan, cp.float32)))
    assert float(nk.nanmax(x[2])) == 3.0


@pytest.mark.parametrize("library", ["cupy", "torch"])
def test_a_replayed_nanmax_checks_flags_written_just_before_it(cp, library, side_stream):
    """Clean calls of one signature replay with their flags read as a check; an all-NaN
    row written by an op queued on the call's (non-blocking) stream right before the
    next call is seen (read after that op, on that stream): the call warns and gives
    NaN there."""
    from numbakern.runtime import replay

    h = np.random.default_rng(3).standard_normal((64, 100)).astype(np.float32)
    stream, delay = side_stream(library)
    with stream:
        if library == "torch":
            torch = pytest.importorskip("torch")
            x, to_host = torch.as_tensor(h, device="cuda"), torch.Tensor.cpu
        else:
            x, to_host = cp.asarray(h), cp.asnumpy
        before = replay.counts["replayed"]
        for _ in range(3):
            np.testing.assert_array_equal(np.asarray(to_host(nk.nanmax(x, axis=1))),
                                          h.max(axis=1))
        assert replay.counts["replayed"] - before >= 2
        delay()  # the write lands well after the call's launches queue
        x[5] = float("nan")
        want = h.max(axis=1)
        want[5] = np.nan
        with pytest.warns(RuntimeWarning, match="All-NaN slice encountered"):
            got = np.asarray(to_host(nk.nanmax(x, axis=1)))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_nan_and_all_negative(cp, strategy):
    x = -cp.arange(1, 1 << 22, dtype=cp.float32)
    assert float(nk.max(x, strategy=strategy)) == -1.0
    x[12345] = cp.nan
    assert cp.isnan(nk.max(x, strategy=strategy))
    assert cp.isnan(nk.min(x, strategy=strategy))


def test_two_pass_is_bitwise_deterministic(cp):
    x = cp.random.standard_normal(1 << 28, dtype=cp.float32)
    first = nk.sum(x, strategy="two_pass").get()
    for _ in range(5):
        assert nk.sum(x, strategy="two_pass").get().tobytes() == first.tobytes()


def test_numpy_and_numba_inputs(cp):
    from numba import cuda

    host = np.arange(100000, dtype=np.float64)
    assert nk.sum(host) == host.sum()
    dev = cuda.to_device(host)
    out = nk.sum(dev)
    assert hasattr(out, "copy_to_host") and out.copy_to_host() == host.sum()


def test_stream_is_honoured(cp):
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        x = cp.ones(1 << 24, dtype=cp.float32)
        got = nk.sum(x)  # CuPy's current stream
    stream.synchronize()
    assert float(got) == float(1 << 24)
    got = nk.sum(x, stream=stream)
    stream.synchronize()
    assert float(got) == float(1 << 24)


def test_strided_cupy_views_are_read_in_place(cp):
    x = cp.random.standard_normal((4096, 1000), dtype=cp.float32)
    for view in (x[::2], x[:, 3:900], x.T, x[::3, ::7]):
        ref = view.astype(cp.float64)
        assert close(nk.sum(view), ref.sum(), cp.abs(ref).sum())


@pytest.mark.parametrize("strategy", ["two_pass", "atomic_fold"])
def test_more_than_2_to_31_elements(cp, strategy):
    n = (1 << 31) + 100
    x = cp.ones(n, dtype=cp.int8)
    x[n - 5] = 7
    assert int(nk.sum(x, strategy=strategy)) == n + 6
    assert int(nk.max(x, strategy=strategy)) == 7


def test_explicit_stream_orders_cupy_temporaries(cp):
    """stream= other than CuPy's current stream: the call's CuPy allocations and casts
    must follow it too (numbakern.core.arrays.honours_stream), or they race the kernels."""
    stream = cp.cuda.Stream(non_blocking=True)
    x = cp.random.standard_normal((4096, 1000), dtype=cp.float32)
    cp.cuda.Device().synchronize()
    for _ in range(5):
        total = nk.sum(x, stream=stream)
        rows = nk.argmax(x, axis=1, stream=stream)
        scan = nk.cumsum(x[0], stream=stream)
        probs = nk.softmax(x, stream=stream)
    stream.synchronize()
    ref = x.astype(cp.float64)
    assert close(total, ref.sum(), cp.abs(ref).sum())
    assert bool((rows == x.argmax(axis=1)).all())
    assert float(cp.abs(scan[-1] - ref[0].sum())) < 1e-3
    assert bool(cp.allclose(probs.sum(axis=1), 1, atol=1e-5))


def test_a_device_arrays_layout_copy_follows_the_calls_stream(cp):
    """A Numba device array whose reduced axes do not collapse to two strided
    dimensions is copied contiguous by CuPy: on the call's non-blocking stream, after
    the work that wrote the input there (CuPy's current stream being another), and
    its where= mask likewise."""
    from numba import cuda

    stream = cuda.stream()
    other = cp.cuda.Stream(non_blocking=True)
    rng = np.random.default_rng(8)
    h = rng.standard_normal((40, 6, 50, 6, 70)).astype(np.float32)
    keep = rng.random(h.shape) < 0.7
    picked = (slice(None), slice(None, None, 2), slice(None), slice(None, None, 2))
    want = h[picked].astype(np.float64)
    for _ in range(3):
        x = cuda.to_device(h, stream=stream)[picked]  # written on stream
        mask = cuda.to_device(keep, stream=stream)[picked]
        with other:
            with pytest.warns(nk.CopyWarning):
                got = nk.sum(x, axis=(0, 2, 4), stream=stream).copy_to_host(stream=stream)
            with pytest.warns(nk.CopyWarning):
                masked = nk.sum(x, axis=(0, 2, 4), where=mask, stream=stream)
                masked = masked.copy_to_host(stream=stream)
        stream.synchronize()
        np.testing.assert_allclose(got, want.sum(axis=(0, 2, 4)), rtol=1e-5, atol=1e-2)
        np.testing.assert_allclose(masked, np.where(keep[picked], want, 0).sum(axis=(0, 2, 4)),
                                   rtol=1e-5, atol=1e-2)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
def test_a_float16_dtype_rounds_each_element_on_the_device(cp, dtype):
    """kernels/float16.round_to_float16 compiled for the GPU: every float16 rounding
    case (ties, subnormals, overflow, signed zeros) against NumPy's cast, through a
    scan (one output an element) and a sum along an axis of CuPy input."""
    gen = np.random.default_rng(7)
    edge = np.array([65504, 65519, 65520, 65536, 2049, 2051, 6.1e-5, 2.0**-25, 3 * 2.0**-25,
                     1e-8, -1e-8, -0.0, 0.0])
    x = np.concatenate([edge, -edge,
                        gen.standard_normal(4000) * 10.0 ** gen.integers(-9, 6, 4000)])
    x = x.astype(dtype) if dtype != np.int32 else np.clip(x * 1000, -2e9, 2e9).astype(dtype)
    each = cp.asnumpy(nk.cumsum(cp.asarray(np.stack([x, np.zeros_like(x)]).T.copy()),
                                axis=1, dtype=np.float16))[:, 0]
    want = x.astype(np.float16)
    np.testing.assert_array_equal(each, want)
    assert (np.signbit(each) == np.signbit(want)).all()
    summed = nk.sum(cp.asarray(np.stack([x, -x])), axis=0, dtype=np.float16)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(cp.asnumpy(summed),
                                      np.sum(np.stack([x, -x]), axis=0, dtype=np.float16))
