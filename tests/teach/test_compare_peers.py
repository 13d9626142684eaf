"""The peers ``compare`` adds beside CuPy and torch: ``torch.compile`` (softmax,
log_softmax), Triton's fused softmax (softmax) and ``cuda.compute`` (sum, max, min,
cumsum, sort, segmented_reduce). Registered on those operations only, listed and
imported nowhere under the simulator, and called as their libraries' functions
spell it: ``cuda.compute`` through a stand-in of its calls (keyword-only, named as
cuda-cccl 1.2.1 names them) that runs them in NumPy, Triton's kernel under Triton's
interpreter where triton is installed."""

from __future__ import annotations

import enum
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest

from numbakern.teach import peers
from numbakern.teach.compare import OPERATIONS, PEERS, _segment_sums, segment_offsets

ROOT = Path(__file__).resolve().parents[2]
LIBRARIES = ("torch", "triton", "cupy", "cuda.compute")


def run_python(code: str, **env) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                          env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


# --- registration ---------------------------------------------------------------------

NEW_PEERS = {
    "torch.compile": {"softmax", "log_softmax"},
    "triton": {"softmax"},
    "cuda.compute": {"sum", "max", "min", "cumsum", "sort", "segmented_reduce"},
}


@pytest.mark.parametrize("peer", sorted(NEW_PEERS))
def test_each_new_peer_is_registered_on_its_operations_only(peer):
    assert {name for name, op in OPERATIONS.items() if peer in op.peers} == NEW_PEERS[peer]


def test_every_registered_peer_has_a_library_and_an_order():
    assert list(PEERS) == ["cupy", "torch", "torch.compile", "triton", "cuda.compute"]
    assert {p for op in OPERATIONS.values() for p in op.peers} == set(PEERS)
    assert {PEERS[p] for p in ("torch", "torch.compile", "triton")} == {"torch"}
    assert {PEERS[p] for p in ("cupy", "cuda.compute")} == {"cupy"}


# --- nothing imported where no GPU runs ---------------------------------------------------


def test_importing_the_peers_imports_none_of_their_libraries():
    out = run_python(f"""
        import sys
        import numbakern.teach.peers
        print([m for m in {LIBRARIES!r} if m in sys.modules])
    """)
    assert out == "[]"


def test_compare_under_the_simulator_lists_and_imports_no_peer():
    out = run_python(f"""
        import sys
        from numbakern.teach import compare
        op = compare.OPERATIONS["softmax"]
        result = compare.compare(op, (4, 8), "float32", compare.softmax_variants()[:1], 1,
                                 {{"axis": -1}})
        assert [r.provider for r in result.rows] == ["numbakern"] and result.rows[0].ok
        print(compare.installed_peers(), [m for m in {LIBRARIES!r} if m in sys.modules])
    """, NUMBAKERN_SIMULATOR="1")
    assert out == "() []"


# --- Triton tutorial 02's launch rule and kernel -------------------------------------------


@pytest.mark.parametrize("n_cols,block,warps", [
    (1, 1, 4), (2, 2, 4), (781, 1024, 4), (1024, 1024, 4), (1025, 2048, 8),
    (2048, 2048, 8), (2049, 4096, 16), (4096, 4096, 16), (50257, 65536, 16)])
def test_the_fused_softmax_launch_follows_the_tutorial(n_cols, block, warps):
    assert peers.softmax_launch(n_cols) == (block, warps)


def test_the_fused_softmax_launch_needs_a_column():
    with pytest.raises(ValueError, match="at least one column"):
        peers.softmax_launch(0)


def test_the_fused_softmax_refuses_what_the_tutorial_does_not_cover():
    torch = pytest.importorskip("torch")
    peer = OPERATIONS["softmax"].peers["triton"]
    with pytest.raises(ValueError, match="2-D"):
        peer(torch, torch.zeros(2, 3, 4), axis=-1)
    with pytest.raises(ValueError, match="last axis"):
        peer(torch, torch.zeros(2, 3), axis=0)
    with pytest.raises(TypeError, match="float32"):
        peer(torch, torch.zeros(2, 3, dtype=torch.float64), axis=-1)
    with pytest.raises(ValueError, match="contiguous"):
        peer(torch, torch.zeros(3, 2).t(), axis=-1)


def test_the_fused_softmax_under_tritons_interpreter():
    """The kernel itself, on CPU tensors (``TRITON_INTERPRET=1``): rows shorter and
    longer than a power of two, one column, rows with a stride past their length, and
    float16 computed in float32."""
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    out = run_python("""
        import numpy as np, torch
        from numbakern.teach import compare

        peer = compare.OPERATIONS["softmax"].peers["triton"]
        rng = np.random.default_rng(0)
        for shape in [(5, 781), (3, 1), (4, 1024), (2, 4097)]:
            x = (3 * rng.standard_normal(shape)).astype(np.float32)
            got = peer(torch, torch.from_numpy(x), axis=-1).numpy()
            assert np.allclose(got, compare._softmax(x.astype(np.float64)),
                               rtol=1e-5, atol=1e-8), shape
        wide = torch.from_numpy(rng.standard_normal((4, 100)).astype(np.float32))
        got = peer(torch, wide[:, :70], axis=-1)
        assert got.is_contiguous() and torch.allclose(got, torch.softmax(wide[:, :70], -1))
        half = torch.from_numpy(rng.standard_normal((6, 50)).astype(np.float16))
        got = peer(torch, half, axis=1)
        assert got.dtype == torch.float16
        assert torch.allclose(got.float(), torch.softmax(half.float(), -1), rtol=1e-3)
        print("ok")
    """, TRITON_INTERPRET="1")
    assert out == "ok"


# --- torch.compile --------------------------------------------------------------------------


def test_torch_compile_builds_once_per_case_with_static_shapes():
    fake = types.ModuleType("fake_torch")  # torch's names the peer uses
    built, resets = [], []
    fake.compile = lambda fn, dynamic: built.append(dynamic) or fn
    fake._dynamo = types.SimpleNamespace(reset=lambda: resets.append(1))
    fake.softmax = lambda t, dim: ("softmax", t.name, dim)
    fake.log_softmax = lambda t, dim: ("log_softmax", t.name, dim)
    x, y = (types.SimpleNamespace(name=n, shape=(4, 8), dtype="float32") for n in "xy")
    z = types.SimpleNamespace(name="z", shape=(4, 9), dtype="float32")
    softmax = OPERATIONS["softmax"].peers["torch.compile"]
    log_softmax = OPERATIONS["log_softmax"].peers["torch.compile"]
    assert softmax(fake, x, axis=-1) == ("softmax", "x", -1)
    assert softmax(fake, y, axis=-1) == ("softmax", "y", -1)  # the same case: built once
    assert softmax(fake, z, axis=-1) == ("softmax", "z", -1)  # another shape: built anew
    assert log_softmax(fake, x, axis=1) == ("log_softmax", "x", 1)
    assert log_softmax(fake, x) == ("log_softmax", "x", -1)  # no axis: the last
    assert built == [False] * 4 and len(resets) == 4  # static shapes, from a reset Dynamo


# --- cuda.compute, through a stand-in ----------------------------------------------------


class _OpKind(enum.Enum):
    PLUS = enum.auto()
    MAXIMUM = enum.auto()
    MINIMUM = enum.auto()


class _SortOrder(enum.Enum):
    ASCENDING = enum.auto()
    DESCENDING = enum.auto()


_UFUNC = {_OpKind.PLUS: np.add, _OpKind.MAXIMUM: np.maximum, _OpKind.MINIMUM: np.minimum}


def _reduce_into(*, d_in, d_out, num_items, op, h_init, stream=None):
    """CUB's reduce: from ``h_init``, in its dtype (the accumulator's)."""
    d_out[0] = _UFUNC[op].reduce(d_in[:num_items].astype(h_init.dtype), initial=h_init[()])


def _inclusive_scan(*, d_in, d_out, op, init_value, num_items, stream=None):
    assert op is _OpKind.PLUS
    d_out[:num_items] = init_value + np.cumsum(d_in[:num_items], dtype=init_value.dtype)


def _radix_sort(*, d_in_keys, d_out_keys, d_in_values=None, d_out_values=None, num_items,
                order, begin_bit=None, end_bit=None, stream=None):
    d_out_keys[:num_items] = np.sort(d_in_keys[:num_items])
    if order is _SortOrder.DESCENDING:
        d_out_keys[:num_items] = d_out_keys[:num_items][::-1]


def _segmented_reduce(*, d_in, d_out, num_segments, start_offsets_in, end_offsets_in, op,
                      h_init, max_segment_size=None, stream=None):
    for i in range(num_segments):
        segment = d_in[start_offsets_in[i]:end_offsets_in[i]].astype(h_init.dtype)
        d_out[i] = _UFUNC[op].reduce(segment, initial=h_init[()])


_TEMP_BYTES = 64  # what each stand-in algorithm asks for


def _maker(run, build_keys: str, *build_only: str):
    """A stand-in ``make_<algorithm>`` taking CCCL 1.2.1's build arguments
    (``build_keys``, all of them, as its keyword-only signature requires): the object
    it builds, given no ``temp_storage``, returns the bytes it needs, and given them
    runs ``run`` on the call's arrays (and the build's ``build_only`` arguments);
    ``make.made`` counts the objects built."""
    made = []

    def make(**build):
        assert set(build) == set(build_keys.split()), sorted(build)

        def algorithm(*, temp_storage, **call):
            if temp_storage is None:
                return _TEMP_BYTES
            assert temp_storage.nbytes >= _TEMP_BYTES
            run(**call, **{k: build[k] for k in build_only})
        made.append(run.__name__)
        return algorithm

    make.made = made
    return make


@pytest.fixture
def compute(monkeypatch):
    """``cuda.compute``'s object API in NumPy, with NumPy standing in for CuPy."""
    monkeypatch.setitem(sys.modules, "cupy", np)
    monkeypatch.setattr(peers, "_PREPARED", {})
    return types.SimpleNamespace(
        OpKind=_OpKind, SortOrder=_SortOrder,
        make_reduce_into=_maker(_reduce_into, "d_in d_out op h_init"),
        make_inclusive_scan=_maker(_inclusive_scan, "d_in d_out op init_value"),
        make_radix_sort=_maker(_radix_sort, "d_in_keys d_out_keys d_in_values d_out_values "
                               "order", "order"),
        make_segmented_reduce=_maker(_segmented_reduce, "d_in d_out start_offsets_in "
                                     "end_offsets_in op h_init"))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint8", "int64"])
@pytest.mark.parametrize("name", ["sum", "max", "min"])
def test_cuda_compute_reductions_give_numpys_value_and_dtype(compute, name, dtype):
    rng = np.random.default_rng(1)
    low = 0 if np.dtype(dtype).kind == "u" else -100
    x = rng.integers(low, 100, (30, 7)).astype(dtype)
    if name == "max" and low < 0:
        x = -np.abs(x) - 1  # all negative: a zero start would be wrong
    if name == "min":
        x = np.abs(x) + 1  # all positive, as above
    peer = OPERATIONS[name].peers["cuda.compute"]
    got = peer(compute, x)
    want = getattr(np, name)(x)
    assert got.shape == () and got.dtype == want.dtype and got == want
    assert peer(compute, x[0], axis=0) == getattr(np, name)(x[0])


def test_cuda_compute_sums_int32_in_int64(compute):
    x = np.full(8, 2**30, dtype=np.int32)
    assert OPERATIONS["sum"].peers["cuda.compute"](compute, x) == 2**33
    got = OPERATIONS["cumsum"].peers["cuda.compute"](compute, x)
    np.testing.assert_array_equal(got, np.cumsum(x))
    assert got.dtype == np.int64


def test_cuda_compute_cumsum_and_sort(compute):
    x = np.random.default_rng(2).standard_normal((4, 25)).astype(np.float32)
    got = OPERATIONS["cumsum"].peers["cuda.compute"](compute, x)
    np.testing.assert_allclose(got, np.cumsum(x), rtol=1e-5, atol=1e-5)
    assert got.shape == (100,)  # without an axis, NumPy's cumsum is of the flattened array
    np.testing.assert_array_equal(OPERATIONS["sort"].peers["cuda.compute"](compute, x[1]),
                                  np.sort(x[1]))


def test_cuda_compute_segmented_sums(compute):
    x = np.random.default_rng(3).integers(-50, 51, 1000).astype(np.int32)
    got = peers.cccl_segmented_sum(compute, x, segment_offsets(len(x)))
    np.testing.assert_array_equal(got, _segment_sums(x))
    assert got.dtype == _segment_sums(x).dtype


def test_cuda_compute_is_built_once_a_case_and_its_storage_kept(compute):
    """The object API: built and its temporary storage allocated once per case, then
    each call the algorithm alone (the one-shot functions build, size and allocate
    every call)."""
    sort = OPERATIONS["sort"].peers["cuda.compute"]
    rng = np.random.default_rng(4)
    for _ in range(3):
        x = rng.standard_normal(40).astype(np.float32)
        np.testing.assert_array_equal(sort(compute, x), np.sort(x))
    assert compute.make_radix_sort.made == ["_radix_sort"]
    sort(compute, np.ones(41, np.float32))  # another size: another object
    assert compute.make_radix_sort.made == ["_radix_sort"] * 2
    for n in range(peers._PREPARED_MAX + 3):  # the oldest goes past the limit
        OPERATIONS["sum"].peers["cuda.compute"](compute, np.ones(n + 1))
    assert len(peers._PREPARED) == peers._PREPARED_MAX
    peers.give_back_memory()  # between benchmark cases: the objects and their arrays go
    assert not peers._PREPARED


def test_cuda_compute_raises_where_it_does_not_apply(compute):
    ops = OPERATIONS
    rows = np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match="axis 1"):
        ops["sum"].peers["cuda.compute"](compute, rows, axis=1)
    with pytest.raises(ValueError, match="axis 0"):
        ops["cumsum"].peers["cuda.compute"](compute, rows, axis=0)
    with pytest.raises(ValueError, match="one row"):
        ops["sort"].peers["cuda.compute"](compute, rows)
    with pytest.raises(ValueError, match="1-D"):
        peers.cccl_segmented_sum(compute, rows, np.array([0, 3]))
    for dtype in (np.float16, np.bool_):
        with pytest.raises(TypeError, match="float32"):
            ops["max"].peers["cuda.compute"](compute, np.ones(4, dtype))
