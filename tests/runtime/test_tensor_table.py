"""The table of repeated calls (numbakern/runtime/tensor_table.py): a repeated call
replays from its arrays' type and layouts; anything else keyed differently (dtype,
strides, alignment, values, their types, the device) misses it and is recorded anew or
runs the general path; and the answers stay the ordinary ones.

Under the simulator the table holds simulator arrays' calls (float32 results against
float64 NumPy, rtol 1e-5, atol 1e-4 for sums). The torch path is exercised with
bench/replay_python.py's CPU tensor that says it lives on cuda:0 (its CUDA queries,
allocations and launches counted stubs): what it checks is which queries,
allocations and views a replay makes, not what a GPU computes (the GPU tests in
test_replay.py and tests/api/test_torch.py do).
"""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest
from numba import cuda

import numbakern as nk
from numbakern.runtime import replay, tensor_table

rng = np.random.default_rng(11)


def _row_sum(x, **kwargs):
    return nk.sum(x, axis=1, **kwargs)


def _data(shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def _check_row_sum(result, h):
    np.testing.assert_allclose(result.copy_to_host(), h.astype(np.float64).sum(axis=1),
                               rtol=1e-5, atol=1e-4)


def _counts():
    return replay.counts["recorded"], replay.counts["replayed"]


@pytest.fixture(autouse=True)
def _fresh_tables():
    replay.forget()
    yield
    replay.forget()


@pytest.mark.simulator  # the table keys simulator arrays (on a GPU, Numba's are not)
def test_a_repeated_call_replays_from_the_table_with_the_ordinary_answers():
    table = nk.sum.tensor_replay_table
    kept = []
    recorded, replayed = _counts()
    for _ in range(3):
        h = _data((40, 33))
        kept.append((_row_sum(cuda.to_device(h)), h))
    assert _counts() == (recorded + 1, replayed + 2)
    assert len(table) == 1
    (program,) = table.values()
    assert type(program) is replay.Program and program.names
    for result, h in kept:  # no replay reused an earlier result's memory
        _check_row_sum(result, h)


@pytest.mark.simulator  # the table keys simulator arrays (on a GPU, Numba's are not)
@pytest.mark.parametrize("change", ["dtype", "strides", "alignment", "shape"])
def test_a_changed_layout_misses_the_table_and_is_recorded_anew(change):
    table = nk.sum.tensor_replay_table
    _row_sum(cuda.to_device(_data((40, 66))))
    keys = set(table)
    h = {"dtype": lambda: _data((40, 66), np.float64),
         "strides": lambda: _data((40, 66)),
         "alignment": lambda: _data((40, 67)),
         "shape": lambda: _data((41, 66))}[change]()
    x = cuda.to_device(h)
    x, h = {"strides": (x[:, ::2], h[:, ::2]),  # not contiguous: a layout of its own
            "alignment": (x[:, 1:], h[:, 1:])}.get(change, (x, h))
    recorded, replayed = _counts()
    for _ in range(2):
        _check_row_sum(_row_sum(x), h)
    assert _counts() == (recorded + 1, replayed + 1)
    assert len(set(table) - keys) == 1


def test_an_argument_of_another_type_is_keyed_apart_and_refused_as_before():
    _row_sum(cuda.to_device(_data((8, 33))))
    x = cuda.to_device(_data((8, 33)))
    with pytest.raises(TypeError, match="axis must be None, an int"):
        nk.sum(x, axis=True)  # equal to 1 as a dict key, but not to the checks
    with pytest.raises(TypeError, match="axis must be None, an int"):
        nk.sum(x, axis=1.0)


def test_the_dtype_named_bfloat16_passes_the_table_to_the_dispatch():
    """``dtype="bfloat16"`` (NumPy's name of ml_dtypes' type) is a string, which the
    table would key as a plain value and run the function undispatched ("sum is not
    defined for dtype=bfloat16"); the dispatch takes it as ``dtype=ml_dtypes.bfloat16``,
    which a device array, holding no bfloat16, is refused with (a NumPy array takes)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    h = np.float32([1.0039, 1.0039, 1.0039])
    assert nk.sum(h, dtype="bfloat16") == nk.sum(h, dtype=ml_dtypes.bfloat16) == 3
    x = cuda.to_device(h)
    for dtype in (ml_dtypes.bfloat16, "bfloat16", "bfloat16"):  # (the table's 2nd call)
        with pytest.raises(TypeError, match="dtype=bfloat16 of a .*hold no bfloat16"):
            nk.sum(x, dtype=dtype)


@pytest.mark.simulator  # the table keys simulator arrays (on a GPU, Numba's are not)
def test_a_refused_signature_runs_its_function_without_keying_it_again(monkeypatch):
    """A quantile at device q reads q's values on the host (refused: a device-to-host
    copy): a repeated call finds the refusal in the table and runs the function
    itself, building no second key."""
    x, q = _data((4, 40)), np.array([0.25, 0.5])
    nk.quantile(cuda.to_device(x), cuda.to_device(q), axis=1)
    (refusal,) = nk.quantile.tensor_replay_table.values()
    assert refusal == replay.Refused("a device-to-host copy")
    keys = []
    real = replay._signature
    monkeypatch.setattr(replay, "_signature", lambda *a: keys.append(1) or real(*a))
    for _ in range(2):
        got = nk.quantile(cuda.to_device(x), cuda.to_device(q), axis=1).copy_to_host()
        np.testing.assert_allclose(got, np.quantile(x, q, axis=1), rtol=1e-6)
    assert not keys


@pytest.mark.simulator  # the table keys simulator arrays (on a GPU, Numba's are not)
def test_a_check_that_fails_leaves_its_signature_to_record_anew():
    """nanmax's all-NaN flags are a check: data that fails it (an all-NaN row) warns
    and keeps nothing in the table, so a later call of the signature on clean data is
    recorded, and its next one replays; all-NaN data then warns again."""
    x = _data((6, 33))
    x[2] = np.nan
    for _ in range(2):
        with pytest.warns(RuntimeWarning, match="All-NaN slice"):
            got = nk.nanmax(cuda.to_device(x), axis=1).copy_to_host()
        np.testing.assert_array_equal(got, np.nanmax(x, axis=1))
    assert not nk.nanmax.tensor_replay_table
    clean = _data((6, 33))
    recorded, replayed = _counts()
    for _ in range(2):
        got = nk.nanmax(cuda.to_device(clean), axis=1).copy_to_host()
        np.testing.assert_array_equal(got, clean.max(axis=1))
    assert _counts() == (recorded + 1, replayed + 1)
    assert len(nk.nanmax.tensor_replay_table) == 1
    with pytest.warns(RuntimeWarning, match="All-NaN slice"):
        got = nk.nanmax(cuda.to_device(x), axis=1).copy_to_host()
    np.testing.assert_array_equal(got, np.nanmax(x, axis=1))


@pytest.mark.simulator  # the table keys simulator arrays (on a GPU, Numba's are not)
def test_keyword_and_positional_values_are_keyed():
    table = nk.sum.tensor_replay_table
    h = _data((8, 33))
    x = cuda.to_device(h)
    for _ in range(2):
        _check_row_sum(nk.sum(x, 1), h)
        _check_row_sum(nk.sum(x, axis=1), h)
        np.testing.assert_allclose(nk.sum(x, axis=1, keepdims=True).copy_to_host(),
                                   h.astype(np.float64).sum(axis=1, keepdims=True),
                                   rtol=1e-5, atol=1e-4)
    assert len(table) == 3


def _log_softmax_backward_ref(y, dy):
    y, dy = y.astype(np.float64), dy.astype(np.float64)
    return dy - np.exp(y) * dy.sum(axis=-1, keepdims=True)


@pytest.mark.simulator  # the table keys simulator arrays (on a GPU, Numba's are not)
def test_a_call_of_two_arrays_replays_from_the_table_with_the_ordinary_answers():
    """A backward pass's (y, dy): both arrays' layouts keyed, both addresses patched
    in; a second array of another layout or type misses the table."""
    table = nk.log_softmax_backward.tensor_replay_table
    pairs = [(_data((6, 40)), _data((6, 40))) for _ in range(3)]
    recorded, replayed = _counts()
    got = [nk.log_softmax_backward(cuda.to_device(y), cuda.to_device(dy)) for y, dy in pairs]
    assert _counts() == (recorded + 1, replayed + 2) and len(table) == 1
    for g, (y, dy) in zip(got, pairs):  # new arrays each time: both addresses patched
        np.testing.assert_allclose(g.copy_to_host(), _log_softmax_backward_ref(y, dy),
                                   rtol=1e-5, atol=1e-5)
    y, dy = pairs[0]
    same = cuda.to_device(y)  # one array as both arguments
    np.testing.assert_allclose(nk.log_softmax_backward(same, same).copy_to_host(),
                               _log_softmax_backward_ref(y, y), rtol=1e-5, atol=1e-5)
    strided = cuda.to_device(np.repeat(dy, 2, axis=1))[:, ::2]  # dy's layout alone changes
    recorded, replayed = _counts()
    for _ in range(2):
        np.testing.assert_allclose(
            nk.log_softmax_backward(cuda.to_device(y), strided).copy_to_host(),
            _log_softmax_backward_ref(y, dy), rtol=1e-5, atol=1e-5)
    assert _counts() == (recorded + 1, replayed + 1) and len(table) == 2
    with pytest.raises(ValueError, match="dy must have y's memory"):  # the general path's
        nk.log_softmax_backward(cuda.to_device(y), dy)  # check, for a host dy
    assert len(table) == 2


def test_an_explicit_stream_passes_the_table_by():
    """The table keys calls of one array and plain values; a call given ``stream=``
    replays from the general table (Numba arrays: runtime/replay.py)."""
    h = _data((8, 33))
    x = cuda.to_device(h)
    recorded, replayed = _counts()
    for _ in range(2):
        _check_row_sum(_row_sum(x, stream=cuda.default_stream()), h)
    assert _counts() == (recorded + 1, replayed + 1)
    assert not nk.sum.tensor_replay_table


@pytest.mark.simulator  # the table keys simulator arrays (on a GPU, Numba's are not)
def test_disabled_and_forget_reach_the_table():
    h = _data((8, 33))
    x = cuda.to_device(h)
    _row_sum(x)
    assert nk.sum.tensor_replay_table
    recorded, replayed = _counts()
    with replay.disabled():
        _check_row_sum(_row_sum(x), h)
    assert _counts() == (recorded, replayed)
    replay.forget()
    assert not nk.sum.tensor_replay_table


@pytest.mark.simulator  # the table keys simulator arrays (on a GPU, Numba's are not)
def test_types_are_learnt_once_and_host_arrays_are_never_keyed():
    assert tensor_table.reader_of(np.ndarray) is None
    assert tensor_table.reader_of(list) is None
    x = cuda.to_device(np.zeros(4, np.float32))
    assert tensor_table.reader_of(type(x)) is tensor_table._simulator_reader
    assert tensor_table._READERS[type(x)] is tensor_table._simulator_reader
    h = _data((8, 33))
    np.testing.assert_allclose(nk.sum(h, axis=1), h.astype(np.float64).sum(axis=1),
                               rtol=1e-5, atol=1e-4)
    assert not nk.sum.tensor_replay_table


# --- torch tensors, with the bench's fake CUDA ----------------------------------------


def _bench():
    path = pathlib.Path(__file__).parents[2] / "bench" / "replay_python.py"
    spec = importlib.util.spec_from_file_location("replay_python", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def fake():
    pytest.importorskip("torch")
    return _bench()


def _tensor_call(fake, name, shape):
    """A recorded fake-CUDA tensor call of the bench's case ``name``, entered in the
    general table: (call, tensor)."""
    import torch

    call = fake.CASES[name][0]
    original = fake._catch_programs()
    try:
        sim = fake._recorded(call, shape, name in fake.SCALAR)
    finally:
        replay.Recording.program = original
    t = torch.from_numpy(_data(shape)).as_subclass(fake.CudaLike)
    return call, t, sim


@pytest.mark.simulator  # the fake tensor replays the simulator's steps
def test_a_tensor_replay_asks_for_the_device_once_and_allocates_its_result(fake):
    import torch

    call, t, sim = _tensor_call(fake, "cumsum", (1000,))
    allocations = []
    with fake.fake_gpu():
        empty = torch.empty
        torch.empty = lambda *a, **k: allocations.append((a, k.get("dtype"))) or empty(*a, **k)
        try:
            fake._enter(call, t, fake._gpu_program(sim))
            call(t)  # the general table's program, entered in the tensor table
            ((kind, (dtype, shape, strides, _, device)),) = _tensor_keys(fake, nk.cumsum)
            assert (kind, dtype, tuple(shape), strides, device) == \
                (fake.CudaLike, torch.float32, (1000,), (1,), 0)
            fake.stubs.clear()
            allocations.clear()
            result = call(t)
        finally:
            torch.empty = empty
    assert fake.stubs["_cuda_getDevice"] == 1 and fake.stubs["raw_stream"] == 1
    assert fake.stubs["current_device"] == 0
    assert fake.stubs["driver_launch"] == len(sim.steps)
    # one allocation, in the result's dtype (the simulator's scan has a temporary beside
    # its result, so the result is a view of it), through torch.empty: the fake tensor
    # is a subclass, whose new_empty would return the subclass (a torch.Tensor's replay
    # allocates through its new_empty: the gpu tests below)
    assert allocations == [(((sim.total // 4,),), torch.float32)]
    assert result.dtype == torch.float32 and tuple(result.shape) == (1000,)
    assert result.storage_offset() * 4 == sim.result.offset


def test_a_tensor_result_alone_in_its_memory_is_the_allocation():
    torch = pytest.importorskip("torch")
    alone = replay._ArraySpec(1, 0, (64, 16), (64, 4), torch.float32)
    assert replay._tensor_result(alone, 4096) == ((64, 16), torch.float32, None)
    beside = alone._replace(offset=256)  # a temporary first
    shape, dtype, views = replay._tensor_result(beside, 4096 + 256)
    assert (shape, dtype) == ((1088,), torch.float32)
    view = views(torch.empty(shape, dtype=dtype))
    assert view.shape == (64, 16) and view.stride() == (16, 1) and view.storage_offset() == 64
    pair = (alone, alone._replace(offset=4096, dtype=torch.int64, strides=(128, 8)))
    shape, dtype, views = replay._tensor_result(pair, 4096 + 8192)
    assert dtype == torch.uint8
    values, indices = views(torch.empty(shape, dtype=dtype))
    assert (values.dtype, indices.dtype) == (torch.float32, torch.int64)
    assert indices.storage_offset() == 4096 // 8


@pytest.mark.simulator  # the fake tensor replays the simulator's steps
def test_a_tensor_scalar_is_a_view_beside_the_temporaries(fake):
    import torch

    call, t, sim = _tensor_call(fake, "argmax", (1 << 10,))
    with fake.fake_gpu():
        fake._enter(call, t, fake._gpu_program(sim))
        call(t)
        result = call(t)
    assert result.dtype == torch.int64 and result.shape == ()
    assert result.storage_offset() * 8 == sim.result.offset


@pytest.mark.simulator  # the fake tensor replays the simulator's steps
def test_a_tensor_on_another_device_is_refused_with_its_name(fake):
    call, t, sim = _tensor_call(fake, "sum", (1 << 10,))

    class OnOne(fake.CudaLike):
        def get_device(self):
            return 1

    OnOne.__module__ = fake.CudaLike.__module__
    other = t.as_subclass(OnOne)
    with fake.fake_gpu():
        fake._enter(call, t, fake._gpu_program(sim))
        call(t)
        with pytest.raises(ValueError, match="x is on cuda:1 but the current device is "
                                             "cuda:0"):
            call(other)
    assert len(_tensor_keys(fake, nk.sum)) == 1


def _tensor_keys(fake, fn) -> list:
    """The table's keys of fake tensors (the simulator's recording is in it too)."""
    return [k for k in fn.tensor_replay_table if k[0] is fake.CudaLike]


# --- on a GPU: CUDA tensors and CuPy arrays --------------------------------------------


def _on_gpu(library):
    if library == "torch":
        torch = pytest.importorskip("torch")
        return lambda h: torch.from_numpy(h).cuda(), lambda r: r.cpu().numpy(), torch.Tensor
    cupy = pytest.importorskip("cupy")
    return cupy.asarray, cupy.asnumpy, cupy.ndarray


@pytest.mark.gpu
@pytest.mark.parametrize("library", ["torch", "cupy"])
def test_gpu_layouts_are_tabled_apart_with_the_ordinary_answers(library):
    to_device, to_host, kind = _on_gpu(library)
    table = nk.sum.tensor_replay_table
    recorded, replayed = _counts()
    for _ in range(2):  # each layout recorded, then replayed from its own entry
        whole = _data((40, 66))
        d = to_device(whole)
        wide = whole.astype(np.float64)
        for x, h in [(d, whole), (d[:, ::2], whole[:, ::2]),  # strided
                     (to_device(wide), wide), (d[:, 1:], whole[:, 1:])]:  # misaligned
            got = _row_sum(x)
            assert type(got) is kind  # a torch replay allocates through new_empty
            np.testing.assert_allclose(to_host(got), h.astype(np.float64).sum(axis=1),
                                       rtol=1e-5, atol=1e-4)
    assert _counts() == (recorded + 4, replayed + 4)
    assert len(table) == 4


@pytest.mark.gpu
@pytest.mark.parametrize("library", ["torch", "cupy"])
def test_gpu_calls_of_two_arrays_replay_from_the_table(library):
    """log_softmax_backward(y, dy) on CUDA tensors or CuPy arrays: the second call of a
    layout replays from the table, both addresses patched in, in the caller's type."""
    to_device, to_host, kind = _on_gpu(library)
    table = nk.log_softmax_backward.tensor_replay_table
    recorded, replayed = _counts()
    for _ in range(3):
        y, dy = _data((64, 1000)), _data((64, 1000))
        got = nk.log_softmax_backward(to_device(y), to_device(dy))
        assert type(got) is kind
        np.testing.assert_allclose(to_host(got), _log_softmax_backward_ref(y, dy),
                                   rtol=1e-5, atol=1e-4)
    assert _counts() == (recorded + 1, replayed + 2) and len(table) == 1


def test_a_call_that_returns_its_array_is_not_tabled():
    """A one-array call whose result is the array itself (written by its launch)
    replays through the general path, which hands back the caller's object; the
    table, which knows only the address, keeps no program for it."""
    from numbakern.kernels.elementwise import fill
    from numbakern.runtime.views import device_view, flat

    def fill_in_place(x, value):
        fill(flat(device_view(x)), value, cuda.default_stream())
        return x

    general = replay.replayable(fill_in_place)
    call = tensor_table.tabled(general, {"sim": general})
    recorded, replayed = _counts()
    for _ in range(3):
        x = cuda.to_device(_data(40))
        assert call(x, 5.0) is x
        np.testing.assert_array_equal(x.copy_to_host(), np.full(40, 5.0, np.float32))
    assert _counts() == (recorded + 1, replayed + 2)
    assert not call.tensor_replay_table
