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
    if op.fields == 2:
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
    # complex: Welford's (mean + 1j * M2) field; every other field is real
    np.testing.assert_array_equal(np.asarray(got, dtype=object).astype(complex),
                                  np.asarray(want, dtype=object).astype(complex))


@pytest.mark.parametrize("op", [op for op in BUILTIN_OPS if op.finish is not None],
                         ids=lambda op: op.name)
def test_finish_compiles_and_agrees_with_python(op):
    state = numba.njit(op.map)(np.float64(-6.0), np.int64(0))
    assert numba.njit(op.finish)(*state) == op.finish(*state) == -6.0
