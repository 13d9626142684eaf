"""The online softmax's combine (``strategies/online_softmax.py``) against its
definition, ``(max, s_a * exp(m_a - max) + s_b * exp(m_b - max))``, over the values
that set its traps: both maxima -inf, +inf, NaN, ties, +-0.0, and maxima far apart
(the smaller stretch's sum underflows to nothing). Python floats, NumPy float32 and
float64 scalars, as the simulator runs it."""

import itertools
import math

import numpy as np
import pytest

from numbakern.strategies.online_softmax import combine

MAXIMA = [-math.inf, math.inf, math.nan, 0.0, -0.0, 1.5, -3.25, 88.0, -1e30, 1e-40]
SUMS = [0.0, 1.0, 2.5, 1e30, math.inf, math.nan]


def definition(a0, a1, b0, b1):
    m = a0 if (a0 > b0 or a0 != a0) else b0
    if m == -math.inf:  # both stretches at the same maximum (the op's trap 1)
        return m, a1 + b1
    return m, a1 * math.exp(a0 - m) + b1 * math.exp(b0 - m)


def same(p, q):
    return (p != p and q != q) or (p == q and math.copysign(1, p) == math.copysign(1, q))


@pytest.mark.parametrize("kind", [float, np.float32, np.float64])
def test_combine_is_its_definition_on_special_values(kind):
    for a0, b0, a1, b1 in itertools.product(MAXIMA, MAXIMA, SUMS, SUMS):
        args = [kind(v) for v in (a0, a1, b0, b1)]
        with np.errstate(all="ignore"):
            want, got = definition(*args), combine(*args)
        assert all(same(w, g) for w, g in zip(want, got)), (args, want, got)


def test_a_row_holding_plus_inf_normalizes_to_nan_in_any_order():
    pairs = [(1.0, 1.0), (math.inf, 1.0), (-2.0, 1.0)]
    for order in itertools.permutations(pairs):
        m, s = order[0]
        for b in order[1:]:
            m, s = combine(m, s, *b)
        assert m == math.inf and math.isnan(s)
