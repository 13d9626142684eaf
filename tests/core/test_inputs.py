"""Inputs a user may pass by mistake: each gets a clear Python exception naming the
argument, or (byte order, a warning-free simulator) NumPy's answer."""

import warnings

import numpy as np
import pytest

import numbakern as nk

X = np.random.default_rng(2).standard_normal((5, 40)).astype(np.float32)


@pytest.mark.parametrize("call", [
    lambda: nk.sum(X, dtype=np.complex128),
    lambda: nk.sum(X, dtype=object),
    lambda: nk.prod(X, dtype=np.longdouble),
    lambda: nk.cumsum(X, dtype=complex),
    lambda: nk.cumsum(X, dtype=object),
], ids=["sum-complex", "sum-object", "prod-float128", "cumsum-complex", "cumsum-object"])
def test_result_dtypes_the_kernels_cannot_hold_are_refused(call):
    with pytest.raises(TypeError, match="dtype="):
        call()


def test_a_dtype_that_is_not_one():
    with pytest.raises(TypeError, match="not a NumPy dtype"):
        nk.sum(X, dtype="nonsense")


@pytest.mark.parametrize("fn", [nk.sum, nk.max, nk.argmax, nk.cumsum])
def test_float128_input_is_refused(fn):
    with pytest.raises(TypeError, match="float128"):
        fn(np.arange(4, dtype=np.longdouble))


def test_masked_arrays_are_refused():
    with pytest.raises(TypeError, match="masked"):
        nk.sum(np.ma.array([1.0, 2.0, 3.0], mask=[0, 1, 0]))


@pytest.mark.parametrize("dtype", [">i4", ">f8", ">u2"])
def test_big_endian_input_gives_numpys_answer(dtype):
    x = np.arange(37, dtype=dtype)[::-1]
    assert nk.max(x) == x.max()
    assert nk.argmax(x) == x.argmax()
    assert nk.sum(x) == x.sum()


def test_np_matrix_is_refused_rather_than_answered_as_a_plain_array():
    with pytest.raises(TypeError, match="np.matrix"):
        nk.sum(np.matrix([[1.0, 2.0], [3.0, 4.0]]), axis=0)


@pytest.mark.parametrize("x", [None, np.array([1, "a"], dtype=object),
                               np.array([1, 2], dtype=object)])  # ints that fit: no "beyond"
def test_an_object_input_names_x(x):
    with pytest.raises(TypeError, match="^sum is not defined for x of dtype object"):
        nk.sum(x)


@pytest.mark.parametrize("x, shown", [(2**70, "1180591620717411303424"),
                                      ([1, 2**64], "18446744073709551616"),
                                      ([3, -2**63 - 1], "-9223372036854775809")])
def test_integers_beyond_64_bits_are_named_not_called_objects(x, shown):
    with pytest.raises(TypeError, match=f"^x holds Python integers beyond 64 bits \\(e.g. "
                                        f"{shown}\\)"):
        nk.sum(x)
    with pytest.raises(TypeError, match="^weights holds Python integers beyond 64 bits"):
        nk.bincount([0, 1], weights=[1, 2**70])
    assert nk.sum([1, 2**63]) == np.sum([1, 2**63])  # uint64 and float64: NumPy's


@pytest.mark.parametrize("dtype, shown", [(np.int32, "'int32'"), ("banana", "'banana'"),
                                          (12345, "12345")])
def test_softmax_dtype_error_names_the_dtype(dtype, shown):
    # (np.dtype("float64") == None is True: a dtype NumPy cannot read must not pass)
    with pytest.raises(TypeError, match=f"dtype must be float16, .*got {shown}"):
        nk.softmax(np.ones(4, np.float32), dtype=dtype)


def _pairs(map_):
    return nk.op(identity=(0.0, 0.0), fields=2, map=map_, name="pairs")(
        lambda a0, a1, b0, b1: (a0 + b0, a1 + b1))


@pytest.mark.parametrize("map_, returned", [(lambda v, i: (v, 1.0, 2.0), "x 3"),
                                            (lambda v, i: v, "float64")])
def test_a_map_returning_another_state_is_named(map_, returned):
    with pytest.raises(TypeError, match=f"'pairs': its map returns .*{returned}.*tuple of 2"):
        nk.reduce(np.arange(12.0), _pairs(map_))
    assert nk.reduce(np.arange(12.0), _pairs(lambda v, i: (v, 1.0))) == (66.0, 12.0)


def _always_raises(a, b):
    raise ValueError("boom")


@pytest.mark.parametrize("combine", [lambda a, b: None, _always_raises])
def test_a_combine_returning_nothing_is_named(combine):
    """One that raises on every path compiles to a None return too: the message
    says both."""
    with pytest.raises(TypeError, match=r"its combine returns nothing \(it returns None, "
                                        r"or raises on every path"):
        nk.reduce(np.arange(12.0), nk.op(identity=0.0, name="nothing")(combine))


@pytest.mark.parametrize("combine, shown", [(lambda a, b: "x", "str"),
                                            (lambda a, b: [a, b], "list")])
def test_a_combine_returning_what_is_not_a_number_is_named(combine, shown):
    """CPU Numba compiles a string or a list; no state field holds one."""
    op = nk.op(identity=0.0, name="odd")(combine)
    with pytest.raises(TypeError, match=f"'odd': its combine returns .*{shown}.*numbers"):
        nk.associative_scan(np.arange(50.0), op)
    with pytest.raises(TypeError, match="'pairs': its map returns .*str.*numbers"):
        nk.reduce(np.arange(12.0), _pairs(lambda v, i: (v, "s")))


def test_user_op_mistakes_are_caught_when_the_op_is_made():
    with pytest.raises(TypeError, match="identity"):
        nk.Op("s", lambda a, b: a + b, None)
    with pytest.raises(TypeError, match="2 arguments"):
        nk.Op("bad", lambda a: a, 0.0)
    with pytest.raises(TypeError, match=r"'sq': map must take 2 arguments \(value, index\)"):
        nk.Op("sq", lambda a, b: a + b, 0.0, map=lambda v: v * v)
    with pytest.raises(TypeError, match="combine must be a function, got 3"):
        nk.op(identity=0.0)(3)
    with pytest.raises(TypeError, match="map must be a function"):
        nk.Op("bad", lambda a, b: a + b, 0.0, map=3)
    with pytest.raises(TypeError, match=r"finish must take 2 arguments \(s0, s1\)"):
        nk.Op("bad", lambda a0, a1, b0, b1: (a0, a1), (0.0, 0.0), fields=2,
              map=lambda v, i: (v, v), finish=lambda s: s)
    with pytest.raises(TypeError, match="numbakern.op"):
        nk.reduce(X, lambda a, b: a + b)
    with pytest.raises(TypeError, match="numbakern.op"):
        nk.reduce(X, np.add)


def test_wrapping_integer_sums_are_silent_as_on_a_gpu():
    x = np.arange(300, dtype=np.int8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert nk.sum(x, dtype=np.int8) == np.sum(x, dtype=np.int8)


def test_a_bad_stream_is_refused_on_every_backend():
    for bad in ("bogus", True, np.bool_(False)):
        with pytest.raises(TypeError, match="stream must be None"):
            nk.sum(np.ones(3, np.float32), stream=bad)
    for bad in (-1, 1 << 70):  # no pointer
        with pytest.raises(ValueError, match=r"stream as a pointer must lie in \[0, 2\*\*64\)"):
            nk.cumsum(np.ones(3, np.float32), stream=bad)


def test_the_public_error_and_warning_classes_say_when_they_come():
    """Both had a one-line docstring: neither when they come nor why OutDtypeError is
    both a ValueError and a TypeError."""
    assert issubclass(nk.OutDtypeError, ValueError) and issubclass(nk.OutDtypeError,
                                                                   TypeError)
    for cls, words in ((nk.OutDtypeError, ("same_kind", "integer", "in place",
                                           "except ValueError", "UFuncTypeError")),
                       (nk.CopyWarning, ("strides", "where=", "NumPy input", "contiguous",
                                         "simplefilter"))):
        text = " ".join(cls.__doc__.split())
        assert all(word in text for word in words), (cls, words)
