"""Taking the first ``k`` of each row's order: the gather a top-k ends with.

A selection that sorts (the whole row, or only its ``k`` winners) is left with an
*order*: for each row, the positions of its elements in the wanted order. The
kernel here keeps the first ``k`` of each row's order and gathers what they point
at: the values' bits and their indices in the input row (either the position
itself or, when the sorted row was already a gathered subset, the index stored
beside it).
"""

from __future__ import annotations

from numba import cuda


@cuda.jit
def take_rows(x, n, order, m, src, use_src, k, total, values, indices):
    """For each row ``r`` and ``j < k`` (``total = rows * k`` outputs)::

        o = order[r*m + j]                      # the j-th of row r's order
        values[r*k + j] = x[r*n + o]            # its bits
        indices[r*k + j] = src[r*n + o] if use_src != 0 else o

    ``x`` and ``src`` hold rows of ``n``, ``order`` rows of ``m >= k``.
    """
    t = cuda.grid(1)
    stride = cuda.gridsize(1)
    while t < total:
        r = t // k
        o = order[r * m + (t - r * k)]
        values[t] = x[r * n + o]
        indices[t] = src[r * n + o] if use_src != 0 else o
        t += stride
