"""The public functions' door (numbakern/api/_dispatch.py): which arguments pass as
they are, and which go to Dask or to the translation of foreign arrays."""

from __future__ import annotations

import numpy as np
import pytest

from numbakern.api import _dispatch


def test_plain_arguments_pass_as_they_are():
    for a in (1, 2.5, None, "sum", (0, 1), [0], np.arange(3.0), np.dtype(np.float32),
              np.float32):
        assert _dispatch._plain(a)
    assert np.ndarray not in _dispatch._PLAIN  # arrays are decided by their dtype


def test_bfloat16_torch_and_dask_arguments_are_not_plain():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    torch = pytest.importorskip("torch")
    da = pytest.importorskip("dask.array")
    bf16 = np.ones(3, ml_dtypes.bfloat16)
    for a in (bf16, bf16.dtype, torch.ones(3), torch.float32, da.ones(3)):
        assert not _dispatch._plain(a)
    assert _dispatch._plain(np.ones(3, np.float16))  # the same type, another dtype
