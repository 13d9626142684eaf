"""Scans: cumsum over every scan strategy beside cupy.cumsum and torch.cumsum, same run.

GB/s count one read of the input and one write of the output (int32 in, int64 out:
12 bytes an element, for every provider, as all three follow NumPy's promotion);
reduce-then-scan's second read is not counted, so its figure shows what it costs.
The ceiling is the copy bandwidth measured in the same session. Target (issue 6):
``decoupled_lookback`` at 2**28 float32 reaches 3 TB/s.

    pytest bench/bench_scans.py --benchmark-json=scans.json

Each result is checked before timing against the scan in float64 (int64 for int32,
the result's dtype too):
the float inputs of the cumsums are small integers (``small_integers``; a scan's speed
does not depend on the values), so every prefix is exact in any order and each cumsum
must equal the reference. cumprod's factors near 1 cannot be exact: float32 prefixes
drift from the float64 ones as rounding compounds along the scan (CuPy's and torch's
by 1% or more at 2**28, measured), as far as a lost or doubled tile would move them,
so each output is held to the one before times its factor (within 1e-4: a scan's
rounding between neighbours is a few ulps, a lost tile a jump by its product) and the
whole within 50% of the float64 scan (``checks.running_product_check``).
"""

import pytest

import numbakern as nk

SIZES = [1 << 20, 1 << 24, 1 << 28]
DTYPES = ["float32", "int32"]
ROWS = (32768, 4096)


def _ids(value):
    if isinstance(value, tuple):
        return f"{value[0]}x{value[1]}"
    return f"2^{value.bit_length() - 1}"


@pytest.fixture(scope="module", params=[(n, d) for d in DTYPES for n in SIZES] +
                [(ROWS, "float32")], ids=lambda p: f"{p[1]}-{_ids(p[0])}")
def data(request, cp, small_integers):
    shape, dtype = request.param
    if dtype == "int32":
        return cp.random.RandomState(0).randint(-1000, 1000, shape, dtype=cp.int32)
    return small_integers(shape)


def _exact(verify, cp, x, axis=None):
    """The check of a cumsum: equal to the float64 one (of integers: the int64 one, in
    int64, NumPy's promotion, which the GB/s count)."""
    integers = x.dtype.kind == "i"
    wide = cp.int64 if integers else cp.float64
    return verify.agrees(cp.cumsum(x, axis=axis, dtype=wide), same_dtype=integers)


@pytest.fixture(scope="module")
def data_cumsum(data, cp, verify):
    return _exact(verify, cp, data, -1 if data.ndim == 2 else None)


def _traffic(x, out) -> int:
    return x.nbytes + out.nbytes


def _info(x, provider):
    return dict(provider=provider, shape=list(x.shape), dtype=str(x.dtype))


@pytest.mark.parametrize("strategy", nk.strategies.available_scans())
def test_numbakern_cumsum(data, strategy, measure, data_cumsum):
    axis = -1 if data.ndim == 2 else None
    out = nk.cumsum(data, axis=axis, strategy=strategy)
    measure(lambda: nk.cumsum(data, axis=axis, strategy=strategy), _traffic(data, out),
            check=data_cumsum, **_info(data, strategy))


def test_cupy_cumsum(data, measure, data_cumsum):
    axis = -1 if data.ndim == 2 else None
    out = data.cumsum(axis=axis)
    measure(lambda: data.cumsum(axis=axis), _traffic(data, out), check=data_cumsum,
            **_info(data, "cupy"))


def test_torch_cumsum(data, measure, torch_cuda, data_cumsum):
    if torch_cuda is None:
        pytest.skip("torch with CUDA not installed")
    t = torch_cuda.as_tensor(data, device="cuda")
    t = t if data.ndim == 2 else t.reshape(-1)
    out = torch_cuda.cumsum(t, dim=-1)
    nbytes = t.nbytes + out.element_size() * out.nelement()
    measure(lambda: torch_cuda.cumsum(t, dim=-1), nbytes, check=data_cumsum,
            **_info(data, "torch"))


@pytest.fixture(scope="module")
def big(small_integers):
    return small_integers(1 << 28)


@pytest.fixture(scope="module")
def big_cumsum(big, cp, verify):
    return _exact(verify, cp, big)


@pytest.mark.parametrize("hold", ["shared", "registers"])
@pytest.mark.parametrize("threads", [128, 256, 512])
@pytest.mark.parametrize("items", [8, 12, 16, 24])
def test_lookback_tuning(big, measure, threads, items, hold, big_cumsum):
    """Decoupled look-back at 2**28 float32 over block size, items per thread and where
    item prefixes wait: the figures that choose ``auto_items`` and the defaults."""
    if threads * items * 4 > 44 * 1024:
        pytest.skip("the tile does not fit in 48 KiB of shared memory")
    x = big
    strategy = nk.DecoupledLookback(nk.WarpShuffle(threads), items=items, hold=hold)
    measure(lambda: nk.cumsum(x, strategy=strategy), 2 * x.nbytes, check=big_cumsum,
            **_info(x, f"decoupled_lookback/warp_shuffle t{threads} i{items} {hold}"))


@pytest.fixture(scope="module", params=["float64", "int32"])
def wide(request, cp, small_integers):
    """The 8-byte states' scans: float64 2**27 (as many bytes as 2**28 float32; small
    integers) and int32 2**28 summed in int64 (NumPy's promotion)."""
    if request.param == "int32":
        return cp.random.RandomState(0).randint(-1000, 1000, 1 << 28, dtype=cp.int32)
    return small_integers(1 << 27, "float64")


@pytest.fixture(scope="module")
def wide_cumsum(wide, cp, verify):
    return _exact(verify, cp, wide)


@pytest.mark.parametrize("items", [None, 4, 8, 12, 16])
def test_lookback_tuning_8_byte_states(wide, measure, items, wide_cumsum):
    """Items per thread for the 8-byte states, which run at 75% of the copy rate where
    float32 runs at 92% (bench/NOTES.md, 2026-12-04): fewer items mean fewer registers
    and less shared memory (more blocks a multiprocessor), and twice the tiles to
    look back over (``None``: ``auto_items``'s choice; ``bench/scan_sass.py --items``
    gives each variant's registers without a GPU)."""
    strategy = nk.DecoupledLookback(items=items)
    out = nk.cumsum(wide, strategy=strategy)
    measure(lambda: nk.cumsum(wide, strategy=strategy), _traffic(wide, out), check=wide_cumsum,
            **_info(wide, f"decoupled_lookback/warp_shuffle i{items or 'auto'}"))


@pytest.fixture(scope="module")
def products(cp):
    """2**28 float32 factors near 1 (their running product stays in range)."""
    return cp.random.RandomState(0).uniform(0.999, 1.001, 1 << 28, dtype=cp.float32)


@pytest.fixture(scope="module")
def running_product(products, cp, verify):
    """The check of a cumprod: each step its factor, the whole near the float64 one
    (module doc)."""
    return verify.running_product(products, cp.cumprod(products, dtype=cp.float64))


def test_numbakern_cumprod(products, measure, running_product):
    out = nk.cumprod(products)
    measure(lambda: nk.cumprod(products), _traffic(products, out), check=running_product,
            **_info(products, "numbakern"))


def test_cupy_cumprod(products, measure, running_product):
    out = products.cumprod()
    measure(lambda: products.cumprod(), _traffic(products, out), check=running_product,
            **_info(products, "cupy"))


def test_torch_cumprod(products, measure, torch_cuda, running_product):
    if torch_cuda is None:
        pytest.skip("torch with CUDA not installed")
    t = torch_cuda.as_tensor(products, device="cuda")
    measure(lambda: torch_cuda.cumprod(t, dim=0), t.nbytes * 2, check=running_product,
            **_info(products, "torch"))
