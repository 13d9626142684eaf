"""numbakern's warnings point at the caller's line (the file and line Python shows),
whatever path inside numbakern raised them."""

import warnings

import numpy as np
import pytest
from numba import cuda

import numbakern as nk
from numbakern.core.arrays import CopyWarning


def _warnings_of(call, category) -> list:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    ours = [w for w in caught if issubclass(w.category, category)]
    assert ours, [str(w.message) for w in caught]
    return ours


def _strided_4d():
    host = np.arange(4 * 4 * 5 * 6, dtype=np.float32).reshape(4, 4, 5, 6)
    return cuda.to_device(host)[::2, ::2, 1:, :]


@pytest.mark.parametrize("call, category", [
    (lambda: nk.log_softmax(_strided_4d(), axis=-1), CopyWarning),
    (lambda: nk.cumsum(_strided_4d(), axis=-1), CopyWarning),
    (lambda: nk.sum(cuda.to_device(np.ones((3, 4, 5, 6, 2), np.float32)), axis=(0, 2, 4)),
     CopyWarning),
    (lambda: nk.nanmax(np.array([np.nan, np.nan])), RuntimeWarning),
    (lambda: nk.mean(np.zeros(0, np.float32)), RuntimeWarning),
    (lambda: nk.nanmedian(np.array([[np.nan, np.nan], [1.0, 2.0]]), axis=1), RuntimeWarning),
    (lambda: nk.median(np.zeros(0, np.float32)), RuntimeWarning),
], ids=["softmax-copy", "cumsum-copy", "sum-copy", "nanmax-all-nan", "mean-empty",
        "nanmedian-all-nan", "median-empty"])
def test_warning_points_at_the_callers_line(call, category):
    for w in _warnings_of(call, category):  # (an empty median: NumPy's two warnings)
        assert w.filename == __file__, (w.filename, w.lineno, str(w.message))
