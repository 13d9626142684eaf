"""Sort and histogram benchmarks beside CuPy and PyTorch (GPU only).

Run: ``pytest bench/bench_sort.py --benchmark-json=sort.json``. GB/s count the keys
read once and written once (sort), or the values read once (histograms). The float
histogram beside ``torch.histc``: ``pytest bench/bench_sort.py -k float_histogram``.
"""

import numpy as np
import pytest

import numbakern as nk

SIZES = [1 << 24, 1 << 28]


@pytest.mark.parametrize("n", SIZES, ids=lambda n: f"2^{n.bit_length() - 1}")
@pytest.mark.parametrize("dtype", ["float32", "uint32"])
@pytest.mark.parametrize("impl", ["numbakern", "cupy", "torch"])
def test_sort(measure, cp, torch_cuda, n, dtype, impl):
    x = cp.random.randint(0, 2**31, n, dtype=cp.int64).astype(dtype)
    if dtype == "float32":
        x = cp.random.standard_normal(n, dtype=cp.float32)
    if impl == "numbakern":
        fn = lambda: nk.sort(x)  # noqa: E731
    elif impl == "cupy":
        fn = lambda: cp.sort(x)  # noqa: E731
    else:
        if torch_cuda is None:
            pytest.skip("PyTorch with CUDA is not installed")
        t = torch_cuda.as_tensor(x.astype("int64") if dtype == "uint32" else x, device="cuda")
        fn = lambda: torch_cuda.sort(t)  # noqa: E731
    measure(fn, 2 * x.nbytes, op="sort", impl=impl, n=n, dtype=dtype)


@pytest.mark.parametrize("impl", ["numbakern", "cupy", "torch"])
def test_argsort(measure, cp, torch_cuda, impl):
    """Indices (torch: values and indices, its sort's one form). GB/s: keys read once,
    int64 indices written once."""
    n = 1 << 28
    x = cp.random.standard_normal(n, dtype=cp.float32)
    if impl == "numbakern":
        fn = lambda: nk.argsort(x)  # noqa: E731
    elif impl == "cupy":
        fn = lambda: cp.argsort(x)  # noqa: E731
    else:
        if torch_cuda is None:
            pytest.skip("PyTorch with CUDA is not installed")
        t = torch_cuda.as_tensor(x, device="cuda")
        fn = lambda: torch_cuda.sort(t, stable=True)  # noqa: E731
    measure(fn, x.nbytes + 8 * n, op="argsort", impl=impl, n=n, dtype="float32")


@pytest.mark.parametrize("data", ["uniform", "all_equal"])
@pytest.mark.parametrize("impl", ["global_atomic", "shared_privatized", "warp_privatized",
                                  "bincount", "cupy", "torch"])
def test_histogram(measure, cp, torch_cuda, data, impl):
    """2^28 int32 into 256 bins. The strategies time ``histogram_counts`` (values outside
    [0, 256) dropped: one pass); ``bincount`` times ``numbakern.bincount``, the call
    like CuPy's and torch's ``bincount``, which first find the largest value (and
    check for negatives): the like-for-like figure."""
    n, bins = 1 << 28, 256
    x = cp.random.randint(0, bins, n, dtype=cp.int32) if data == "uniform" else \
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
    measure(fn, x.nbytes, op="histogram", impl=impl, n=n, data=data)


@pytest.mark.parametrize("impl", ["numbakern", "torch", "cupy"])
def test_float_histogram(measure, cp, torch_cuda, impl):
    """float32 2^28 uniform on [0, 1) into 100 bins on [0, 1]: ``numbakern.histogram``
    (NumPy's bins, bit for bit) beside ``torch.histc`` and ``cupy.histogram``."""
    n, bins = 1 << 28, 100
    x = cp.random.random(n, dtype=cp.float32)
    if impl == "numbakern":
        fn = lambda: nk.histogram(x, bins, range=(0, 1))  # noqa: E731
    elif impl == "cupy":
        fn = lambda: cp.histogram(x, bins, range=(0, 1))  # noqa: E731
    else:
        if torch_cuda is None:
            pytest.skip("PyTorch with CUDA is not installed")
        t = torch_cuda.as_tensor(x, device="cuda")
        fn = lambda: torch_cuda.histc(t, bins=bins, min=0, max=1)  # noqa: E731
    measure(fn, x.nbytes, op="float_histogram", impl=impl, n=n, dtype="float32", bins=bins)


@pytest.mark.parametrize("impl", ["numbakern", "cupy", "torch"])
def test_edges_histogram(measure, cp, torch_cuda, impl):
    """float32 2^28 standard normal between 101 uneven edges (denser near 0):
    ``numbakern.histogram(x, edges)`` (a binary search a value) beside
    ``cupy.histogram(x, edges)`` and torch's ``bucketize`` + ``bincount`` idiom
    (``torch.histogram`` runs on the CPU only)."""
    n = 1 << 28
    x = cp.random.standard_normal(n, dtype=cp.float32)
    half = np.geomspace(1e-3, 5.0, 50)  # (CuPy has no geomspace)
    edges = cp.asarray(np.concatenate([-half[::-1], np.zeros(1), half]))
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

    measure(fn, x.nbytes, op="edges_histogram", impl=impl, n=n, dtype="float32",
            bins=int(edges.size) - 1)
