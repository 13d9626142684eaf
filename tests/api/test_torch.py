"""PyTorch tensors, DLPack producers and bfloat16 (numbakern/api/_interop.py).

Under the simulator: CPU tensors through every public array function, the result's
type asserted and its values compared with the same call on the tensor's NumPy view
(which the NumPy tests hold to NumPy), and against torch's own op where torch has
one; bfloat16 (torch and ``ml_dtypes``) against a float64 reference rounded to
bfloat16; ``out=`` tensors; requires_grad; refused dtypes. The ``gpu`` tests run
CUDA tensors of float32, float16 and bfloat16, with and without CuPy, on a
non-default stream behind queued torch work.
"""

import subprocess
import sys
import warnings

import numpy as np
import pytest

import numbakern as nk
from numbakern.api import _interop

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)

# Each public array function, the arguments after the array, and the input it takes:
# "f" a float32 (6, 33) array, "i" int32, "b" bool, "p" a probability-like pair (y, dy),
# "u" small non-negative int32 of 33, "v" float32 of 70.
CALLS = {
    "sum": ("f", (), {"axis": 1}), "mean": ("f", (), {}), "prod": ("f", (), {"axis": 0}),
    "max": ("f", (), {}), "min": ("f", (), {"axis": 1}), "xor_sum": ("i", (), {}),
    "bitwise_and_sum": ("i", (), {"axis": 0}), "bitwise_or_sum": ("i", (), {}),
    "reduce": ("f", ("sum",), {"axis": 1}), "any": ("b", (), {}), "all": ("b", (), {"axis": 1}),
    "count_nonzero": ("f", (), {"axis": 0}), "nansum": ("f", (), {}),
    "nanprod": ("f", (), {"axis": 1}), "argmax": ("f", (), {"axis": 1}),
    "average": ("f", (1, np.arange(1.0, 34.0)), {"returned": True}),
    "argmin": ("f", (), {}), "max_with_indices": ("f", (), {"axis": 1}),
    "min_with_indices": ("f", (), {"axis": 0}), "logsumexp": ("f", (), {"axis": 1}),
    "vector_norm": ("f", (), {"axis": 1, "ord": 3}),
    "ptp": ("f", (), {}), "nanargmax": ("f", (), {"axis": 0}), "nanargmin": ("f", (), {}),
    "nanmax": ("f", (), {"axis": 1}), "nanmin": ("f", (), {}), "nanmean": ("f", (), {"axis": 1}),
    "var": ("f", (), {"axis": 1}), "std": ("f", (), {"ddof": 1}),
    "nanvar": ("f", (), {"axis": 0}), "nanstd": ("f", (), {}),
    "cumsum": ("f", (), {"axis": 1}), "cumprod": ("f", (), {"axis": 0}),
    "cumulative_sum": ("f", (), {"axis": 1, "include_initial": True}),
    "cumulative_prod": ("f", (), {"axis": 0}),
    "associative_scan": ("f", ("max",), {"axis": 1}), "nancumsum": ("f", (), {}),
    "nancumprod": ("f", (), {"axis": 1}), "cummax": ("f", (), {"axis": 1}),
    "cummin": ("f", (), {"axis": 0}), "logcumsumexp": ("f", (), {"axis": 1}),
    "softmax": ("f", (), {}), "log_softmax": ("f", (), {"axis": 0}),
    "softmax_backward": ("p", (), {}), "log_softmax_backward": ("p", (), {"axis": 0}),
    "sort": ("f", (), {}), "argsort": ("f", (), {"axis": 0}),
    "topk": ("f", (5,), {"axis": 1}),
    "partition": ("f", (3,), {"axis": 1}), "argpartition": ("f", ([1, -1],), {}),
    "median": ("f", (), {"axis": 1}), "nanmedian": ("f", (), {}),
    "quantile": ("f", ([0.25, 0.5],), {"axis": 0}), "nanquantile": ("f", (0.3,), {"axis": 1}),
    "percentile": ("f", (40,), {}), "nanpercentile": ("f", ([10, 90],), {"axis": 1}),
    "histogram_counts": ("u", (8,), {}), "bincount": ("u", (), {}),
    "histogram": ("f", (), {"bins": 5}),
    "segmented_reduce": ("v", (np.array([0, 3, 3, 40, 70]),), {}),
    "segmented_argmax": ("v", (np.array([0, 3, 40, 70]),), {}),
    "segmented_argmin": ("v", (np.array([0, 1, 70]),), {}),
    "segmented_scan": ("v", (np.array([0, 3, 3, 40, 70]),), {"exclusive": True}),
    "scan_by_key": ("v", (np.arange(70.0),), {"op": "max"}),
    "segmented_sort": ("v", (np.array([0, 3, 40, 70]), np.arange(70.0)), {}),
    "cross_entropy": ("f", (np.array([0, 5, 32, -100, 7, 1]),), {"return_grad": True}),
}
SHAPE = (6, 33)


def _input(kind):
    if kind == "f":
        return RNG.standard_normal(SHAPE).astype(np.float32)
    if kind == "i":
        return RNG.integers(-50, 50, SHAPE).astype(np.int32)
    if kind == "u":
        return RNG.integers(0, 8, SHAPE[1]).astype(np.int32)
    if kind == "v":
        return RNG.standard_normal(70).astype(np.float32)
    return RNG.random(SHAPE) < 0.9


def _leaves(r):
    return [v for item in r for v in _leaves(item)] if isinstance(r, tuple) else [r]


def test_every_public_array_function_is_covered():
    """The table is checked against the package: a new public function needs a row."""
    arrays = {name for name in nk.__all__ if callable(getattr(nk, name))
              and getattr(getattr(nk, name), "__module__", "").startswith("numbakern.api")}
    assert arrays == set(CALLS)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_cpu_tensor_in_tensor_out(name):
    kind, args, kwargs = CALLS[name]
    fn = getattr(nk, name)
    if kind == "p":
        y = np.asarray(nk.softmax(_input("f")))
        arrays = (y, _input("f"))
    else:
        arrays = (_input(kind),)
    expected = fn(*arrays, *args, **kwargs)
    got = fn(*(torch.from_numpy(a) for a in arrays), *args, **kwargs)
    assert isinstance(got, tuple) == isinstance(expected, tuple)
    for g, e in zip(_leaves(got), _leaves(expected)):
        assert isinstance(g, torch.Tensor) and g.device.type == "cpu"
        e = np.asarray(e)
        assert g.numpy().dtype == e.dtype and tuple(g.shape) == e.shape
        np.testing.assert_array_equal(g.numpy(), e)


def test_results_agree_with_torch_itself():
    x = torch.from_numpy(_input("f"))
    torch.testing.assert_close(nk.softmax(x, axis=1), torch.softmax(x, dim=1))
    torch.testing.assert_close(nk.log_softmax(x, axis=0), torch.log_softmax(x, dim=0))
    torch.testing.assert_close(nk.cumsum(x, axis=1), torch.cumsum(x, dim=1))
    torch.testing.assert_close(nk.logsumexp(x, axis=1), torch.logsumexp(x, dim=1))
    torch.testing.assert_close(nk.sort(x, axis=1), torch.sort(x, dim=1).values)
    ours, theirs = nk.topk(x, 4, axis=0, largest=False), torch.topk(x, 4, dim=0, largest=False)
    assert torch.equal(ours.values, theirs.values) and torch.equal(ours.indices, theirs.indices)
    assert torch.equal(nk.argmax(x, axis=1), torch.argmax(x, dim=1))
    ours, ref = nk.cummax(x, axis=1), torch.cummax(x, dim=1)
    assert ours._fields == ("values", "indices")  # named, as torch.return_types
    assert torch.equal(ours.values, ref.values) and torch.equal(ours.indices, ref.indices)
    ours, ref = nk.cummin(x, axis=0), torch.cummin(x, dim=0)
    assert torch.equal(ours.values, ref.values) and torch.equal(ours.indices, ref.indices)


@pytest.mark.parametrize("n", [1, 31, 32, 33, 129])
def test_strided_tensors_are_read_in_place(n):
    base = torch.from_numpy(RNG.standard_normal((4, 2 * n)).astype(np.float32))
    for view in (base[:, ::2], base.T, base[1:, 1:]):
        with warnings.catch_warnings():
            warnings.simplefilter("error", nk.CopyWarning)
            got = nk.sum(view, axis=-1)
        np.testing.assert_allclose(got.numpy(), view.numpy().astype(np.float64).sum(-1),
                                   rtol=1e-5, atol=1e-5)


def test_a_tensor_that_requires_grad_gives_the_detached_answer():
    x = torch.from_numpy(_input("f")).requires_grad_(True)
    got = nk.softmax(x)
    assert not got.requires_grad
    assert torch.equal(got, nk.softmax(x.detach()))
    assert torch.equal(nk.sum(x), nk.sum(x.detach()))


def test_a_negated_view_is_copied_with_a_warning_and_refused_as_out():
    """``z.conj().imag`` is a float view whose memory holds the negatives of its
    values (torch's is_neg()): read as memory, every answer's sign would be wrong."""
    z = torch.complex(torch.tensor([1.0, 3.0, -2.0]), torch.tensor([2.0, 4.0, 0.5]))
    neg = z.conj().imag
    assert neg.is_neg()
    with pytest.warns(nk.CopyWarning, match="negated view"):
        assert nk.sum(neg).item() == -6.5
    with pytest.warns(nk.CopyWarning, match="negated view"):
        assert nk.cumsum(neg).tolist() == [-2.0, -6.0, -6.5]
    with pytest.raises(ValueError, match="out is a negated view"):
        nk.cumsum(torch.ones(3), out=torch.complex(torch.ones(3), torch.ones(3)).conj().imag)


def test_out_tensor_is_written_and_returned():
    x = torch.from_numpy(_input("f"))
    out = torch.empty(SHAPE[0], dtype=torch.float64)
    assert nk.sum(x, axis=1, out=out) is out
    # a float32 sum of 33 values (cast into the float64 out): rounding of the order of
    # 33 float32 ulps of the largest value, absolute, whatever the sum's size
    np.testing.assert_allclose(out.numpy(), x.numpy().astype(np.float64).sum(1), rtol=1e-6,
                               atol=33 * np.finfo(np.float32).eps * np.abs(x.numpy()).max())
    out = torch.empty(SHAPE, dtype=torch.float32)
    assert nk.softmax(x, out=out) is out
    torch.testing.assert_close(out, torch.softmax(x, dim=-1))


def test_full_reductions_are_zero_dim_tensors():
    x = torch.arange(10, dtype=torch.int32)
    got = nk.sum(x)
    assert isinstance(got, torch.Tensor) and got.shape == () and got.dtype == torch.int64
    assert got.item() == 45
    assert nk.count_nonzero(x).item() == 9


@pytest.mark.parametrize("dtype", ["complex64", "float8_e4m3fn", "float8_e5m2"])
def test_dtypes_numbakern_cannot_take_are_refused(dtype):
    if not hasattr(torch, dtype):
        pytest.skip(f"torch has no {dtype}")
    x = torch.zeros(4).to(getattr(torch, dtype))
    with pytest.raises(TypeError, match=r"sum: x has torch dtype .*float16, bfloat16"):
        nk.sum(x)


def test_bool_softmax_is_refused_naming_the_argument():
    with pytest.raises(TypeError, match="float16, float32 or float64"):
        nk.softmax(torch.ones(3, dtype=torch.bool))


@pytest.mark.parametrize("layout", ["to_sparse", "to_sparse_csr"])
def test_sparse_tensors_are_refused_naming_the_argument(layout):
    x = getattr(torch.eye(3), layout)()
    with pytest.raises(TypeError, match=r"softmax: x is a torch.sparse_\w+ tensor; .*"
                                        r"pass x.to_dense\(\)"):
        nk.softmax(x)
    with pytest.raises(TypeError, match=r"sum: x is a torch.sparse_\w+ tensor"):
        nk.sum(x)


def test_a_nested_tensor_is_refused_naming_the_argument():
    """Found by a fresh-user trial: torch's own RuntimeError from inside the
    translation ("NestedTensorImpl doesn't support sizes")."""
    x = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
    with pytest.raises(TypeError, match=r"sum: x is a nested tensor; .*x.unbind\(\)"):
        nk.sum(x)


def test_other_devices_are_refused():
    meta = torch.empty(4, device="meta")
    with pytest.raises(ValueError, match="device meta"):
        nk.sum(meta)


# --- bfloat16 ----------------------------------------------------------------------

BF16_RTOL = 2.0 ** -7  # one bfloat16 ulp of rounding after a float32 computation


BF16_CASES = {
    "sum": (lambda x: nk.sum(x, axis=1), lambda a: a.sum(1)),
    "mean": (lambda x: nk.mean(x), lambda a: a.mean()),
    "max": (lambda x: nk.max(x, axis=0), lambda a: a.max(0)),
    "cumsum": (lambda x: nk.cumsum(x, axis=1), lambda a: a.cumsum(1)),
    "softmax": (lambda x: nk.softmax(x), lambda a: np.exp(a - a.max(-1, keepdims=True))
                / np.exp(a - a.max(-1, keepdims=True)).sum(-1, keepdims=True)),
    "log_softmax": (lambda x: nk.log_softmax(x, axis=0),
                    lambda a: (a - a.max(0)) - np.log(np.exp(a - a.max(0)).sum(0))),
    "sort": (lambda x: nk.sort(x, axis=1), lambda a: np.sort(a, axis=1)),
    "argmax": (lambda x: nk.argmax(x, axis=1), lambda a: np.argmax(a, axis=1)),
    "var": (lambda x: nk.var(x, axis=0), lambda a: a.var(0)),
    "logcumsumexp": (lambda x: nk.logcumsumexp(x, axis=1),
                     lambda a: np.logaddexp.accumulate(a, axis=1)),
    "topk": (lambda x: nk.topk(x, 3, axis=1).values, lambda a: -np.sort(-a, axis=1)[:, :3]),
    "median": (lambda x: nk.median(x, axis=1), lambda a: np.median(a, axis=1)),
}


def _bf16_torch(a):
    return torch.from_numpy(a).to(torch.bfloat16)


def test_a_bfloat16_input_refused_is_an_error_without_a_copy_warning():
    """bincount counts ints: the float32 read of a bfloat16 x is refused, and no
    CopyWarning tells of the copy the refused call made."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", nk.CopyWarning)
        with pytest.raises(TypeError, match="x has dtype bfloat16, computed as float32"):
            nk.bincount(_bf16_torch(np.array([2.5, 1.0], np.float32)))


@pytest.mark.parametrize("name", sorted(BF16_CASES))
@pytest.mark.parametrize("library", ["torch", "ml_dtypes"])
def test_bfloat16_in_bfloat16_out(name, library):
    run, reference = BF16_CASES[name]
    a = RNG.standard_normal((5, 40)).astype(np.float32)
    if library == "torch":
        x = _bf16_torch(a)
        x64 = x.double().numpy()
    else:
        ml_dtypes = pytest.importorskip("ml_dtypes")
        x = a.astype(ml_dtypes.bfloat16)
        x64 = x.astype(np.float64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", nk.CopyWarning)
        got = run(x)
    copied = [w for w in caught if issubclass(w.category, nk.CopyWarning)]
    if name in _interop.NATIVE_BFLOAT16 | _interop.WIDENED_BFLOAT16:  # read in place
        assert not copied
    else:
        assert copied and "bfloat16" in str(copied[0].message)
    want = (torch.int64 if library == "torch" else np.int64) if name == "argmax" else \
        (torch.bfloat16 if library == "torch" else x.dtype)
    if library == "torch":
        assert isinstance(got, torch.Tensor) and got.dtype == want
        got64 = got.double().numpy()
    else:
        assert isinstance(got, (np.ndarray, np.generic)) and got.dtype == want
        got64 = np.asarray(got).astype(np.float64)
    expected = reference(x64)
    np.testing.assert_allclose(got64, expected, rtol=BF16_RTOL, atol=BF16_RTOL * 1e-2)


def test_bfloat16_indices_and_explicit_dtype():
    x = _bf16_torch(RNG.standard_normal((3, 50)).astype(np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nk.CopyWarning)
        assert torch.equal(nk.argmax(x, axis=1), torch.argmax(x, dim=1))
        assert torch.equal(nk.argsort(x[0]), torch.sort(x[0], stable=True).indices)
        wide = nk.sum(x, axis=1, dtype=np.float32)
        assert wide.dtype == torch.float32
        np.testing.assert_allclose(wide.numpy(), x.double().sum(1).numpy(), rtol=1e-5)


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_a_result_rounds_to_bfloat16_only_from_the_argument_it_follows(library):
    """segmented_sort's keys and values and scan_by_key's sums take the dtype of the
    argument each follows: a float32 one stays float32 beside a bfloat16 other."""
    bf16 = pytest.importorskip("ml_dtypes").bfloat16 if library == "numpy" else \
        torch.bfloat16

    def arr(values, dtype):
        a = np.array(values, np.float32)
        if library == "numpy":
            return a if dtype is None else a.astype(dtype)
        t = torch.from_numpy(a)
        return t if dtype is None else t.to(dtype)

    def dtype_of(r):
        return r.dtype if library == "torch" else np.dtype(r.dtype)

    offsets = np.array([0, 3])
    offsets = offsets if library == "numpy" else torch.from_numpy(offsets)
    f32 = torch.float32 if library == "torch" else np.dtype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nk.CopyWarning)
        keys, values = nk.segmented_sort(arr([3.1, 1.1, 2.1], None), offsets,
                                         arr([1, 2, 3], bf16))
        assert dtype_of(keys) == f32 and np.allclose(np.asarray(keys), [1.1, 2.1, 3.1])
        assert dtype_of(values) == bf16
        keys, values = nk.segmented_sort(arr([3.1, 1.1, 2.1], bf16), offsets,
                                         arr([1.1, 2.2, 3.3], None))
        assert dtype_of(keys) == bf16 and dtype_of(values) == f32
        assert np.array_equal(np.asarray(values), np.float32([2.2, 3.3, 1.1]))
        sums = nk.scan_by_key(arr([1, 1, 2], bf16), arr([1.1, 2.2, 3.3], None))
        assert dtype_of(sums) == f32
        np.testing.assert_allclose(np.asarray(sums), [1.1, 3.3, 3.3], rtol=1e-6)
        assert dtype_of(nk.scan_by_key(arr([1, 1, 2], None), arr([1, 2, 3], bf16))) == bf16


def test_a_torch_bfloat16_beside_a_numpy_first_argument_gives_numpys_bfloat16():
    """Results take the first argument's type: NumPy keys with torch bfloat16 values
    give NumPy results of ml_dtypes' bfloat16, as ml_dtypes values would."""
    bf16 = pytest.importorskip("ml_dtypes").bfloat16
    v = torch.tensor([1.0, 2.0, 3.0], dtype=torch.bfloat16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nk.CopyWarning)
        sums = nk.scan_by_key(np.array([7, 7, 2]), v)
        keys, values = nk.segmented_sort(np.array([3, 1, 2]), np.array([0, 3]), v)
    assert isinstance(sums, np.ndarray) and sums.dtype == bf16
    np.testing.assert_array_equal(sums.astype(np.float32), [1, 3, 3])
    assert isinstance(values, np.ndarray) and values.dtype == bf16
    np.testing.assert_array_equal(values.astype(np.float32), [2, 3, 1])
    np.testing.assert_array_equal(keys, [1, 2, 3])


def test_quantiles_and_given_means_take_numpys_result_type_with_bfloat16():
    """NumPy's result_type of x and q (of x and mean=): bfloat16 only where nothing
    wider (a float32 array or NumPy scalar, a float16 x) takes part; a Python float is
    weak."""
    bf16 = pytest.importorskip("ml_dtypes").bfloat16
    x = np.array([0.1, 0.5, 0.9, 0.3], np.float32)
    cases = [(x.astype(bf16), np.array([0.5], np.float32)), (x.astype(bf16), 0.5),
             (x.astype(bf16), np.float32(0.25)), (x.astype(np.float16), bf16(0.5)),
             (x.astype(bf16), bf16(0.5)), (x, np.array([0.5]).astype(bf16))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nk.CopyWarning)
        for a, q in cases:
            for fn in ("quantile", "nanpercentile"):
                q_of = q * 100 if fn == "nanpercentile" and np.ndim(q) else q
                got, want = getattr(nk, fn)(a, q_of), getattr(np, fn)(a, q_of)
                assert got.dtype == want.dtype, (fn, a.dtype, q, got.dtype, want.dtype)
            for mean in (np.array([0.45], np.float32), 0.45, np.array([0.45]).astype(bf16)):
                got, want = nk.var(a, mean=mean), np.var(a, mean=mean)
                assert got.dtype == want.dtype, (a.dtype, mean, got.dtype, want.dtype)
                np.testing.assert_allclose(np.float64(got), np.float64(want), rtol=1e-2)


@pytest.mark.parametrize("fn", ["nanquantile", "nanpercentile"])
def test_nan_quantiles_of_no_bfloat16_elements_are_bfloat16_whatever_q(fn):
    """NumPy answers them with np.nanmean (NaN of x's dtype, warning), whatever q's
    dtype: bfloat16 for bfloat16 x, NumPy's and torch's; a float32 x stays float32."""
    bf16 = pytest.importorskip("ml_dtypes").bfloat16
    torch = pytest.importorskip("torch")
    for q in (0.5, np.float32(0.5), np.float64(0.5), np.array([0.25, 0.5], np.float32)):
        q_of = q * 100 if fn == "nanpercentile" else q
        for x in (np.zeros((0, 3), bf16), np.zeros((0, 3), np.float32)):
            with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
                want = getattr(np, fn)(x, q_of, axis=0)
            with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
                got = getattr(nk, fn)(x, q_of, axis=0)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert np.isnan(np.asarray(got, np.float32)).all()
        with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
            got = getattr(nk, fn)(torch.zeros((0, 3), dtype=torch.bfloat16), q_of, axis=0)
        assert got.dtype == torch.bfloat16 and got.shape == (3,)


def test_bfloat16_numbers_are_numbers_and_a_refusal_names_its_argument():
    """A bfloat16 scalar or 0-d array passed as a number (initial=, scale=, q) is that
    number; a bfloat16 array another argument refuses is named as that argument."""
    bf16 = pytest.importorskip("ml_dtypes").bfloat16
    x = np.ones((2, 3), np.float32)
    half = np.array(0.5).astype(bf16)
    np.testing.assert_allclose(nk.softmax(x, scale=half), np.full((2, 3), 1 / 3), rtol=1e-6)
    assert nk.sum(x, initial=np.float32(1.5).astype(bf16)) == 7.5
    assert nk.quantile(np.arange(5.0), half) == 2.0
    assert float(nk.sum(np.float32(2.5).astype(bf16))) == 2.5  # a scalar x: 0-d
    with pytest.raises(TypeError, match="segmented_reduce: offsets has dtype bfloat16"):
        nk.segmented_reduce(x[0], np.array([0, 3]).astype(bf16))


def test_bfloat16_backward_passes():
    logits = torch.from_numpy(RNG.standard_normal((4, 70)).astype(np.float32))
    y, dy = torch.softmax(logits, -1).to(torch.bfloat16), _bf16_torch(
        RNG.standard_normal((4, 70)).astype(np.float32))
    y64, dy64 = y.double(), dy.double()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nk.CopyWarning)
        got = nk.softmax_backward(y, dy)
        got_log = nk.log_softmax_backward(torch.log(y.float()).to(torch.bfloat16), dy)
    assert got.dtype == torch.bfloat16 == got_log.dtype
    ref = y64 * (dy64 - (y64 * dy64).sum(-1, keepdim=True))
    torch.testing.assert_close(got.double(), ref, rtol=2 * BF16_RTOL, atol=1e-2)
    ly = torch.log(y.float()).to(torch.bfloat16).double()
    ref_log = dy64 - torch.exp(ly) * dy64.sum(-1, keepdim=True)
    torch.testing.assert_close(got_log.double(), ref_log, rtol=2 * BF16_RTOL, atol=3e-2)


def test_bfloat16_out_is_rounded_into():
    x = _bf16_torch(RNG.standard_normal((3, 40)).astype(np.float32))
    out = torch.empty(3, dtype=torch.bfloat16)
    with pytest.warns(nk.CopyWarning):
        assert nk.sum(x, axis=1, out=out) is out
    torch.testing.assert_close(out, x.float().sum(1).to(torch.bfloat16))


# --- DLPack, imports ---------------------------------------------------------------


class _DLPackOnly:
    """A producer with the DLPack protocol and nothing else (as JAX's CPU arrays)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_a_dlpack_producer_is_read_through_numpy():
    a = _input("f")
    got = nk.sum(_DLPackOnly(a), axis=1)
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, nk.sum(a, axis=1))


def test_numpy_calls_do_not_import_torch():
    code = ("import sys, numpy as np, numbakern as nk; nk.sum(np.arange(3.0)); "
            "nk.softmax(np.ones((2, 3))); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


# --- CUDA tensors (gpu) ------------------------------------------------------------

GPU_DTYPES = ["float32", "float16", "bfloat16"]


def _cuda(a, dtype):
    return torch.from_numpy(a).to("cuda").to(getattr(torch, dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", GPU_DTYPES)
@pytest.mark.parametrize("name", sorted(CALLS))
def test_cuda_tensors_through_every_function(name, dtype, cupy_or_not):
    kind, args, kwargs = CALLS[name]
    if kind not in "fpv" and dtype != "float32":
        pytest.skip("integer and bool inputs have no half form")
    fn = getattr(nk, name)
    if kind == "p":
        arrays = (np.asarray(nk.softmax(_input("f"))), _input("f"))
    else:
        arrays = (_input(kind),)
    if kind in "fpv":  # the host runs float16 as float16, bfloat16 as the float32 it reads
        tensors = tuple(_cuda(a, dtype) for a in arrays)
        host = tuple((t.float() if dtype == "bfloat16" else t).cpu().numpy() for t in tensors)
        if name == "histogram" and dtype == "bfloat16":  # binned in bfloat16, as NumPy's
            host = tuple(h.astype(pytest.importorskip("ml_dtypes").bfloat16) for h in host)
    else:
        tensors = tuple(torch.from_numpy(a).to("cuda") for a in arrays)
        host = arrays
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nk.CopyWarning)
        got = fn(*tensors, *args, **kwargs)
    expected = fn(*host, *args, **kwargs)
    for g, e in zip(_leaves(got), _leaves(expected)):
        assert isinstance(g, torch.Tensor) and g.device.type == "cuda"
        e = np.asarray(e)
        g = g.cpu()
        if e.dtype.kind == "f" or e.dtype.name == "bfloat16":  # (ml_dtypes': kind "V")
            rtol = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 2 * BF16_RTOL}[dtype]
            np.testing.assert_allclose(g.double().numpy(), e.astype(np.float64), rtol=rtol,
                                       atol=rtol)
        else:
            np.testing.assert_array_equal(g.numpy(), e)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["sum", "mean", "cumsum", "nansum"])
def test_a_bfloat16_dtype_of_a_cuda_tensor_rounds_each_element_first(name, cupy_or_not):
    """torch's cast of the float32 CUDA tensor to bfloat16 first (a copy, warned), then
    float32 arithmetic rounded once: the bits of the same call on the CPU tensor, and
    NaN where torch's sum of the cast elements is NaN."""
    x = torch.randn(3, 700) * 3
    x[1, 5], x[1, 9] = 3.4e38, -3.4e38  # inf and -inf in bfloat16
    with pytest.warns(nk.CopyWarning, match="rounds each element to bfloat16 first"):
        got = getattr(nk, name)(x.cuda(), axis=1, dtype=torch.bfloat16)
    want = getattr(nk, name)(x, axis=1, dtype=torch.bfloat16)
    assert got.is_cuda and got.dtype == want.dtype == torch.bfloat16
    # the same values, NaN where NaN (torch's CPU conversion may set a NaN's sign bit)
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0, equal_nan=True)
    if name != "cumsum":  # (nansum too: inf + -inf is no NaN element to skip)
        assert torch.isnan(got[1]).item()
        assert torch.isnan(torch.sum(x[1].cuda(), dtype=torch.bfloat16)).item()


@pytest.mark.gpu
def test_a_cuda_q_is_read_after_the_work_that_wrote_it(cupy_or_not):
    """q written by a torch op on a side stream, read by the quantile on that stream."""
    x = torch.randn(8, 500, device="cuda")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        q = torch.linspace(0, 1, 5, device="cuda")
        got = nk.quantile(x, q, axis=1)
    side.synchronize()
    torch.testing.assert_close(got, torch.quantile(x, q.to(x.device), dim=1))


@pytest.mark.gpu
def test_a_found_range_and_bincount_length_are_read_on_the_calls_stream(cupy_or_not):
    """histogram's min/max and bincount's max, reduced on torch's side stream, are read
    after those reductions, with or without CuPy."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        x = torch.randn(1 << 20, device="cuda").mul(50)
        counts, edges = nk.histogram(x, bins=16)
        ints = torch.randint(0, 300, (1 << 20,), device="cuda")
        found = nk.bincount(ints)
    side.synchronize()
    want, want_edges = np.histogram(x.cpu().numpy(), bins=16)
    np.testing.assert_array_equal(counts.cpu().numpy(), want)
    np.testing.assert_allclose(edges.cpu().numpy(), want_edges, rtol=1e-6)
    np.testing.assert_array_equal(found.cpu().numpy(), np.bincount(ints.cpu().numpy()))


@pytest.mark.gpu
def test_a_negated_cuda_view_is_never_read_as_its_memory(cupy_or_not):
    """Repeated calls (the tensor table, replay) on ``z.conj().imag`` and on
    ``z.imag``, which share one address, layout and dtype: each keeps its own sign."""
    z = torch.complex(torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda"))
    plain, neg = z.imag, z.conj().imag
    want = z.imag.double().sum().item()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nk.CopyWarning)
        for _ in range(3):
            assert nk.sum(plain).item() == pytest.approx(want, rel=1e-5, abs=1e-3)
            assert nk.sum(neg).item() == pytest.approx(-want, rel=1e-5, abs=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_cuda_tensors_are_read_and_written_in_place(dtype, cupy_or_not):
    x = _cuda(RNG.standard_normal((64, 300)).astype(np.float32), dtype)
    out = torch.empty_like(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", nk.CopyWarning)
        assert nk.softmax(x[:, :257], out=out[:, :257]) is not None
        got = nk.sum(x[::2], axis=1)
    torch.testing.assert_close(out[:, :257], torch.softmax(x[:, :257].float(), -1).to(x.dtype),
                               rtol=2e-3, atol=1e-4)
    torch.testing.assert_close(got.float(), x[::2].float().sum(1), rtol=2e-3, atol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["sum", "mean", "argmax"])
def test_cuda_reductions_write_a_strided_out_in_place(name, cupy_or_not):
    x = _cuda(RNG.standard_normal((3, 5, 300)).astype(np.float32), "float32")
    dtype = torch.int64 if name == "argmax" else torch.float32
    base = torch.zeros(300, 7, dtype=dtype, device="cuda")
    out = base[:, 2:5].T  # (3, 300): transposed and strided (torch has no negative strides)
    assert getattr(nk, name)(x, axis=1, out=out) is out
    want = getattr(torch, name)(x, dim=1)
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
    assert base[:, :2].abs().sum() == 0 and base[:, 5:].abs().sum() == 0


@pytest.mark.gpu
def test_cuda_calls_follow_queued_work_on_a_side_stream(cupy_or_not):
    n = 1 << 22
    x = torch.zeros(n, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # the fill below lands long after the call returns
        x.fill_(1.0)
        total = nk.sum(x)
        probs = nk.softmax(x.view(1024, -1))
    side.synchronize()
    assert total.item() == n
    torch.testing.assert_close(probs, torch.full((1024, n // 1024), 1024 / n, device="cuda"))


@pytest.mark.gpu
def test_device_reports_are_read_after_queued_work_on_a_side_stream(cupy_or_not):
    """cross_entropy's targets and segmented_reduce's offsets are checked on the
    device and the report read by the host after the launches: on the stream the call
    ran on (torch's current one), or a bad value written by queued work is missed.
    Each call twice: the general path, then the tensor table's replay."""
    logits = torch.zeros(4096, 3, device="cuda")
    target = torch.zeros(4096, dtype=torch.int64, device="cuda")
    x = torch.ones(4096, device="cuda")
    offsets = torch.tensor([0, 2048, 4096], device="cuda")
    nk.cross_entropy(logits, target), nk.segmented_reduce(x, offsets)  # recorded
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            torch.cuda._sleep(50_000_000)
            target[7] = 3
            with pytest.raises(IndexError, match="target 3 of row 7"):
                nk.cross_entropy(logits, target)
            target[7] = 0
            torch.cuda._sleep(50_000_000)
            offsets[1] = 5000
            with pytest.raises(ValueError, match="offsets must not decrease"):
                nk.segmented_reduce(x, offsets)
            offsets[1] = 2048
    side.synchronize()


@pytest.mark.gpu
def test_segmented_calls_on_tensors_replay_with_or_without_cupy(cupy_or_not):
    """A repeated segmented reduction of CUDA tensors replays its launches, keyed by
    the tensors (the offsets' report read after them), whether or not CuPy is there
    to translate them; the answers are the general path's. So does a segmented scan's
    pair of launch groups."""
    from numbakern.runtime import replay

    x = torch.randn(4096, device="cuda")
    offsets = torch.tensor([0, 5, 5, 4000, 4096], device="cuda")
    nonempty = torch.tensor([0, 5, 4000, 4096], device="cuda")
    first = nk.segmented_reduce(x, offsets), nk.segmented_argmax(x, nonempty)  # recorded
    scanned = nk.segmented_scan(x, offsets)
    before = replay.counts["replayed"]
    again = nk.segmented_reduce(x, offsets), nk.segmented_argmax(x, nonempty)
    assert replay.counts["replayed"] - before == 2
    # the scan's two launch groups, around the read of the offsets' ends (without
    # CuPy: on Numba arrays, given torch's stream)
    torch.testing.assert_close(nk.segmented_scan(x, offsets), scanned)
    assert replay.counts["replayed"] - before == 4
    h = x.cpu().numpy().astype(np.float64)
    sums = [h[a:b].sum() for a, b in zip([0, 5, 5, 4000], [5, 5, 4000, 4096])]
    for got in (first[0], again[0]):
        np.testing.assert_allclose(got.cpu().numpy(), sums, rtol=1e-5, atol=1e-4)
    for got in (first[1], again[1]):
        assert type(got) is torch.Tensor
        np.testing.assert_array_equal(got.cpu().numpy(), [np.argmax(h[0:5]),
                                                          np.argmax(h[5:4000]),
                                                          np.argmax(h[4000:])])


@pytest.mark.gpu
def test_a_cuda_tensor_on_another_device_is_refused():
    if torch.cuda.device_count() < 2:
        pytest.skip("one GPU")
    x = torch.ones(4, device="cuda:1")
    with pytest.raises(ValueError, match="cuda:1 but the current device is cuda:0"):
        nk.sum(x)


# --- what the first user of this found ----------------------------------------------


def test_dtype_given_by_position_is_honoured_for_bfloat16():
    x = _bf16_torch(np.full(257, 1.0, np.float32))
    x[0] = 1.0078125
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nk.CopyWarning)
        assert nk.sum(x, None, np.float32).dtype == torch.float32
        assert nk.sum(x, dtype=np.float32).dtype == torch.float32
        ml_dtypes = pytest.importorskip("ml_dtypes")
        assert nk.sum(x, dtype=ml_dtypes.bfloat16).dtype == torch.bfloat16  # what it gives


def test_outs_that_require_grad_are_refused():
    x = torch.randn(3, 8)
    with pytest.raises(ValueError, match="out is a tensor that requires grad"):
        nk.softmax(x, out=torch.empty(3, 8, requires_grad=True))
    logits = torch.randn(3, 8, requires_grad=True)
    with pytest.raises(ValueError, match="grad_out is a tensor that requires grad"):
        nk.cross_entropy(logits, torch.tensor([0, 1, 2]), return_grad=True, grad_out=logits)


@pytest.mark.parametrize("write", [
    lambda y: nk.cumsum(torch.ones(3), out=y),
    lambda y: nk.softmax(torch.randn(3), out=y),
    lambda y: nk.cross_entropy(torch.randn(1, 3), torch.tensor([1]), return_grad=True,
                               grad_out=y.reshape(1, 3)),
])
def test_a_written_out_bumps_its_version_so_a_saved_tensor_fails_backward(write):
    """As after torch's own out=: autograd saved exp's output for its backward pass,
    so writing it (through a detached view) must make backward raise, not give a
    wrong gradient."""
    a = torch.tensor([0.0, 1.0, 2.0], requires_grad=True)
    y = a.exp()
    before = y._version
    write(y.detach())
    assert y._version > before
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_inference_tensors_are_written_only_in_inference_mode():
    with torch.inference_mode():
        out = torch.zeros(3)
        nk.cumsum(torch.ones(3), out=out)
    assert out.tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="out is an inference tensor"):
        nk.cumsum(torch.ones(3), out=out)


def test_a_pair_of_outs_with_a_tensor_beside_numpy_input():
    """``out=`` as a pair (cummax's, max_with_indices') may hold CPU tensors beside
    NumPy input, as a single ``out=`` may: written, and given back as they are."""
    x = np.array([[1.0, 3.0, 2.0], [4.0, 0.0, 6.0]])
    for pair in ((torch.zeros(2, 3, dtype=torch.float64), torch.zeros(2, 3, dtype=torch.int64)),
                 (np.zeros((2, 3)), torch.zeros(2, 3, dtype=torch.int64))):
        got = nk.cummax(x, axis=1, out=pair)
        assert got[0] is pair[0] and got[1] is pair[1]
        want = torch.cummax(torch.from_numpy(x), dim=1)
        np.testing.assert_array_equal(np.asarray(pair[0]), want.values.numpy())
        np.testing.assert_array_equal(np.asarray(pair[1]), want.indices.numpy())
    pair = [torch.zeros(2, dtype=torch.float64), torch.zeros(2, dtype=torch.int64)]
    got = nk.max_with_indices(x, axis=1, out=pair)
    assert got.values is pair[0] and got.indices is pair[1]
    assert pair[0].tolist() == [3.0, 6.0] and pair[1].tolist() == [1, 2]


def test_outs_whose_elements_share_memory_are_refused():
    """An expanded out (stride 0 along an axis of length > 1) or another layout whose
    elements overlap would have the kernels' writes race into one element: refused,
    naming out, for every family and dtype; strided outs of distinct elements pass."""
    x, y = torch.randn(3, 4), torch.randn(3, 4, 2)
    calls = [
        (lambda out: nk.cumsum(x, axis=1, out=out), torch.float32),
        (lambda out: nk.softmax(x, out=out), torch.float32),
        (lambda out: nk.sum(y, axis=2, out=out), torch.float32),
        (lambda out: nk.mean(y, axis=2, out=out), torch.float32),
        (lambda out: nk.cummax(x, axis=1, out=(torch.empty(3, 4), out)), torch.int64),
        (lambda out: nk.argmax(y, axis=2, out=out), torch.int64),
    ]
    for call, dtype in calls:
        expanded = torch.zeros(4, dtype=dtype).expand(3, 4)
        rows = torch.zeros(10, dtype=dtype).as_strided((3, 4), (2, 1))  # rows overlap
        for out in (expanded, rows):
            with pytest.raises(ValueError, match="out has elements that share memory"):
                call(out)
    with pytest.raises(ValueError, match="out has elements that share memory"):
        nk.softmax(x.to(torch.bfloat16),
                   out=torch.zeros(4, dtype=torch.bfloat16).expand(3, 4))
    with pytest.raises(ValueError, match="out has elements that share memory"):
        nk.cumsum(x.to(torch.bfloat16), axis=1,
                  out=torch.zeros(4, dtype=torch.bfloat16).expand(3, 4))
    ml_dtypes = pytest.importorskip("ml_dtypes")
    wide = np.zeros(4, ml_dtypes.bfloat16)
    with pytest.raises(ValueError, match="out has elements that share memory"):
        nk.cumsum(x.numpy().astype(ml_dtypes.bfloat16), axis=1,
                  out=np.lib.stride_tricks.as_strided(wide, (3, 4), (0, 2)))
    logits = torch.randn(4, 9)
    with pytest.raises(ValueError, match="grad_out has elements that share memory"):
        nk.cross_entropy(logits, torch.tensor([0, 3, 7, 1]), return_grad=True,
                         grad_out=torch.zeros(9).expand(4, 9))
    one = torch.zeros(1, 4).expand(1, 4)  # stride 0 along a length-1 axis: no overlap
    assert nk.sum(torch.ones(1, 4, 2), axis=2, out=one) is one
    assert torch.equal(one, torch.full((1, 4), 2.0))
    strided = torch.zeros(4, 6)[:, ::2].T[:, :3]  # distinct elements, not contiguous
    assert nk.cumsum(x[:, :3], axis=1, out=strided) is strided
    torch.testing.assert_close(strided, torch.cumsum(x[:, :3], dim=1))


def test_a_bfloat16_input_needs_a_bfloat16_out():
    """Every out of the wrong dtype raises one class, OutDtypeError (a TypeError)."""
    x = _bf16_torch(np.ones((2, 8), np.float32))
    with pytest.raises(nk.OutDtypeError, match="out must have the result's dtype bfloat16 "
                       r"\(it is written in place\), got uint16"):
        nk.softmax(x, out=np.zeros((2, 8), np.uint16))
    with pytest.raises(nk.OutDtypeError, match="got bfloat16"):
        nk.softmax(torch.ones(2, 8), out=torch.empty(2, 8, dtype=torch.bfloat16))
    with pytest.raises(nk.OutDtypeError, match="got int32"):
        nk.softmax(torch.ones(2, 8), out=torch.empty(2, 8, dtype=torch.int32))
    for fn in (nk.cumsum, nk.sum):  # the reductions and scans too, naming bfloat16
        with pytest.raises(nk.OutDtypeError, match=f"^{fn.__name__}: cannot cast the "
                           "bfloat16 result to out's dtype int16"):
            fn(x, axis=1, out=torch.empty((2, 8) if fn is nk.cumsum else 2,
                                          dtype=torch.int16))


def test_device_reports_of_a_cpu_tensor_call_are_read_as_it_hands_them_back():
    """A CPU tensor with device offsets or targets: the kernel's report on them comes
    back through the call's translation as a tensor, read as one (a fuzz found an
    AttributeError there); bad offsets and targets are named."""
    from numba import cuda

    x = torch.arange(6.0)
    got = nk.segmented_reduce(x, cuda.to_device(np.array([0, 2, 2, 6])))
    torch.testing.assert_close(got, torch.tensor([1.0, 0.0, 14.0]))
    assert nk.segmented_argmax(x, cuda.to_device(np.array([0, 2, 6]))).tolist() == [1, 3]
    with pytest.raises(ValueError, match="segment 1 runs from 4 to 2"):
        nk.segmented_reduce(x, cuda.to_device(np.array([0, 4, 2, 6])))
    with pytest.raises(ValueError, match="max which has no identity.*segment 1 is empty"):
        nk.segmented_reduce(x, cuda.to_device(np.array([0, 2, 2, 6])), "max")
    with pytest.raises(IndexError, match="target 5 of row 2"):
        nk.cross_entropy(torch.zeros(4, 3), cuda.to_device(np.array([0, 1, 5, 0])))


def test_results_follow_the_first_argument_and_outs_come_back_as_themselves():
    got = nk.segmented_reduce(np.arange(4.0), torch.tensor([0, 2, 4]))
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, [1.0, 5.0])
    out = np.empty(3, np.float32)
    assert nk.sum(torch.ones(3, 5), axis=1, out=out) is out
    np.testing.assert_array_equal(out, [5, 5, 5])


def test_torch_dtypes_are_read_as_numpys():
    x = torch.arange(10, dtype=torch.int32)
    got = nk.sum(x, dtype=torch.float64)
    assert got.dtype == torch.float64 and got.item() == 45
    assert nk.cumsum(x, 0, torch.int16).dtype == torch.int16


def test_softmax_dtype_as_torch_and_bfloat16_of_other_inputs():
    x = torch.randn(3, 40).to(torch.bfloat16)
    got = nk.softmax(x, dtype=torch.float32)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, torch.softmax(x, -1, dtype=torch.float32))
    # another input with dtype=bfloat16: computed in float32, rounded once, as torch
    f = torch.randn(3, 40, dtype=torch.float64)
    want = torch.softmax(f, -1).float()
    for run in (lambda: nk.softmax(f, dtype=torch.bfloat16),
                lambda: nk.log_softmax(f, dtype=torch.bfloat16).float().exp()):
        got = run()
        torch.testing.assert_close(got.float(), want, rtol=BF16_RTOL, atol=1e-3)
    got = nk.sum(torch.arange(10, dtype=torch.int32), dtype=torch.bfloat16)
    assert got.dtype == torch.bfloat16 and got.item() == 45
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for asked in (ml_dtypes.bfloat16, np.dtype(ml_dtypes.bfloat16), torch.bfloat16):
        got = nk.softmax(f.numpy(), dtype=asked)
        assert isinstance(got, np.ndarray) and got.dtype == np.dtype(ml_dtypes.bfloat16)
        np.testing.assert_allclose(got.astype(np.float32), want.numpy(), rtol=BF16_RTOL,
                                   atol=1e-3)


@pytest.mark.parametrize("fn", ["softmax", "log_softmax", "softmax_backward", "sum"])
@pytest.mark.parametrize("lib", ["torch", "numpy"])
def test_a_bfloat16_out_of_a_dtype_bfloat16_call_takes_the_rounded_result(fn, lib):
    # float32 input, dtype=bfloat16 and a bfloat16 out: the out holds, bit for bit,
    # what the call without out returns (float32 results rounded once)
    ml_dtypes = pytest.importorskip("ml_dtypes")
    f = torch.randn(3, 40)
    args = (f,) if fn != "softmax_backward" else (torch.softmax(f, -1), f)
    shape = () if fn == "sum" else (3, 40)
    if lib == "torch":
        dtype, out = torch.bfloat16, torch.empty(shape, dtype=torch.bfloat16)

        def bits(t):
            return t.view(torch.int16).numpy()
    else:
        args = tuple(a.numpy() for a in args)
        dtype, out = ml_dtypes.bfloat16, np.empty(shape, ml_dtypes.bfloat16)

        def bits(a):
            return np.asarray(a).view(np.uint16)
    run = getattr(nk, fn)
    want = run(*args, dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error", nk.CopyWarning)
        got = run(*args, dtype=dtype, out=out)
    assert got is out and got.dtype == want.dtype
    assert np.array_equal(bits(got), bits(want))


@pytest.mark.filterwarnings("ignore::numbakern.CopyWarning")
def test_bfloat16_meets_weights_of_another_dtype_in_numpys_result_type():
    """A weighted histogram's sums take the weights' dtype, an average NumPy's
    result_type of x and the weights: a float32 result stays float32 beside bfloat16
    (found by a fresh-user trial: rounded to bfloat16 whenever x was)."""
    x = torch.tensor([0.1, 0.5, 0.9, 0.3])
    w = torch.tensor([1.001, 2.002, 3.003, 4.004])
    hist, edges = nk.histogram(x.bfloat16(), bins=2, weights=w)
    assert hist.dtype == torch.float32 and edges.dtype == torch.bfloat16
    # bins [0.1, 0.5) and [0.5, 0.9]: 0.1 and 0.3, then 0.5 and 0.9
    torch.testing.assert_close(hist, torch.stack([w[0] + w[3], w[1] + w[2]]))
    assert nk.histogram(x, bins=2, weights=w.bfloat16())[0].dtype == torch.bfloat16
    avg, total = nk.average(x.bfloat16(), weights=w, returned=True)
    assert avg.dtype == total.dtype == torch.float32
    torch.testing.assert_close(total, w.sum())
    avg, total = nk.average(x.bfloat16(), weights=w.bfloat16(), returned=True)
    assert avg.dtype == total.dtype == torch.bfloat16
