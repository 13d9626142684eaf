"""Every built-in op's combine, map and finish compile in nopython mode.

The simulator runs them as plain Python, so an op calling an uncompilable helper passes
every simulator test and fails only on a GPU; compiling them with ``numba.njit`` on the
CPU catches that here.
"""

import numba
import numpy as np
import pytest

import numbakern.ops as ops
import numbakern.ops.products as products
from numbakern.ops import Op

BUILTIN_OPS = sorted(
    {id(v): v for module in (ops, products) for v in vars(module).values()
     if isinstance(v, Op)}.values(), key=lambda op: op.name
) + [op for nan in (False, True) for op in products.rounded_ops("float32", nan)]
# (the float16 ones differ only in the type they round to, which Numba's CPU target
# cannot compile; the GPU tests run them)


def _states(op, compiled_map):
    """Two element states of ``op`` as a kernel holds them (mapped, in the state dtype),
    NaN among the inputs where the op takes floats."""
    if "f" in op.kinds:
        values = (np.float64(2.5), np.float64("nan"))
    else:
        values = (np.int64(5), np.int64(-3))
    if op.fields >= 2:
        return [compiled_map(v, np.int64(i)) for i, v in enumerate(values)]
    state = op.result_dtype_for(values[0].dtype).type  # a one-field state is the result's
    if op.map is None:
        return [(state(v),) for v in values]
    return [(state(compiled_map(v, np.int64(i))),) for i, v in enumerate(values)]


@pytest.mark.parametrize("op", BUILTIN_OPS, ids=lambda op: op.name)
def test_combine_and_map_compile_and_agree_with_python(op):
    compiled_map = numba.njit(op.map) if op.map is not None else None
    a, b = _states(op, compiled_map)
    got = numba.njit(op.combine)(*a, *b)
    want = op.combine(*a, *b)
    np.testing.assert_array_equal(np.asarray(got, dtype=float), np.asarray(want, dtype=float))


@pytest.mark.parametrize("op", [op for op in BUILTIN_OPS if op.finish is not None],
                         ids=lambda op: op.name)
def test_finish_compiles_and_agrees_with_python(op):
    state = numba.njit(op.map)(np.float64(-6.0), np.int64(0))
    assert numba.njit(op.finish)(*state) == op.finish(*state) == -6.0


@pytest.mark.parametrize("op", [op for op in BUILTIN_OPS if op.fields > 2], ids=lambda op: op.name)
def test_n_field_kit_functions_compile_and_move_every_field(op):
    """The kit's generated N-field identity, combine, store and load (all but the
    shuffles, which only the CUDA target has) compile with ``numba.njit`` and move
    every field."""
    from numbakern.ops.state import _identity_values, n_field_sources

    dtypes = (np.dtype(np.int64),) + (np.dtype(np.float64),) * (op.fields - 1)
    values = _identity_values(op, dtypes)
    env = {"f": numba.njit(op.combine)}
    for k, d in enumerate(dtypes):
        env[f"t{k}"], env[f"i{k}"] = numba.from_dtype(d), values[k]
    kit = {}
    for name, source in n_field_sources(op.fields).items():
        if name.startswith("shfl"):
            continue
        namespace = dict(env)
        exec(source, namespace)
        kit[name] = numba.njit(namespace[name])
    mapped = numba.njit(op.map)
    a, b = mapped(np.float64(2.0), np.int64(0)), mapped(np.float64(5.0), np.int64(1))
    assert kit["identity"]() == values
    both = kit["combine"](a, b)
    assert both == tuple(op.combine(*a, *b))
    assert kit["combine"](kit["identity"](), both) == both
    arrays = tuple(np.zeros(3, d) for d in dtypes)
    kit["store"](arrays, arrays[0], 1, both)
    assert kit["load"](arrays, arrays[0], 1) == both
    assert [a[1] for a in arrays] == list(both) and not any(a[0] or a[2] for a in arrays)
