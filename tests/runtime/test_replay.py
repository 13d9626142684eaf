"""Replay of recorded launches (numbakern/runtime/replay.py): a repeated call with the same
signature must give the same answers as an ordinary call, on new data, without
disturbing earlier results; calls that cannot be replayed must run the ordinary way.

Under the simulator the replays run through Numba's simulated launches (device input:
``cuda.to_device``); the GPU tests repeat the main cases with CuPy input and the
driver. Tolerances as the families' own tests: float32 results against a float64
NumPy reference, rtol 1e-5 (sums: plus atol 1e-4 for cancellation), indices exact.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from numba import cuda

import numbakern as nk
from numbakern.runtime import launch, replay
from numbakern.strategies import available

rng = np.random.default_rng(7)


def _host(r):
    if isinstance(r, tuple):
        return tuple(_host(e) for e in r)
    return r.get() if hasattr(r, "get") and not hasattr(r, "copy_to_host") else \
        r.copy_to_host()


def _softmax(h):
    e = np.exp(h - h.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# (name, call, float64 reference, shape): each replays on a GPU and under the simulator
CASES = [
    ("row sum", lambda x: nk.sum(x, axis=1), lambda h: h.sum(axis=1), (40, 33)),
    ("column sum", lambda x: nk.sum(x, axis=0), lambda h: h.sum(axis=0), (40, 33)),
    ("row max, keepdims", lambda x: nk.max(x, axis=1, keepdims=True),
     lambda h: h.max(axis=1, keepdims=True), (9, 129)),
    ("row argmax", lambda x: nk.argmax(x, axis=1), lambda h: h.argmax(axis=1), (40, 33)),
    ("row mean", lambda x: nk.mean(x, axis=1), lambda h: h.mean(axis=1), (40, 33)),
    ("column mean, keepdims", lambda x: nk.mean(x, axis=0, keepdims=True),
     lambda h: h.mean(axis=0, keepdims=True), (9, 70)),
    ("max_with_indices", lambda x: nk.max_with_indices(x, axis=0),
     lambda h: (h.max(axis=0), h.argmax(axis=0)), (33, 5)),
    ("cumsum", lambda x: nk.cumsum(x), lambda h: np.cumsum(h), (1000,)),
    ("reverse exclusive cumsum", lambda x: nk.cumsum(x, exclusive=True, reverse=True),
     lambda h: np.cumsum(h[::-1])[::-1] - h, (129,)),
    ("row cumsum", lambda x: nk.cumsum(x, axis=1), lambda h: np.cumsum(h, axis=1), (5, 70)),
    ("softmax", lambda x: nk.softmax(x), _softmax, (6, 50)),
    ("log_softmax", lambda x: nk.log_softmax(x), lambda h: np.log(_softmax(h)), (3, 200)),
    ("row var", lambda x: nk.var(x, axis=1), lambda h: h.var(axis=1), (40, 33)),
    ("std, ddof 1", lambda x: nk.std(x, ddof=1), lambda h: h.std(ddof=1), (1000,)),
    ("column nanvar", lambda x: nk.nanvar(x, axis=0), lambda h: np.nanvar(h, axis=0),
     (9, 70)),
    ("nanmean", lambda x: nk.nanmean(x), np.nanmean, (1000,)),
    ("sum", lambda x: nk.sum(x), np.sum, (1000,)),
    ("row sum, initial", lambda x: nk.sum(x, axis=1, initial=2.5),  # the initial put
     lambda h: h.sum(axis=1) + 2.5, (40, 33)),                   # by a launch
    ("max, initial", lambda x: nk.max(x, initial=1.5), lambda h: max(h.max(), 1.5), (1000,)),
    ("argmax", lambda x: nk.argmax(x), np.argmax, (1000,)),
    ("row logcumsumexp", lambda x: nk.logcumsumexp(x, axis=1),
     lambda h: np.logaddexp.accumulate(h, axis=1), (5, 70)),
    ("sliced row sum", lambda x: nk.sum(x[::-1, ::2], axis=1),
     lambda h: h[::-1, ::2].sum(axis=1), (12, 66)),
]

# sorts replay on a GPU only: under the simulator they lay out device input on the host
SORT_CASES = [
    ("radix sort", lambda x: nk.sort(x, strategy="radix"), np.sort, (300_000,)),
    ("radix argsort of rows", lambda x: nk.argsort(x, strategy="radix"),
     lambda h: np.argsort(h, axis=-1, kind="stable"), (3, 5000)),
    ("bitonic sort of rows", lambda x: nk.sort(x, strategy="bitonic"),
     lambda h: np.sort(h, axis=-1), (4, 500)),
    ("topk of rows, a named tuple", lambda x: nk.topk(x, 5),
     lambda h: (-np.sort(-h, axis=-1)[:, :5], np.argsort(-h, axis=-1, kind="stable")[:, :5]),
     (4, 500)),
]


def _check(result, expected):
    for r, e in zip(result if isinstance(result, tuple) else (result,),
                    expected if isinstance(expected, tuple) else (expected,)):
        if np.issubdtype(r.dtype, np.integer):
            np.testing.assert_array_equal(r, e)
        else:
            np.testing.assert_allclose(r, e, rtol=1e-5, atol=1e-4)


def _repeat(to_device, call, reference, shape, times=3):
    """Call ``times`` times on new data; returns the replay count and keeps every
    result until the end (a replay must not reuse an earlier result's memory). The
    tables start empty: another test in this process may have recorded the same call
    (the first call here must record, not replay)."""
    replay.forget()
    before = replay.counts["replayed"]
    kept = []
    for _ in range(times):
        h = rng.standard_normal(shape).astype(np.float32)
        kept.append((call(to_device(h)), reference(h.astype(np.float64))))
    for result, expected in kept:
        _check(_host(result), expected)
    return replay.counts["replayed"] - before


# the simulator's shapes where CASES's cost it most: rows of 33 (a warp and one more),
# 12 of them over several blocks of two warps; a scan over 3 tiles of 128
SMALLER = {"row sum": (12, 33), "column sum": (12, 33), "row argmax": (12, 33),
           "row mean": (12, 33), "row var": (12, 33), "cumsum": (300,)}


@pytest.mark.parametrize("name, call, reference, shape", CASES, ids=[c[0] for c in CASES])
def test_repeated_calls_replay_with_the_ordinary_answers(name, call, reference, shape):
    if nk.backend().is_simulator:
        shape = SMALLER.get(name, shape)
    assert _repeat(cuda.to_device, call, reference, shape) == 2


@pytest.mark.parametrize("strategy", available())
def test_every_grid_strategy_replays(strategy):
    def call(x):
        return nk.sum(x, axis=1, strategy=strategy)

    assert _repeat(cuda.to_device, call, lambda h: h.sum(axis=1), (3, 100)) == 2


def test_scalar_results_of_numba_arrays_are_0d_device_arrays_that_replay():
    """A whole-array reduction of a Numba device array hands back a 0-d device array
    in NumPy's result dtype (float16's max cast from its float32 accumulator on the
    device), and replays: nothing goes through the host."""
    h = rng.standard_normal(300).astype(np.float16)
    replay.forget()
    before = replay.counts["replayed"]
    got = [nk.max(cuda.to_device(h)) for _ in range(3)]
    assert replay.counts["replayed"] - before == 2
    for g in got:
        assert hasattr(g, "copy_to_host") and g.shape == () and g.dtype == np.float16
        assert g.copy_to_host()[()] == h.max()


@pytest.mark.parametrize("name, kw, reference, shape", [
    ("argmax", {}, np.argmax, (100,)),
    ("argmin", {"axis": 1}, lambda h: np.argmin(h, axis=1), (6, 40)),
    ("argmax", {"axis": 0}, lambda h: np.argmax(h, axis=0), (7, 5)),
    ("cumsum", {}, np.cumsum, (100,)),
    ("cumsum", {"axis": 1}, lambda h: np.cumsum(h, axis=1), (4, 50)),
], ids=["argmax", "argmin rows", "argmax columns", "cumsum", "cumsum rows"])
def test_a_one_launch_call_records_its_result_alone(name, kw, reference, shape):
    """A call that stores whole outputs in one launch allocates nothing but its result
    (an argmax writes its indices, not its value field; a scan of one tile a segment
    has no status words), so the result is the recording's whole allocation: a torch
    replay allocates it as the result, with no view beside a temporary
    (``replay._tensor_result``). Indices exact, float32 sums rtol 1e-5."""
    h = rng.standard_normal(shape).astype(np.float32)
    want = reference(h.astype(np.float64))
    for _ in range(2):
        got = _host(getattr(nk, name)(cuda.to_device(h), **kw))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    program = replay.latest[(name, "sim" if nk.backend().is_simulator else "device")]
    assert len(program.names) == 1  # one launch
    spec = program.result
    assert spec.offset == 0 and spec.dtype == (np.int64 if name.startswith("arg") else
                                               np.float32)
    assert program.total == -(-np.asarray(want).size * spec.dtype.itemsize
                              // replay.ALIGN) * replay.ALIGN


def test_all_nan_slices_after_a_clean_recording_still_raise_and_warn():
    """nanargmax and nanmax read their all-NaN flags on the host as a check: a replay
    reads them again after its launches and runs the call the ordinary way where a
    slice is all NaN, so such a slice still raises or warns (a replay recorded on
    clean data must not hand back a garbage index and -inf)."""
    clean = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    all_nan = np.array([[np.nan, np.nan], [3.0, 4.0]], np.float32)
    replay.forget()
    before = replay.counts["replayed"]
    for _ in range(3):
        got = nk.nanargmax(cuda.to_device(clean), axis=1)
    assert replay.counts["replayed"] - before == 2
    np.testing.assert_array_equal(got.copy_to_host(), [1, 1])
    with pytest.raises(ValueError, match="All-NaN slice encountered"):
        nk.nanargmax(cuda.to_device(all_nan), axis=1)
    nk.nanmax(cuda.to_device(clean), axis=1)
    with pytest.warns(RuntimeWarning, match="All-NaN slice encountered"):
        got = nk.nanmax(cuda.to_device(all_nan), axis=1)
    np.testing.assert_array_equal(got.copy_to_host(), [np.nan, 4.0])


def test_a_stream_a_gpu_would_refuse_is_refused_by_a_replay_too():
    x = np.arange(8, dtype=np.float32)
    replay.forget()
    nk.sum(cuda.to_device(x), stream=None)  # recorded with the keyword given
    for bad in ("bogus", 1.5, object()):
        with pytest.raises(TypeError, match="stream must be None"):
            nk.sum(cuda.to_device(x), stream=bad)


def test_a_new_signature_records_its_own_program():
    for shape in [(4, 33), (5, 33), (4, 32)]:  # each twice: recorded, then replayed
        assert _repeat(cuda.to_device, lambda x: nk.sum(x, axis=1),
                       lambda h: h.sum(axis=1), shape, times=2) == 1


@pytest.mark.parametrize("zeros", [(0.0, -0.0), (-0.0, 0.0), (np.float32(0.0), np.float32(-0.0))])
def test_a_zeros_sign_keys_its_own_program(zeros):
    """``0.0 == -0.0`` and they hash alike, but an ``initial`` of either gives its own
    answer (a product of positives with ``initial=-0.0`` is ``-0.0``): each records its
    own program, then each replays its own."""
    x = np.full(8, 2.0, np.float32)
    d = cuda.to_device(x)
    for initial in zeros + zeros:
        for call, ref in ((nk.prod, np.prod), (nk.max, np.max)):
            got = call(d if call is nk.prod else cuda.to_device(-x), initial=initial)
            want = ref(x if call is nk.prod else -x, initial=initial)
            assert np.signbit(got.copy_to_host()) == np.signbit(want)
    before = dict(replay.counts)
    nk.prod(d, initial=zeros[1])
    assert replay.counts["replayed"] == before["replayed"] + 1


@pytest.mark.parametrize("call", [
    lambda x, out: nk.nanmean(x, axis=1, out=out), lambda x, out: nk.var(x, axis=1, out=out),
    lambda x, out: nk.nanvar(x, axis=1, out=out), lambda x, out: nk.median(x, axis=1, out=out),
    lambda x, out: nk.nanmedian(x, axis=1, out=out)])
def test_a_call_that_warns_warns_every_time(call):
    """A call that warns is never replayed (a replay runs no Python): NaN into a
    device out= for slices of nothing, written by launches, warns on every call."""
    x, out = cuda.to_device(np.zeros((3, 0))), cuda.to_device(np.zeros(3))
    for _ in range(3):
        with pytest.warns(RuntimeWarning):
            call(x, out)
        assert np.isnan(out.copy_to_host()).all()


def test_a_check_past_the_pinned_buffer_refuses_as_on_a_gpu(monkeypatch):
    """A check's words go through the pinned buffer (``launch.PINNED_BYTES``) or are
    read by a plain copy, which refuses replay: under the simulator too, so that its
    replays are a GPU's (here a buffer of 64 bytes: nanmax's flags of 8 rows fit it,
    of 9 do not)."""
    from numbakern.runtime import views

    monkeypatch.setattr(views, "PINNED_BYTES", 64)
    for rows, replays in ((8, True), (9, False)):
        h = rng.standard_normal((rows, 5))
        d = cuda.to_device(h)
        before = dict(replay.counts)
        for _ in range(3):
            np.testing.assert_array_equal(nk.nanmax(d, axis=1).copy_to_host(), h.max(axis=1))
        refused = replay.counts["refused"] - before.get("refused", 0)
        assert refused == (0 if replays else 1)
        if replays:
            assert replay.counts["replayed"] - before.get("replayed", 0) == 2


def test_calls_that_cannot_replay_run_the_ordinary_way():
    h = rng.standard_normal((4, 40)).astype(np.float32)
    before = dict(replay.counts)
    for _ in range(2):
        nk.sum(h, axis=1)  # host input: its transfer is the call
    assert replay.counts["replayed"] == before.get("replayed", 0)


def test_numba_arrays_replay_on_the_stream_they_are_given():
    """The stream is no part of a program: calls on Numba device arrays given a
    ``stream=``, another each time, replay one recording."""
    streams = iter([cuda.stream(), cuda.default_stream(), cuda.stream()])

    def call(x):
        return nk.sum(x, axis=1, stream=next(streams))

    assert _repeat(cuda.to_device, call, lambda h: h.sum(axis=1), (4, 40)) == 2


class _TensorLike:
    """What the key reads of a CUDA tensor (``replay._tensor``)."""

    __module__ = "torch.fake"
    is_cuda, dtype, shape = True, np.dtype(np.float32), (8,)

    def __init__(self, address):
        self.address = address

    def data_ptr(self):
        return self.address

    def stride(self):
        return (1,)

    def get_device(self):
        return 0

    def is_neg(self):
        return False


def test_tensors_and_cupy_arrays_given_a_stream_run_the_ordinary_way(monkeypatch):
    """Their allocators order memory by their own current stream, which a replay
    does not set: with ``stream=`` they are never recorded, never replayed."""
    monkeypatch.setattr(replay, "_device_of", lambda kind: 0)
    runs = []

    @replay.replayable
    def fn(x, *, stream=None):
        runs.append(stream)
        return x

    before = dict(replay.counts)
    for stream in (5, 5, 7):
        fn(_TensorLike(0x1000), stream=stream)
    assert runs == [5, 5, 7] and not fn.replay_table
    assert replay.counts == before


# (name, call into out, float64 reference, shape of x, shape of out)
OUT_CASES = [
    ("row sum", lambda x, out: nk.sum(x, axis=1, out=out), lambda h: h.sum(axis=1),
     (4, 40), (4,)),
    ("softmax", lambda x, out: nk.softmax(x, out=out), _softmax, (6, 50), (6, 50)),
    ("cumsum", lambda x, out: nk.cumsum(x, out=out), np.cumsum, (300,), (300,)),
    ("logcumsumexp", lambda x, out: nk.logcumsumexp(x, axis=1, out=out),
     lambda h: np.logaddexp.accumulate(h, axis=1), (4, 40), (4, 40)),
]


@pytest.mark.parametrize("name, call, reference, shape, out_shape", OUT_CASES,
                         ids=[c[0] for c in OUT_CASES])
def test_calls_into_out_replay_and_return_the_callers_out(name, call, reference, shape,
                                                           out_shape):
    replay.forget()
    before = replay.counts["replayed"]
    kept = []
    for _ in range(3):
        h = rng.standard_normal(shape).astype(np.float32)
        out = cuda.device_array(out_shape, np.float32)
        assert call(cuda.to_device(h), out) is out
        kept.append((out, reference(h.astype(np.float64))))
    for out, expected in kept:
        _check(out.copy_to_host(), expected)
    assert replay.counts["replayed"] - before == 2


@pytest.mark.parametrize("view", [lambda a: a[:, 1], lambda a: a[::-1, 2]],
                         ids=["column", "reversed column"])
def test_a_strided_out_replays(view):
    """A reduction's out in any layout is written by a launch (the strided cast), so
    its calls replay, each into the caller's own view."""
    replay.forget()
    before = replay.counts["replayed"]
    kept = []
    for _ in range(3):
        h = rng.standard_normal((5, 40)).astype(np.float32)
        base = cuda.device_array((5, 3), np.float64)
        out = view(base)
        assert nk.sum(cuda.to_device(h), axis=1, out=out) is out
        kept.append((base, h.astype(np.float64).sum(axis=1)))
    for base, expected in kept:  # Numba copies no view of negative strides back
        _check(view(base.copy_to_host()), expected)
    assert replay.counts["replayed"] - before == 2


def test_an_out_over_an_input_at_replay_runs_the_ordinary_way():
    """The arguments of a replayed out= call are as apart as when it was recorded:
    an out that overlaps x in part gets the ordinary path's error, out=x (in place)
    its answer."""
    replay.forget()
    h = rng.standard_normal((2, 64)).astype(np.float32)
    for _ in range(2):  # recorded, then replayed
        nk.softmax(cuda.to_device(h), out=cuda.device_array((2, 64), np.float32))
    before = replay.counts["replayed"]
    memory = cuda.to_device(np.concatenate([h.ravel(), h.ravel()]))
    x, shifted = memory[:128].reshape(2, 64), memory[64:192].reshape(2, 64)
    with pytest.raises(ValueError, match="overlaps x in part"):
        nk.softmax(x, out=shifted)
    assert nk.softmax(x, out=x) is x
    _check(x.copy_to_host(), _softmax(h.astype(np.float64)))
    assert replay.counts["replayed"] == before


def test_an_array_passed_twice_is_one_input_and_replays_in_place():
    """out=x: one array in two places replays (its recorded addresses serve both), and
    hands back the object passed as out, even a second object over the same memory
    (keyed apart from one object passed twice: 2 recordings, 2 replays)."""
    replay.forget()
    before = replay.counts["replayed"]
    for view in (lambda a: a, lambda a: a, lambda a: a[:], lambda a: a[:]):
        h = rng.standard_normal((2, 64)).astype(np.float32)
        x = cuda.to_device(h)
        out = view(x)
        assert nk.softmax(x, out=out) is out
        _check(x.copy_to_host(), _softmax(h.astype(np.float64)))
    assert replay.counts["replayed"] - before == 2


def test_a_recording_in_place_never_serves_a_call_apart_nor_the_other_way():
    """Which arguments are one array is part of the key: a program recorded in place
    would write over x of a call with its own out, and one recorded apart would leave
    an in-place call's x alone."""
    replay.forget()
    before = dict(replay.counts)
    for in_place in (True, True, False, False, True):
        h = rng.standard_normal((2, 64)).astype(np.float32)
        x = cuda.to_device(h)
        out = x if in_place else cuda.device_array((2, 64), np.float32)
        nk.softmax(x, out=out)
        _check(out.copy_to_host(), _softmax(h.astype(np.float64)))
        if not in_place:
            np.testing.assert_array_equal(x.copy_to_host(), h)
    # one recording each way; the other three calls replayed their own
    assert replay.counts["recorded"] - before.get("recorded", 0) == 2
    assert replay.counts["replayed"] - before.get("replayed", 0) == 3


def test_an_array_passed_twice_to_a_checking_call_never_replays():
    """nanmax(x, ..., out=x): a replay would write -inf over the all-NaN row before
    reading the all-NaN flags, and the ordinary re-run that the failed check starts
    would find no NaN to warn of."""
    replay.forget()
    before = replay.counts["replayed"]
    for rows in ([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [1.0, np.nan, 3.0]):
        x = cuda.to_device(np.array(rows, np.float32)[:, None])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = nk.nanmax(x, axis=1, keepdims=True, out=x)
        assert got is x
        np.testing.assert_array_equal(x.copy_to_host().ravel(), rows)
        assert [str(w.message) for w in caught] == \
            (["All-NaN slice encountered"] if np.isnan(rows[1]) else [])
    assert replay.counts["replayed"] == before


def test_a_reading_of_one_array_twice_never_serves_arrays_apart():
    """softmax_backward(y, y): one input read in two places, recorded and replayed; a
    later call with its own dy (the same layouts) is keyed apart, by the general path
    and by the table of repeated calls on one array type (runtime/tensor_table.py),
    which would otherwise read y for dy."""
    replay.forget()

    def want(hy, hd):
        return hy * (hd - (hy * hd).sum(-1, keepdims=True))

    for apart in (False, False, True, True):
        hy, hd = (rng.random((4, 40)).astype(np.float32) for _ in range(2))
        y = cuda.to_device(hy)
        dy = cuda.to_device(hd) if apart else y
        got = nk.softmax_backward(y, dy).copy_to_host()
        np.testing.assert_allclose(got, want(hy, hd if apart else hy), rtol=1e-5,
                                   atol=1e-6)


@cuda.jit
def _add_one(a):
    if cuda.threadIdx.x == 0 and cuda.blockIdx.x == 0:
        a[0] += 1


class _PlusOne(nk.TwoPass):
    """A user's grid strategy whose own kernel, launched with Numba's API, adds 1."""

    name = "plus_one_test"

    def reduce(self, job):
        fields = super().reduce(job)
        _add_one[1, 32](fields[0])
        return fields


def test_a_strategys_own_kernel_launch_is_never_dropped_by_a_replay():
    x = cuda.to_device(np.arange(1000, dtype=np.float64))
    strategy = _PlusOne(nk.WarpShuffle(32), blocks=2)
    before = dict(replay.counts)
    for _ in range(3):
        assert nk.sum(x, strategy=strategy).copy_to_host() == 499501.0
    assert replay.counts["replayed"] == before.get("replayed", 0)
    assert replay.counts["refused"] - before.get("refused", 0) == 1  # then remembered
    nk.sum(x)  # numbakern's own launches (under the simulator, through Numba's) record
    assert replay.counts["recorded"] > before.get("recorded", 0) or \
        replay.counts["replayed"] > before.get("replayed", 0)


def test_disabled_runs_the_ordinary_way():
    x = cuda.to_device(rng.standard_normal((4, 40)).astype(np.float32))
    nk.sum(x, axis=1)
    before = dict(replay.counts)
    with replay.disabled():
        nk.sum(x, axis=1)
    assert dict(replay.counts) == before


def test_a_failing_call_records_nothing():
    x = cuda.to_device(np.ones((4, 40), np.float32))
    for _ in range(2):
        with pytest.raises(nk.AxisError):
            nk.sum(x, axis=5)


def test_inputs_sharing_memory_are_never_recorded():
    """Offsets recorded from one input would replay into another (found in review)."""
    nk.softmax_backward.replay_table.clear()  # only this test's signatures below
    base = rng.standard_normal((8, 40)).astype(np.float32)
    y0 = cuda.to_device(base)
    nk.softmax_backward(y0[::2], y0[1::2])  # interleaved rows of one array: refused
    for _ in range(2):
        hy, hd = (rng.random((4, 40)).astype(np.float32) for _ in range(2))
        y = cuda.to_device(np.repeat(hy, 2, axis=0))[::2]  # the same signature
        dy = cuda.to_device(np.repeat(hd, 2, axis=0))[1::2]
        got = nk.softmax_backward(y, dy).copy_to_host()
        want = hy * (hd - (hy * hd).sum(-1, keepdims=True))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    program = next(p for p, _ in nk.softmax_backward.replay_table.values())
    assert program.why == "inputs that share memory"


def test_an_argument_that_cannot_be_hashed_reaches_the_function():
    x = cuda.to_device(np.ones((3, 4), np.float32))
    axis = np.zeros((), dtype=[("a", "i4")])[()]  # a structured scalar: unhashable
    with pytest.raises(TypeError, match="axis"):
        nk.sum(x, axis=axis)


def test_two_field_scans_return_a_tuple_and_replay():
    x = cuda.to_device(rng.standard_normal(100).astype(np.float32))
    before = replay.counts["replayed"]
    for _ in range(2):
        values, indices = result = nk.associative_scan(x, "argmax")
        assert isinstance(result, tuple)
        h = x.copy_to_host()
        np.testing.assert_array_equal(values.copy_to_host(), np.maximum.accumulate(h))
    assert replay.counts["replayed"] == before + 1


# --- the GPU step's parameter patching, without a GPU (driver and allocation stubbed) ---


def test_replay_patches_new_addresses_into_the_recorded_parameters(monkeypatch):
    launched = []

    class Launcher:
        def entry(self, key, count):
            return 0xF00, None, None

    monkeypatch.setattr(replay, "SIMULATOR", False)
    monkeypatch.setattr(replay, "launcher_for", lambda kernel: Launcher())
    monkeypatch.setattr(replay, "driver_launch", lambda *a: launched.append(a[:4]))
    monkeypatch.setattr(replay, "_stream_of", lambda kind: 0)
    monkeypatch.setattr(replay.Program, "_allocate", lambda self: (None, 0xA0000))

    x = replay._Array("device", 0x10000, np.dtype(np.float32), (8,), (4,))
    recording = replay.Recording([x])
    partials = launch.DeviceBuffer(0x50000, (3,), (4,), np.float32)
    out = launch.DeviceBuffer(0x60000, (1,), (4,), np.float32)
    recording.allocate(partials)
    recording.allocate(out)
    view = launch.DeviceBuffer(0x10000 + 28, (8,), (-4,), np.float32)  # x[::-1]
    recording.launch("kernel", 2, 32, 0, (view, partials, np.int64(8)))
    recording.launch("kernel", 1, 32, 0, (partials, out))
    program = recording.program(None)

    program.run([0x90000])  # x's new address
    assert launched == [(0xF00, 2, 32, 0), (0xF00, 1, 32, 0)]
    # x[::-1] starts 28 bytes into x; partials at offset 0 of the one allocation, out
    # at the next 256-byte boundary
    assert program.steps[0].values.tolist() == [0, 0, 8, 4, 0x90000 + 28, 8, -4,
                                                0, 0, 3, 4, 0xA0000, 3, 4, 8]
    assert program.steps[1].values[[4, 11]].tolist() == [0xA0000, 0xA0000 + 256]


def test_a_call_given_a_stream_records_and_replays_on_the_stream_given(monkeypatch):
    """A launch on another stream than the call's ``stream=`` refuses the recording;
    a replay launches on the stream its own call names (a raw handle, a CuPy stream's
    ``ptr``)."""
    launched = []

    class Launcher:
        def entry(self, key, count):
            return 0xF00, None, None

    class CupyStream:
        ptr = 0xC0

    monkeypatch.setattr(replay, "SIMULATOR", False)
    monkeypatch.setattr(replay, "launcher_for", lambda kernel: Launcher())
    monkeypatch.setattr(replay, "driver_launch", lambda *a: launched.append(a[3]))
    monkeypatch.setattr(replay.Program, "_allocate", lambda self: (None, 0xA0000))
    x = replay._Array("device", 0x10000, np.dtype(np.float32), (8,), (4,))

    def recording(stream):
        r = replay.Recording([x])
        r.launch("kernel", 1, 32, stream, (launch.DeviceBuffer(0x10000, (8,), (4,),
                                                               np.float32),))
        return r

    with pytest.raises(replay._Flaw, match="a launch or a check on another stream"):
        recording(0).program(None, 0xB0)
    program = recording(0xB0).program(None, 0xB0)
    program.run([0x90000], (), 0xD0)
    program.run([0x90000], (), CupyStream())
    assert launched == [0xD0, 0xC0]


def test_a_check_is_read_after_the_launches_before_it_on_the_replays_stream(monkeypatch):
    """A program's check (``views.checked_words``) reads its words where the recording
    did: after the launches before it, at the patched address, on the stream the
    replay launches on; words that fail raise ``Unpassed`` (the caller then runs the
    call the ordinary way). A check on another stream than the call's refuses the
    recording."""
    events, words = [], [np.zeros(2, np.int64)]

    class Launcher:
        def entry(self, key, count):
            return 0xF00, None, None

    def read_small(ptr, nbytes, stream):
        events.append(("read", ptr, nbytes, stream))
        return words[0].view(np.uint8).copy()

    monkeypatch.setattr(replay, "SIMULATOR", False)
    monkeypatch.setattr(replay, "launcher_for", lambda kernel: Launcher())
    monkeypatch.setattr(replay, "driver_launch", lambda *a: events.append(("launch", a[3])))
    monkeypatch.setattr(replay, "read_small", read_small)
    monkeypatch.setattr(replay.Program, "_allocate", lambda self: (None, 0xA0000))
    x = replay._Array("device", 0x10000, np.dtype(np.float32), (8,), (4,))
    report = launch.DeviceBuffer(0x50000, (2,), (8,), np.int64)

    def recording(check_stream):
        r = replay.Recording([x])
        r.allocate(report)
        r.launch("kernel", 1, 32, 0xB0, (launch.DeviceBuffer(0x10000, (8,), (4,), np.float32),
                                         report))
        r.check(report, check_stream, lambda w: not w.any())
        return r

    with pytest.raises(replay._Flaw, match="a launch or a check on another stream"):
        recording(0).program(None, 0xB0)
    program = recording(0xB0).program(None, 0xB0)
    assert program.names[1] == "check"
    program.run([0x90000], (), 0xD0)
    assert events == [("launch", 0xD0), ("read", 0xA0000, 16, 0xD0)]
    words[0] = np.array([0, 3], np.int64)
    with pytest.raises(replay.Unpassed):
        program.run([0x90000], (), 0xD0)


def test_an_address_from_elsewhere_refuses_replay():
    x = replay._Array("sim", 0x10000, np.dtype(np.float32), (8,), (4,))
    layout = replay._Layout([x], [(0x50000, 12)])
    assert layout.locate(0x10000 + 4) == (0, 4)
    assert layout.locate(0x50000 + 8) == (1, 8)
    with pytest.raises(replay._Flaw):
        layout.locate(0x70000)


# --- on a GPU: CuPy input, the driver, CuPy's current stream -----------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("name, call, reference, shape", CASES + SORT_CASES,
                         ids=[c[0] for c in CASES + SORT_CASES])
def test_cupy_calls_replay_with_the_ordinary_answers(name, call, reference, shape):
    cupy = pytest.importorskip("cupy")
    assert _repeat(cupy.asarray, call, reference, shape) == 2


@pytest.mark.gpu
def test_named_tuples_replay_as_their_own_type():
    cupy = pytest.importorskip("cupy")
    replay.forget()
    before = replay.counts["replayed"]
    x = cupy.asarray(rng.standard_normal((3, 400)).astype(np.float32))
    for _ in range(3):
        top = nk.topk(x, 4)
        assert type(top).__name__ == "TopK" and isinstance(top.values, cupy.ndarray)
    assert replay.counts["replayed"] == before + 2


@pytest.mark.gpu
def test_cupy_scalar_reductions_replay_on_the_current_stream():
    cupy = pytest.importorskip("cupy")
    with cupy.cuda.Stream(non_blocking=True):
        assert _repeat(cupy.asarray, nk.sum, np.sum, (1 << 20,)) == 2
        assert _repeat(cupy.asarray, nk.argmax, np.argmax, (1000,)) == 2


@pytest.mark.gpu
@pytest.mark.parametrize("call", [lambda x: nk.sum(x, axis=1),
                                  lambda x: nk.sum(x.astype(np.float32), axis=1,
                                                   dtype=np.float16)],
                         ids=["float16", "dtype=float16"])
def test_cupy_results_cast_after_the_kernels_replay_correctly(call):
    """A CuPy cast after the kernels allocates outside the recording; it must never
    take memory a recorded temporary freed (found in review)."""
    cupy = pytest.importorskip("cupy")
    for _ in range(3):  # one long row per output: split rows, partials, then the cast
        h = rng.standard_normal((3, 300_000)).astype(np.float16)
        got = cupy.asnumpy(call(cupy.asarray(h)))
        np.testing.assert_allclose(got.astype(np.float64), h.astype(np.float64).sum(axis=1),
                                   rtol=2e-3, atol=0.5)


# --- torch tensors: keyed before translation, replayed with torch's memory ------------


def _torch_host(r):
    if isinstance(r, tuple):
        return tuple(_torch_host(e) for e in r)
    return r.cpu().numpy()


def _repeat_torch(torch, call, reference, shape, times=3):
    """:func:`_repeat` for CUDA tensors; results must come back as CUDA tensors."""
    before = replay.counts["replayed"]
    kept = []
    for _ in range(times):
        h = rng.standard_normal(shape).astype(np.float32)
        kept.append((call(torch.from_numpy(h).cuda()), reference(h.astype(np.float64))))
    for result, expected in kept:
        for r in result if isinstance(result, tuple) else (result,):
            assert isinstance(r, torch.Tensor) and r.is_cuda
        _check(_torch_host(result), expected)
    return replay.counts["replayed"] - before


TORCH_CASES = [c for c in CASES + SORT_CASES if c[0] != "sliced row sum"]  # no negative
# strides in torch


@pytest.mark.gpu
@pytest.mark.parametrize("name, call, reference, shape", TORCH_CASES,
                         ids=[c[0] for c in TORCH_CASES])
def test_torch_calls_replay_with_the_ordinary_answers(name, call, reference, shape):
    torch = pytest.importorskip("torch")
    assert _repeat_torch(torch, call, reference, shape) == 2


@pytest.mark.gpu
def test_torch_replays_run_on_torchs_current_stream():
    torch = pytest.importorskip("torch")
    side = torch.cuda.Stream()
    n = 1 << 22
    for _ in range(3):
        x = torch.zeros(n, device="cuda")
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.cuda._sleep(20_000_000)  # the fill lands long after the call returns
            x.fill_(1.0)
            total = nk.sum(x)
        side.synchronize()
        assert total.item() == n


@pytest.mark.gpu
def test_numba_replays_run_on_the_stream_given():
    """A replayed call on Numba device arrays with ``stream=`` is ordered after the
    work queued on that stream before it (a kernel that sleeps, then fills x)."""

    @cuda.jit
    def late_fill(x):
        i = cuda.grid(1)
        if i == 0:
            cuda.nanosleep(1_000_000)
        cuda.syncthreads()
        if i < x.size:
            x[i] = 1.0

    rows = 1024
    side = cuda.stream()
    replay.forget()
    before = replay.counts["replayed"]
    for _ in range(3):
        x = cuda.device_array((rows, rows), np.float32, stream=side)
        flat = x.reshape(rows * rows)
        for _ in range(20):  # ~20 ms of sleeping blocks ahead of the fill
            late_fill[1, 32, side](flat[:32])
        late_fill[rows * rows // 256, 256, side](flat)
        sums = nk.sum(x, axis=1, stream=side)
        host = sums.copy_to_host(stream=side)
        side.synchronize()
        np.testing.assert_array_equal(host, np.full(rows, rows))
    assert replay.counts["replayed"] - before == 2


@pytest.mark.gpu
def test_torch_bfloat16_bits_replay_as_bfloat16():
    torch = pytest.importorskip("torch")
    before = replay.counts["replayed"]
    for _ in range(3):
        x = torch.randn(64, 300, device="cuda").to(torch.bfloat16)
        got = nk.softmax(x)
        assert got.dtype == torch.bfloat16
        torch.testing.assert_close(got.float(), torch.softmax(x.float(), -1),
                                   rtol=1e-2, atol=1e-3)
    assert replay.counts["replayed"] - before == 2


@pytest.mark.gpu
def test_cupy_outs_replay_where_the_launches_write_them():
    """A CuPy out that a kernel writes (softmax's; a reduction's out of any dtype in
    any layout, the accumulator cast into it by a launch) replays, right each time."""
    cupy = pytest.importorskip("cupy")
    replay.forget()
    sums = lambda h: h.sum(axis=1)  # noqa: E731
    for call, reference, replays in [
            (lambda x, out: nk.softmax(x, out=out), _softmax, 2),
            (lambda x, out: nk.sum(x, axis=1, out=out[0, :6]), sums, 2),
            (lambda x, out: nk.sum(x, axis=1, out=out[:, 0]), sums, 2),
            (lambda x, out: nk.sum(x, axis=1, out=out[0, :6].astype(np.float64)), sums, 2)]:
        before = replay.counts["replayed"]
        for _ in range(3):
            h = rng.standard_normal((6, 50)).astype(np.float32)
            out = cupy.empty((6, 50), np.float32)
            got = call(cupy.asarray(h), out)
            _check(cupy.asnumpy(got), reference(h.astype(np.float64)))
        assert replay.counts["replayed"] - before == replays


@pytest.mark.gpu
def test_torch_outs_replay_as_the_callers_tensor_and_never_one_that_requires_grad():
    torch = pytest.importorskip("torch")
    replay.forget()
    before = replay.counts["replayed"]
    for _ in range(3):
        x = torch.randn(4, 64, device="cuda")
        out = torch.empty_like(x)
        version = out._version
        assert nk.softmax(x, out=out) is out
        assert out._version > version  # replayed too: autograd sees the write
        torch.testing.assert_close(out, torch.softmax(x, -1), rtol=1e-5, atol=1e-6)
    assert replay.counts["replayed"] - before == 2
    with pytest.raises(ValueError, match="requires grad"):
        nk.softmax(x, out=torch.empty_like(x, requires_grad=True))


def test_cpu_tensors_are_not_keyed():
    """A CPU tensor's contents are the input: such calls run the ordinary way."""
    torch = pytest.importorskip("torch")
    before = dict(replay.counts)
    for _ in range(3):
        h = rng.standard_normal(100).astype(np.float32)
        got = nk.sum(torch.from_numpy(h))
        assert isinstance(got, torch.Tensor)
        np.testing.assert_allclose(got.numpy(), h.astype(np.float64).sum(), rtol=1e-5)
    assert replay.counts == before
