"""Sort and histogram benchmarks beside CuPy and PyTorch (GPU only).

Run: ``pytest bench/bench_sort.py --benchmark-json=sort.json``. GB/s count the keys
read once and written once (sort), or the values read once (histograms). The float
histogram beside ``torch.histc``: ``pytest bench/bench_sort.py -k float_histogram``.

Each result is checked before timing: sorts equal ``cupy.sort`` exactly, and torch's
indices (its sort returns them too) are distinct and hold the sorted values; argsorts
equal ``cupy.argsort`` exactly (all three are stable); integer counts equal
``cupy.bincount`` (CuPy's own cases of these three are their reference: their check
only runs it). numbakern's float histograms equal NumPy's (bin ``i`` holds
``edges[i] <= v < edges[i+1]``, the last closed, with NumPy's edges, compared in their
dtype) exactly, and its edges NumPy's; CuPy's and torch's counts may differ by a
millionth of the elements (a value within rounding of an edge falls either side
in their arithmetic, as ``bench/peers.py`` allows), CuPy's edges by an ulp.
"""

import numpy as np
import pytest

import numbakern as nk

SIZES = [1 << 24, 1 << 28]
EPS32 = float(np.finfo(np.float32).eps)


def _numpy_counts(cp, x, edges):
    """NumPy's histogram counts of ``x`` between ``edges``: bin ``i`` holds ``edges[i]
    <= v < edges[i+1]`` (the last bin also ``v == edges[-1]``), compared in the edges'
    dtype; values outside are not counted."""
    v = x.astype(edges.dtype)
    i = cp.searchsorted(edges, v, side="right") - 1
    i[v == edges[-1]] = edges.size - 2
    return cp.bincount(i[(i >= 0) & (i < edges.size - 1)], minlength=edges.size - 1)


def _histogram_check(verify, counts, edges, impl, n):
    """The check of a float histogram (the module doc's): numbakern's (counts, edges)
    exactly; CuPy's counts within a millionth of ``n`` and edges within an ulp; torch's
    counts within a millionth of ``n``."""
    slack = 1e-6 * n
    if impl == "numbakern":
        return verify.agrees((counts, edges))
    if impl == "cupy":
        def check(got):
            verify.close(got[0], counts, atol=slack)
            verify.close(got[1], edges, rtol=EPS32)

        return check
    return verify.agrees(counts, atol=slack)


@pytest.mark.parametrize("n", SIZES, ids=lambda n: f"2^{n.bit_length() - 1}")
@pytest.mark.parametrize("dtype", ["float32", "uint32"])
@pytest.mark.parametrize("impl", ["numbakern", "cupy", "torch"])
def test_sort(measure, cp, torch_cuda, verify, n, dtype, impl):
    rng = cp.random.RandomState(0)  # seeded: a failing case reruns on its own data
    x = rng.standard_normal(n, dtype=cp.float32) if dtype == "float32" else \
        rng.randint(0, 2**31, n, dtype=cp.int64).astype(dtype)
    want = cp.sort(x)
    check = verify.agrees(want)
    if impl == "numbakern":
        fn = lambda: nk.sort(x)  # noqa: E731
    elif impl == "cupy":
        fn = lambda: cp.sort(x)  # noqa: E731
    else:
        if torch_cuda is None:
            pytest.skip("PyTorch with CUDA is not installed")
        t = torch_cuda.as_tensor(x.astype("int64") if dtype == "uint32" else x, device="cuda")
        fn = lambda: torch_cuda.sort(t)  # noqa: E731
        check = verify.pair(x, want)
    measure(fn, 2 * x.nbytes, check=check, op="sort", impl=impl, n=n, dtype=dtype)


@pytest.mark.parametrize("impl", ["numbakern", "cupy", "torch"])
def test_argsort(measure, cp, torch_cuda, verify, impl):
    """Indices (torch: values and indices, its sort's one form). GB/s: keys read once,
    int64 indices written once."""
    n = 1 << 28
    x = cp.random.RandomState(0).standard_normal(n, dtype=cp.float32)
    order = cp.argsort(x)
    check = verify.agrees(order)
    if impl == "numbakern":
        fn = lambda: nk.argsort(x)  # noqa: E731
    elif impl == "cupy":
        fn = lambda: cp.argsort(x)  # noqa: E731
    else:
        if torch_cuda is None:
            pytest.skip("PyTorch with CUDA is not installed")
        t = torch_cuda.as_tensor(x, device="cuda")
        fn = lambda: torch_cuda.sort(t, stable=True)  # noqa: E731
        check = verify.agrees((x[order], order))
    measure(fn, x.nbytes + 8 * n, check=check, op="argsort", impl=impl, n=n,
            dtype="float32")


@pytest.mark.parametrize("data", ["uniform", "all_equal"])
@pytest.mark.parametrize("impl", ["global_atomic", "shared_privatized", "warp_privatized",
                                  "bincount", "cupy", "torch"])
def test_histogram(measure, cp, torch_cuda, verify, data, impl):
    """2^28 int32 into 256 bins. The strategies time ``histogram_counts`` (values outside
    [0, 256) dropped: one pass); ``bincount`` times ``numbakern.bincount``, the call
    like CuPy's and torch's ``bincount``, which first find the largest value (and
    check for negatives): the like-for-like figure."""
    n, bins = 1 << 28, 256
    x = cp.random.RandomState(0).randint(0, bins, n, dtype=cp.int32) if data == "uniform" else \
        cp.full(n, 7, dtype=cp.int32)
    if impl == "bincount":
        fn = lambda: nk.bincount(x, minlength=bins)  # noqa: E731
    elif impl == "cupy":
        fn = lambda: cp.bincount(x, minlength=bins)  # noqa: E731
    elif impl == "torch":
        if torch_cuda is None:
            pytest.skip("PyTorch with CUDA is not installed")
        t = torch_cuda.as_tensor(x, device="cuda")
        fn = lambda: torch_cuda.bincount(t, minlength=bins)  # noqa: E731
    else:
        fn = lambda: nk.histogram_counts(x, bins, strategy=impl)  # noqa: E731
    measure(fn, x.nbytes, check=verify.agrees(cp.bincount(x, minlength=bins)),
            op="histogram", impl=impl, n=n, data=data)


@pytest.mark.parametrize("impl", ["numbakern", "torch", "cupy"])
def test_float_histogram(measure, cp, torch_cuda, verify, impl):
    """float32 2^28 uniform on [0, 1) into 100 bins on [0, 1]: ``numbakern.histogram``
    (NumPy's bins, bit for bit) beside ``torch.histc`` and ``cupy.histogram``."""
    n, bins = 1 << 28, 100
    x = cp.random.RandomState(0).random_sample(n, dtype=cp.float32)
    edges = cp.asarray(np.histogram_bin_edges(np.zeros(0, np.float32), bins, range=(0, 1)))
    check = _histogram_check(verify, _numpy_counts(cp, x, edges), edges, impl, n)
    if impl == "numbakern":
        fn = lambda: nk.histogram(x, bins, range=(0, 1))  # noqa: E731
    elif impl == "cupy":
        fn = lambda: cp.histogram(x, bins, range=(0, 1))  # noqa: E731
    else:
        if torch_cuda is None:
            pytest.skip("PyTorch with CUDA is not installed")
        t = torch_cuda.as_tensor(x, device="cuda")
        fn = lambda: torch_cuda.histc(t, bins=bins, min=0, max=1)  # noqa: E731
    measure(fn, x.nbytes, check=check, op="float_histogram", impl=impl, n=n,
            dtype="float32", bins=bins)


@pytest.mark.parametrize("impl", ["numbakern", "cupy", "torch"])
def test_edges_histogram(measure, cp, torch_cuda, verify, impl):
    """float32 2^28 standard normal between 101 uneven edges (denser near 0):
    ``numbakern.histogram(x, edges)`` (a binary search a value) beside
    ``cupy.histogram(x, edges)`` and torch's ``bucketize`` + ``bincount`` idiom
    (``torch.histogram`` runs on the CPU only)."""
    n = 1 << 28
    x = cp.random.RandomState(0).standard_normal(n, dtype=cp.float32)
    half = np.geomspace(1e-3, 5.0, 50)  # (CuPy has no geomspace)
    edges = cp.asarray(np.concatenate([-half[::-1], np.zeros(1), half]))
    counts = _numpy_counts(cp, x, edges)
    check = _histogram_check(verify, counts, edges, impl, n)
    if impl == "numbakern":
        fn = lambda: nk.histogram(x, edges)  # noqa: E731
    elif impl == "cupy":
        fn = lambda: cp.histogram(x, edges)  # noqa: E731
    else:
        if torch_cuda is None:
            pytest.skip("PyTorch with CUDA is not installed")
        t = torch_cuda.as_tensor(x, device="cuda")
        e = torch_cuda.as_tensor(edges, device="cuda")

        def fn():  # (its right edge open, and every value outside counted at the ends)
            return torch_cuda.bincount(torch_cuda.bucketize(t, e, right=True),
                                       minlength=e.numel() + 1)

        outside = cp.stack([(x < edges[0]).sum(), (x >= edges[-1]).sum()])
        check = verify.agrees(cp.concatenate([outside[:1], counts, outside[1:]]), atol=1e-6 * n)
    measure(fn, x.nbytes, check=check, op="edges_histogram", impl=impl, n=n, dtype="float32",
            bins=int(edges.size) - 1)
