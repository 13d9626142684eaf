"""A user's own ops: a constant pair identity, field dtypes inferred from the identity
(never an integer field for a float value), and clear errors for an identity a dtype
cannot hold."""

import math
import pickle
import re

import numpy as np
import pytest

import numbakern as nk


@nk.op(identity=(-np.inf, 0.0), fields=2, map=lambda v, i: (v, 1.0), name="max_sumexp")
def MAX_SUMEXP(a0, a1, b0, b1):
    m = max(a0, b0)
    if m == -math.inf:
        return m, a1 + b1
    return m, a1 * math.exp(a0 - m) + b1 * math.exp(b0 - m)


def test_a_two_field_op_with_a_constant_pair_identity():
    """Found by a new user: this op's sum field came back as int64 (2.0024 where the
    answer is 5.1294), and a constant pair identity was refused."""
    x = np.array([1.0, 2.0, 3.0, 0.5, -1.0])
    for data in (x, x.astype(np.int64).astype(np.float32)):
        m, s = nk.associative_scan(data, MAX_SUMEXP)
        assert s.dtype.kind == "f" and m.dtype.kind == "f"
        np.testing.assert_allclose(m + np.log(s), np.logaddexp.accumulate(
            data.astype(np.float64)), rtol=1e-6)
    m, s = nk.associative_scan(np.arange(4), MAX_SUMEXP)  # integers: float fields
    assert (m.dtype, s.dtype) == (np.float64, np.float64)
    np.testing.assert_allclose(m + np.log(s), np.logaddexp.accumulate(np.arange(4.0)))


def test_state_dtypes_says_the_field_dtypes():
    op = nk.Op("count_max", lambda a0, a1, b0, b1: (max(a0, b0), a1 + b1), (-np.inf, 0),
               fields=2, map=lambda v, i: (v, 1), state_dtypes=lambda d, dt=None:
               (np.float32, np.int32))
    m, c = nk.associative_scan(np.array([3.0, 1.0, 4.0]), op)
    assert (m.dtype, c.dtype) == (np.float32, np.int32)
    assert m.tolist() == [3.0, 3.0, 4.0] and c.tolist() == [1, 2, 3]


def test_an_identity_the_dtype_cannot_hold_is_a_clear_error():
    """Exactly: a value the cast would round, wrap or overflow is refused too, the
    empty reduction's result included."""
    smallest = nk.op(identity=np.inf, name="smallest")(lambda a, b: min(a, b))
    with pytest.raises(ValueError, match="'smallest': identity inf is not a value of "
                                         "dtype int64"):
        nk.reduce(np.arange(5), smallest)
    assert nk.reduce(np.arange(5.0), smallest) == 0.0
    big = nk.op(identity=300, name="big")(lambda a, b: a + b)
    with pytest.raises(ValueError, match="identity 300 is not a value of dtype int8"):
        nk.reduce(np.arange(5, dtype=np.int8), big, dtype=np.int8)
    half = nk.op(identity=2.5, name="half")(lambda a, b: a * b)
    for x in (np.array([3, 4]), np.array([], np.int64)):
        with pytest.raises(ValueError, match="identity 2.5 is not a value of dtype int64"):
            nk.reduce(x, half)
    huge = nk.op(identity=1e300, name="huge")(lambda a, b: min(a, b))
    with pytest.raises(ValueError, match="identity 1e\\+300 is not a value of dtype "
                                         "float32"):
        nk.reduce(np.array([5, 7], np.float32), huge)
    assert nk.reduce(np.array([5.0, 7.0]), huge) == 5.0


def test_a_combine_no_gpu_can_compile_is_refused_under_the_simulator_too():
    """The simulator runs any Python: a combine building a Python list would pass on a
    laptop and fail on a GPU, so it is compiled in nopython mode at first use."""

    @nk.op(identity=0.0)
    def listy(a, b):
        return sum([a, b, object()])

    with pytest.raises(TypeError, match="'listy': its combine does not compile"):
        nk.reduce(np.arange(5.0), listy)

    @nk.op(identity=0.0)
    def dicty(a, b):  # compiles on the CPU with Numba's runtime; CUDA has none
        d = {0: a}
        return d[0] + b

    @nk.op(identity=0.0)
    def numbers(a, b):
        return [a, b][0] + b

    for op in (dicty, numbers):
        with pytest.raises(TypeError, match=f"'{op.name}': its combine does not compile"):
            nk.reduce(np.arange(5.0), op)

    @nk.op(identity=0.0)
    def fine(a, b):
        return a + b

    assert float(nk.reduce(np.arange(5.0), fine)) == 10.0


@pytest.mark.parametrize("where", ["combine", "map"])
def test_a_numpy_ufunc_no_cuda_target_lowers_is_named_with_its_math_twin(where):
    """np.exp compiles on the CPU but Numba's CUDA target has no lowering for it (a
    bare KeyError deep in a GPU's kernel compile): refused at first use, everywhere,
    naming the op, the ufunc and what compiles instead."""
    if where == "combine":
        op = nk.Op("soft_add", lambda a, b: a + np.exp(b) - 1.0, 0.0)
    else:
        op = nk.Op("exp_sum", lambda a, b: a + b, 0.0, map=lambda v, i: np.sqrt(v))
    with pytest.raises(TypeError, match=rf"'{op.name}': its {where} calls NumPy's np\.\w+, "
                                        r"which Numba's CUDA target cannot compile .* use "
                                        r"math\.\w+ instead"):
        nk.reduce(np.arange(5.0), op)
    same = nk.Op("soft_add_math", lambda a, b: a + math.exp(b) - 1.0, 0.0)
    assert float(nk.reduce(np.zeros(4), same)) == 0.0


def test_a_combine_returning_another_number_of_fields_is_named():
    @nk.op(identity=(0.0, 0.0), fields=2, map=lambda v, i: (v, 1.0))
    def scalar_of_two(a0, a1, b0, b1):
        return a0 + b0

    @nk.op(identity=0.0)
    def pair_of_one(a, b):
        return a, b

    with pytest.raises(TypeError, match="'scalar_of_two': its combine returns float64; a "
                                        "state of 2 field"):
        nk.reduce(np.arange(4.0), scalar_of_two)
    with pytest.raises(TypeError, match="'pair_of_one': its combine returns UniTuple"):
        nk.reduce(np.arange(4.0), pair_of_one)


def test_state_dtypes_as_a_tuple_of_dtypes():
    @nk.op(identity=(0, 0, 0), fields=3, map=lambda v, i: (v, 1, v * v),
           state_dtypes=(np.int64,) * 3)
    def moments(a0, a1, a2, b0, b1, b2):
        return a0 + b0, a1 + b1, a2 + b2

    x = np.arange(10, dtype=np.int8)
    got = nk.reduce(x, moments)
    assert [np.asarray(g).dtype for g in got] == [np.int64] * 3
    assert [int(g) for g in got] == [45, 10, 285]
    with pytest.raises(TypeError, match="state_dtypes must be a function .* or a tuple of "
                                        "3 dtypes"):
        nk.op(identity=(0, 0, 0), fields=3, map=moments.map,
              state_dtypes=(np.int64,))(moments.combine)


@pytest.mark.parametrize("bad", [np.complex128, np.longdouble, object, "U3", "M8[s]", ">f8"])
def test_state_dtypes_a_state_cannot_hold_are_refused_naming_the_field(bad):
    """Found by a new user: a complex128 field computed a complex result (NumPy's
    ComplexWarnings by the hundred), a longdouble one met Numba's float128 error and
    an object one an AttributeError; a text one was taken when the op was made."""
    pair = dict(identity=(0.0, 0.0), fields=2, map=lambda v, i: (v, v))
    add = lambda a0, a1, b0, b1: (a0 + b0, a1 + b1)  # noqa: E731
    with pytest.raises(TypeError, match=re.escape(f"gives {np.dtype(bad)} for field 0")):
        nk.op(state_dtypes=(bad, np.float64), **pair)(add)
    given = nk.op(state_dtypes=lambda d, dt: (np.float64, bad), **pair)(add)  # made: a
    for call in (nk.reduce, nk.associative_scan):  # function's answer is checked at a call
        with pytest.raises(TypeError, match=re.escape(f"gives {np.dtype(bad)} for field 1")):
            call(np.arange(4.0), given)
    with pytest.raises(TypeError, match="state_dtypes must give 2 dtypes"):
        nk.reduce(np.arange(4.0), nk.op(state_dtypes=lambda d, dt: (np.float64,), **pair)(add))
    with pytest.raises(TypeError, match="state_dtypes must be a function .* or a tuple of 2"):
        nk.op(state_dtypes=np.float64, **pair)(add)  # a dtype is callable, not a function


def test_a_misspelt_empty_a_name_or_a_nan_flag_not_of_their_type_are_refused():
    """Found by a reviewer: empty="Raise" read as "identity" (the empty sum gave 0.0),
    name=5 made Op(5) and nan_propagating="yes" read as true."""
    add = lambda a, b: a + b  # noqa: E731
    for empty in ("Raise", None, (0, 1), [0], [[0], [1, 2]], "0"):
        with pytest.raises(ValueError, match="empty must be 'identity', 'raise' or a number"):
            nk.op(identity=0.0, empty=empty)(add)
    with pytest.raises(ValueError, match="an op of 2 fields takes empty='identity' or "
                                         "'raise', not a number"):  # nothing would read it
        nk.op(identity=(0.0, 0.0), fields=2, map=lambda v, i: (v, v), empty=5)(
            lambda a0, a1, b0, b1: (a0 + b0, a1 + b1))
    for name in (5, 0, False):  # a falsy one too, not the function's name instead
        with pytest.raises(TypeError, match=f"name must be a string, got {name}"):
            nk.op(identity=0.0, name=name)(add)
    with pytest.raises(TypeError, match="nan_propagating must be True or False"):
        nk.op(identity=0.0, nan_propagating="yes")(add)
    assert nk.reduce(np.zeros(0), nk.op(identity=0.0, empty=-1)(add)) == -1.0
    with pytest.raises(ValueError, match="zero-size array"):
        nk.reduce(np.zeros(0), nk.op(identity=0.0, empty="raise")(add))


def test_an_op_defined_where_functions_have_no_module():
    """A combine made by exec() in a namespace without __name__ has __module__ None:
    it is checked and runs like any other."""
    namespace = {"nk": nk}
    exec("@nk.op(identity=0.0)\ndef absmax(a, b):\n    return max(abs(a), abs(b))\n",
         namespace)
    assert namespace["absmax"].combine.__module__ is None
    assert nk.reduce(np.array([3.0, -7.0, 2.0]), namespace["absmax"]) == 7.0


# --- pickling: ops travel to other processes ------------------------------------------

USER_OPS = '''
import numbakern as nk

@nk.op(identity=0.0)
def absmax(a, b):
    return max(abs(a), abs(b))
'''


def test_every_library_op_pickles_by_name():
    """Built-in ops and the library's internal ones (argmax's, the float product's)
    come back as the same object, whatever closures their functions are."""
    import sys

    ops = {id(v): v for name, module in list(sys.modules.items())
           if name.startswith("numbakern.") for v in vars(module).values()
           if isinstance(v, nk.Op)}.values()
    assert {"sum", "argmax", "nanargmin", "moments"} <= {o.name for o in ops}
    for op in ops:
        assert pickle.loads(pickle.dumps(op)) is op, op


def test_a_module_level_user_op_pickles_by_name(tmp_path, monkeypatch):
    """``@nk.op`` replaces the module's function by the op, so pickle could not find
    the function by its name (a process pool could not take the op); the op itself
    is found there now."""
    (tmp_path / "user_ops_for_pickle.py").write_text(USER_OPS)
    monkeypatch.syspath_prepend(str(tmp_path))
    import user_ops_for_pickle as mine

    back = pickle.loads(pickle.dumps(mine.absmax))
    assert back is mine.absmax
    assert nk.reduce(np.array([1.0, -5.0, 3.0]), back) == 5.0


def _hypot(a, b):
    return math.sqrt(a * a + b * b)


def test_an_unnamed_op_pickles_by_its_fields():
    """An op kept under no module name (made by calling Op): its fields, functions by
    reference, no compiled device functions; the copy computes the same."""
    op = nk.Op("hypot_sum", _hypot, 0.0)
    x = np.array([3.0, 4.0, 12.0])
    assert nk.reduce(x, op) == 13.0  # compiles its device function
    back = pickle.loads(pickle.dumps(op))
    assert back is not op and back.name == "hypot_sum" and back._device == {}
    assert nk.reduce(x, back) == 13.0


def test_a_map_building_a_list_is_refused_under_the_simulator_too():
    op = nk.Op("listed", lambda a, b: a + b, 0.0, map=lambda v, i: [v, v][0])
    with pytest.raises(TypeError, match="'listed': its map does not compile .*no lists, "
                                        "dicts"):
        nk.reduce(np.arange(5.0), op)


@pytest.mark.parametrize("fields, error, match", [
    ({"kinds": "zz"}, ValueError, r"kinds must be one or more of the NumPy dtype kinds "
                                  r"'biuf'.*got 'zz'"),
    ({"kinds": ""}, ValueError, "kinds must be one or more of"),
    ({"kinds": 5}, TypeError, "kinds must be a string of NumPy dtype kinds .*got 5"),
    ({"atomic": "bogus"}, ValueError, r"atomic must be None or one of 'add', 'max', 'min', "
                                      r"'and_', 'or_', 'xor'.*got 'bogus'"),
    ({"atomic": "sub"}, ValueError, "atomic must be None or one of"),  # not a fold
    ({"atomic": 1}, TypeError, "atomic must be None or a string"),
])
def test_bad_kinds_or_atomic_is_refused_when_the_op_is_made(fields, error, match):
    """kinds='zz' was a bare KeyError at first use, kinds=5 'int is not iterable', and
    atomic='bogus' was taken silently (atomic_fold fell back to its CAS loop)."""
    with pytest.raises(error, match=match):
        nk.op(identity=0, **fields)(lambda a, b: a + b)


def test_the_atomics_an_op_may_name_are_those_atomic_fold_folds_with():
    from numbakern.ops import ATOMICS
    from numbakern.strategies import atomic_fold

    assert set(ATOMICS) == set(atomic_fold._NATIVE)


def _index_in_a_closure(v, i):
    def later():
        return i

    return v + later()


class _Maps:
    def of_index(self, v, i):
        return i

    def of_value(self, v, i):
        return v


@pytest.mark.parametrize("map_, reads", [
    (_Maps().of_index, True),  # self is not the index
    (_Maps().of_value, False),
    (None, False),
    (lambda v, i: v * v, False),
    (lambda v, i: i, True),
    (lambda v, i: v + 0 * i, True),
    (_index_in_a_closure, True),
    (lambda *vi: vi[0], True),  # where the code cannot tell: it may
])
def test_reads_index_tells_whether_the_map_reads_its_second_argument(map_, reads):
    """Where a map ignores the index, the kernels need not track it and a Dask chunk's
    own positions serve; where it may read it, both must."""
    assert nk.Op("probe", lambda a, b: a + b, 0.0, map=map_).reads_index is reads
    assert nk.ops.arg_op("max").reads_index and not nk.ops.BUILTIN["count_nonzero"].reads_index
