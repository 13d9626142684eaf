"""The online softmax normalizer: (running max, scaled sum) as one associative op.

The lesson
----------
A numerically stable softmax divides ``exp(x_j - m)`` by ``s = sum_j exp(x_j - m)``,
where ``m = max_j x_j`` keeps every exponent at or below 0 (``exp`` overflows float32
near 88). Done the obvious way that is two reductions, one after the other: the
sum cannot start before the maximum is known. For a row held on chip that costs a
second block reduce; for a row too long to hold, a second read of the row.

Milakov and Gimelshein ("Online normalizer calculation for softmax", NVIDIA,
2018) carry both at once. The state of a stretch of the row is a pair ``(m, s)``:
its maximum, and the sum of ``exp(x_j - m)`` over it. Two neighbouring stretches
combine by rescaling each sum to the larger maximum:

    (m_a, s_a) (+) (m_b, s_b) = (m, s_a * exp(m_a - m) + s_b * exp(m_b - m)),
                                 m = max(m_a, m_b)

One element ``x`` is the stretch ``(x, 1)`` (``exp(x - x) = 1``); the empty stretch,
the identity, is ``(-inf, 0)``. In real arithmetic the combine is associative and
commutative, so any tree of combines gives the row's ``(max, sum)``: every block
strategy can reduce it, and one pass over the row gives both numbers. (In floating
point each rescale adds a rounding, as every tree order of a float sum does.)

Three traps, and what this combine does about them:

1. **Both maxima -inf.** ``exp(m_a - m)`` becomes ``exp(-inf - -inf) = exp(nan)``.
   An identity lane (``-inf, 0``) meeting an element ``-inf`` would poison the whole
   row with NaN, even a row such as ``[-inf, 1.0]`` whose softmax is ``[0, 1]``. So
   when ``m`` is -inf both stretches sit at the same maximum and the sums just add:
   ``(-inf, s_a + s_b)``.
2. **+inf.** A row holding +inf has no finite normalizer: ``exp(inf - inf)`` is
   NaN, the sum becomes NaN and so does every output, as PyTorch's softmax gives.
   The combine does not special-case it, so the NaN always appears, whatever the
   combine order.
3. **NaN.** The maximum propagates NaN (as ``numbakern.MAX`` and ``np.max`` do), and
   ``exp(x - nan)`` is NaN: a row holding a NaN normalizes to NaN.

Cost per combine: one ``exp`` (the stretch holding the larger maximum keeps its sum
as it is: ``exp(m - m)`` is 1). A thread that folds many elements does better by
folding a tile at a time (the tile's maximum, one rescale, one ``exp`` per
element): ``numbakern/kernels/softmax_rows.py`` does that, then block-reduces the threads'
pairs with this op.
"""

from __future__ import annotations

import math

import numpy as np

from numbakern.ops import Op

NEG_INF = -math.inf


def combine(a0, a1, b0, b1):
    """``(m_a, s_a) (+) (m_b, s_b)``: ``(max, sum rescaled to that max)``, with one
    ``exp``: the stretch that holds the maximum keeps its sum (``exp(m - m)`` is 1),
    the other's is rescaled."""
    m = a0 if (a0 > b0 or a0 != a0) else b0  # NaN-propagating max, as numbakern.MAX
    if m == NEG_INF:  # trap 1: both maxima are -inf, the sums are at the same max
        return m, a1 + b1
    top = m == a0
    kept, rescaled = (a1, b1) if top else (b1, a1)
    other = b0 if top else a0
    # ``kept + (m - m)`` is kept * exp(m - m) without the exp: kept itself, or NaN where
    # m is +inf or NaN (traps 2 and 3), as the two-exp form gives (and in the state's
    # own dtype: a literal 1 would make a float32 sum float64 under Numba).
    return m, kept + (m - m) + rescaled * math.exp(other - m)


def identity(dtypes):
    """The empty stretch: maximum -inf, sum 0."""
    return np.dtype(dtypes[0]).type(-np.inf), np.dtype(dtypes[1]).type(0)


def element(value, index):
    """One element ``x`` is the stretch ``(x, 1)``: ``exp(x - x) = 1``."""
    return value, 1.0


def state_dtypes(in_dtype, dtype=None):
    """Both fields in the input's float dtype (float64 for integers)."""
    d = np.dtype(in_dtype if dtype is None else dtype)
    d = d if d.kind == "f" else np.dtype(np.float64)
    return d, d


ONLINE_SOFTMAX = Op(
    "online_softmax",
    combine,
    identity,
    commutative=True,
    kinds="f",
    fields=2,
    map=element,
    state_dtypes=state_dtypes,
)
