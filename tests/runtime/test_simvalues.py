"""Stores into integer arrays, atomics and fp16 functions, as a GPU computes them.

The same tests run on a real GPU and under Numba's simulator with numbakern's support
installed (:mod:`numbakern.runtime.simvalues`), against values written out from PTX's
``cvt`` (float to integer: toward zero, saturated; float32 and float64 into 8 bits
converted at 16, their low byte kept; NaN the sign bit alone from a float64 or into
64 bits, else 0), Numba's atomic signatures
(the operand cast to the array's dtype first) and PTX ``max.f16``/``min.f16``, and
measured on an H100 with numba-cuda 0.30.4: on a GPU they check the written values,
under the simulator the simulator.
"""

import numpy as np
import pytest
from numba import cuda

NAN, INF = float("nan"), float("inf")
# each exact in float32 and float64, so both sources convert alike
VALUES = [-1.0, 2.0**34, -(2.0**34), NAN, INF, -INF, 300.0, -129.0, 2.5, -2.5,
          70000.0, -70000.0, 2.0**31, 2.0**64, -0.0]
NAN_AT = 3
I16, I32, I64 = (np.iinfo(t) for t in (np.int16, np.int32, np.int64))
U16, U32, U64 = (np.iinfo(t).max for t in (np.uint16, np.uint32, np.uint64))
CONVERTED = {
    np.int8: [-1, -1, 0, 0, -1, 0, 44, 127, 2, -2, -1, 0, -1, -1, 0],
    np.uint8: [0, 255, 0, 0, 255, 0, 44, 0, 2, 0, 255, 0, 255, 255, 0],
    np.int16: [-1, I16.max, I16.min, I16.min, I16.max, I16.min, 300, -129, 2, -2,
               I16.max, I16.min, I16.max, I16.max, 0],
    np.uint16: [0, U16, 0, 1 << 15, U16, 0, 300, 0, 2, 0, U16, 0, U16, U16, 0],
    np.int32: [-1, I32.max, I32.min, I32.min, I32.max, I32.min, 300, -129, 2, -2,
               70000, -70000, I32.max, I32.max, 0],
    np.uint32: [0, U32, 0, 1 << 31, U32, 0, 300, 0, 2, 0, 70000, 0, 1 << 31, U32, 0],
    np.int64: [-1, 1 << 34, -(1 << 34), I64.min, I64.max, I64.min, 300, -129, 2, -2,
               70000, -70000, 1 << 31, I64.max, 0],
    np.uint64: [0, 1 << 34, 0, 1 << 63, U64, 0, 300, 0, 2, 0, 70000, 0, 1 << 31, U64, 0],
}


@cuda.jit
def store_kernel(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i]


# float16: VALUES past 65504 are inf; into 8 bits it saturates at 8 bits
FROM_FLOAT16 = {
    np.int8: [-1, 127, -128, 0, 127, -128, 127, -128, 2, -2, 127, -128, 127, 127, 0],
    np.uint8: [0, 255, 0, 0, 255, 0, 255, 0, 2, 0, 255, 0, 255, 255, 0],
    np.int32: [-1, I32.max, I32.min, 0, I32.max, I32.min, 300, -129, 2, -2, I32.max,
               I32.min, I32.max, I32.max, 0],
    np.uint64: [0, U64, 0, 1 << 63, U64, 0, 300, 0, 2, 0, U64, 0, U64, U64, 0],
}


def _stored(values, source, dtype):
    x = cuda.to_device(np.array(values, source))
    out = cuda.to_device(np.zeros(len(values), dtype))
    store_kernel[1, 32](x, out)
    return out.copy_to_host()


@pytest.mark.parametrize("dtype", list(CONVERTED), ids=lambda t: np.dtype(t).name)
def test_a_float64_stored_into_an_integer_array_converts_as_ptx_cvt(dtype):
    np.testing.assert_array_equal(_stored(VALUES, np.float64, dtype),
                                  np.array(CONVERTED[dtype], dtype))


@pytest.mark.parametrize("dtype", list(CONVERTED), ids=lambda t: np.dtype(t).name)
def test_a_float32_converts_alike_but_nan_is_0_below_64_bits(dtype):
    want = np.array(CONVERTED[dtype], dtype)
    if np.dtype(dtype).itemsize < 8:
        want[NAN_AT] = 0
    np.testing.assert_array_equal(_stored(VALUES, np.float32, dtype), want)


@pytest.mark.parametrize("dtype", list(FROM_FLOAT16), ids=lambda t: np.dtype(t).name)
def test_a_float16_saturates_at_the_destinations_width(dtype):
    np.testing.assert_array_equal(_stored(VALUES, np.float16, dtype),
                                  np.array(FROM_FLOAT16[dtype], dtype))


@cuda.jit
def atomic_casts_kernel(u, w, f, old):
    old[0] = cuda.atomic.add(u, 0, -1)
    old[1] = cuda.atomic.max(u, 1, -1)
    old[2] = cuda.atomic.min(u, 2, -1)
    old[3] = cuda.atomic.cas(u, 3, -1, 7)
    old[4] = cuda.atomic.and_(u, 4, -2)
    old[5] = cuda.atomic.inc(u, 5, 7)
    old[6] = cuda.atomic.dec(u, 6, 2)
    old[7] = cuda.atomic.add(w, 0, 2**31)
    cuda.atomic.nanmax(f, 0, 0.0)
    cuda.atomic.add(f, 1, 3e38)
    cuda.atomic.max(f, 2, 1.0)
    cuda.atomic.nanmax(f, 3, np.nan)
    cuda.atomic.nanmin(f, 4, 0.0)


def test_atomic_operands_are_cast_to_the_arrays_dtype_first():
    """Numba types each atomic ``(ary.dtype, ary, index, ary.dtype)``: -1 into uint32 is
    2**32 - 1 (greater than 5), 2**31 into int32 is -2**31; floats overflow to inf, a
    NaN operand of ``max`` is dropped and ``nanmax`` keeps -0.0 against 0.0."""
    u = cuda.to_device(np.array([0, 5, 5, U32, 5, 7, 3], np.uint32))
    w = cuda.to_device(np.array([1], np.int32))
    f = cuda.to_device(np.array([-0.0, 3e38, NAN, 1.0, -0.0], np.float32))
    old = cuda.to_device(np.zeros(8, np.int64))
    atomic_casts_kernel[1, 1](u, w, f, old)
    np.testing.assert_array_equal(u.copy_to_host(), [U32, U32, 5, 7, 4, 0, 2])
    np.testing.assert_array_equal(w.copy_to_host(), [-(2**31) + 1])
    np.testing.assert_array_equal(old.copy_to_host(), [0, 5, 5, U32, 5, 7, 3, 1])
    got = f.copy_to_host()
    np.testing.assert_array_equal(got, [-0.0, INF, NAN, 1.0, -0.0])
    assert np.signbit(got[0]) and np.signbit(got[4])


@cuda.jit
def fp16_kernel(x, out):
    out[0] = cuda.fp16.hfloor(x[0])
    out[1] = cuda.fp16.hmax(x[1], x[0])
    out[2] = cuda.fp16.hmax(x[0], x[1])
    out[3] = cuda.fp16.hmin(x[1], x[2])
    out[4] = cuda.fp16.hmax(x[3], x[4])
    out[5] = cuda.fp16.hmin(x[4], x[3])
    out[6] = cuda.fp16.hmax(x[1], x[1])


def test_fp16_floor_and_max_min_of_nan_and_zeros():
    """``hfloor`` rounds down; ``max.f16``/``min.f16`` give the number beside a NaN
    (two NaN: NaN) and order -0.0 below +0.0."""
    x = np.array([-1.5, NAN, 2.0, -0.0, 0.0], np.float16)
    out = cuda.to_device(np.zeros(7, np.float16))
    fp16_kernel[1, 1](cuda.to_device(x), out)
    got = out.copy_to_host()
    np.testing.assert_array_equal(got, np.array([-2.0, -1.5, -1.5, 2.0, 0.0, -0.0, NAN],
                                                np.float16))
    assert not np.signbit(got[4]) and np.signbit(got[5])


@cuda.jit
def dynamic_shared_kernel(out):
    d = cuda.shared.array(0, np.float32)
    out[0] = d.size


def test_dynamic_shared_memory_of_a_numpy_scalar_type():
    out = cuda.to_device(np.zeros(1, np.int64))
    dynamic_shared_kernel[1, 1, 0, 64](out)
    assert out.copy_to_host()[0] == 16


@pytest.mark.simulator
def test_the_simulators_own_code_is_told_from_the_kernels():
    """The sort tracer counts a kernel's loads and stores, not those an atomic makes
    inside the simulator (now in ``simvalues``)."""
    from numbakern.runtime import simvalues
    from numbakern.runtime.simulator import simulators_own

    from numbakern.teach import sort_trace

    assert not simulators_own(store_kernel.py_func.__code__)
    seen = []

    def spy(code):
        seen.append((code.co_filename, simulators_own(code)))
        return seen[-1][1]

    with pytest.MonkeyPatch.context() as m:
        m.setattr(sort_trace, "simulators_own", spy)
        sort_trace.trace_sort(np.arange(64, dtype=np.int32)[::-1].copy(), "radix")
    assert (simvalues.__file__, True) in seen  # the atomics' accesses, skipped
    assert any(not own for _, own in seen)  # the kernels' own, counted


def test_a_float_stored_from_the_host_converts_as_a_kernels_store():
    """A device array's ``__setitem__`` copies the value to the device and stores it
    by a kernel (numba-cuda's ``_assign_kernel``): the same ``cvt`` as a kernel's."""
    d = cuda.to_device(np.zeros(4, np.uint32))
    d[0], d[1], d[2], d[3] = -1.0, NAN, 1e20, 7.9
    np.testing.assert_array_equal(d.copy_to_host(), [0, 1 << 31, U32, 7])


@cuda.jit
def refused_atomic_kernel(which, h, f, i, z, m):
    if which == 0:
        cuda.atomic.add(h, 0, 1.0)
    elif which == 1:
        cuda.atomic.and_(f, 0, 1)
    elif which == 2:
        cuda.atomic.inc(i, 0, 1)
    elif which == 3:
        cuda.atomic.cas(f, 0, 1.0, 2.0)
    elif which == 4:
        cuda.atomic.add(z, (), 1)
    else:
        cuda.atomic.compare_and_swap(m, 0, 1)


@pytest.mark.simulator
@pytest.mark.parametrize("which, words", [
    (0, "add on a 1-d float16"), (1, "and_ on a 1-d float32"), (2, "inc on a 1-d int32"),
    (3, "cas on a 1-d float32"), (4, "add on a 0-d int32"),
    (5, "compare_and_swap on a 2-d array")])
def test_an_atomic_numba_does_not_compile_is_refused(which, words):
    """What a GPU refuses to compile (numba-cuda's ``cudadecl`` types each atomic for
    some dtypes of arrays of one dimension or more) is a TypeError here, not a result."""
    arrays = (np.zeros(1, np.float16), np.zeros(1, np.float32), np.zeros(1, np.int32),
              np.zeros((), np.int32), np.zeros((2, 2), np.int32))
    with pytest.raises(TypeError, match=f"cuda.atomic.{words}"):
        refused_atomic_kernel[1, 1](which, *arrays)
