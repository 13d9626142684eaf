"""Axis reductions, float32: row sums and row argmax over (32768, 4096), (4096, 32768)
and (1_000_000, 2), column sums over (4096, 32768); every strategy beside cupy and torch
in the same run. Row cases also compare one warp per row (``lanes=32``) with one block
per row (``lanes=threads``) and the automatic choice (``lanes=None``).

GB/s count the bytes a reduction must move: the input read plus the result written
(the result matters for (1_000_000, 2): 8 MB in, 4 MB of sums or 8 MB of int64 indices
out). ``extra_info["copy_fraction"]`` divides by the device-to-device copy bandwidth
measured in the same session (bench/conftest.py).

Checks, before timing: the sums are of small integers (``small_integers``: a sum's
speed does not depend on the values), exact in any order, so each must equal the
float64 sums; argmax reads normal rows (a tie rule may cost time) and must equal
``cupy.argmax`` (the first of equal maxima, as NumPy and torch).

Run on a GPU host:  ``pytest bench/bench_axes.py --benchmark-json=axes.json``.
"""

from __future__ import annotations

import pytest

import numbakern as nk

ROW_SHAPES = [(32768, 4096), (4096, 32768), (1_000_000, 2)]
COLUMN_SHAPE = (4096, 32768)
LANES = ["auto", "warp", "block"]


def _ids(shape):
    return "x".join(map(str, shape))


@pytest.fixture(scope="module", params=ROW_SHAPES, ids=_ids)
def rows(request, cp):
    """Normal float32 rows: argmax's input."""
    return cp.random.RandomState(0).standard_normal(request.param, dtype=cp.float32)


@pytest.fixture(scope="module")
def summands(rows, small_integers):
    """Small integers of ``rows``' shape: the row sums' input."""
    return small_integers(rows.shape)


@pytest.fixture(scope="module")
def row_sums(summands, cp, verify):
    """The check of row sums: equal to the float64 sums."""
    return verify.agrees(summands.sum(axis=1, dtype=cp.float64))


@pytest.fixture(scope="module")
def row_argmax(rows, verify):
    """The check of row argmax: equal to cupy.argmax's."""
    return verify.agrees(rows.argmax(axis=1))


@pytest.fixture(scope="module")
def columns(small_integers):
    return small_integers(COLUMN_SHAPE)


@pytest.fixture(scope="module")
def column_sums(columns, cp, verify):
    """The check of column sums: equal to the float64 sums."""
    return verify.agrees(columns.sum(axis=0, dtype=cp.float64))


def _lanes(strategy: str, lanes: str):
    return {"auto": None, "warp": 32,
            "block": nk.strategies.resolve("reduce", strategy).block.threads}[lanes]


def _moved(x, results: int, itemsize: int) -> int:
    return x.nbytes + results * itemsize


# --- row sums ------------------------------------------------------------------------


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("strategy", nk.strategies.available())
def test_row_sum_numbakern(summands, strategy, lanes, measure, row_sums):
    n = _lanes(strategy, lanes)
    measure(lambda: nk.sum(summands, axis=1, strategy=strategy, lanes=n),
            _moved(summands, summands.shape[0], 4), check=row_sums, provider=strategy,
            lanes=lanes, shape=list(summands.shape), op="row_sum")


def test_row_sum_cupy(summands, measure, row_sums):
    measure(lambda: summands.sum(axis=1), _moved(summands, summands.shape[0], 4),
            check=row_sums, provider="cupy", shape=list(summands.shape), op="row_sum")


def test_row_sum_torch(summands, measure, torch_cuda, row_sums):
    if torch_cuda is None:
        pytest.skip("torch with CUDA not installed")
    t = torch_cuda.as_tensor(summands, device="cuda")
    measure(lambda: t.sum(dim=1), _moved(summands, summands.shape[0], 4), check=row_sums,
            provider="torch", shape=list(summands.shape), op="row_sum")


# --- row argmax ----------------------------------------------------------------------


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("strategy", nk.strategies.available())
def test_row_argmax_numbakern(rows, strategy, lanes, measure, row_argmax):
    n = _lanes(strategy, lanes)
    measure(lambda: nk.argmax(rows, axis=1, strategy=strategy, lanes=n),
            _moved(rows, rows.shape[0], 8), check=row_argmax, provider=strategy,
            lanes=lanes, shape=list(rows.shape), op="row_argmax")


def test_row_argmax_cupy(rows, measure, row_argmax):
    measure(lambda: rows.argmax(axis=1), _moved(rows, rows.shape[0], 8), check=row_argmax,
            provider="cupy", shape=list(rows.shape), op="row_argmax")


def test_row_argmax_torch(rows, measure, torch_cuda, row_argmax):
    if torch_cuda is None:
        pytest.skip("torch with CUDA not installed")
    t = torch_cuda.as_tensor(rows, device="cuda")
    measure(lambda: t.argmax(dim=1), _moved(rows, rows.shape[0], 8), check=row_argmax,
            provider="torch", shape=list(rows.shape), op="row_argmax")


# --- column sums ---------------------------------------------------------------------


@pytest.mark.parametrize("strategy", nk.strategies.available())
def test_column_sum_numbakern(columns, strategy, measure, column_sums):
    measure(lambda: nk.sum(columns, axis=0, strategy=strategy),
            _moved(columns, columns.shape[1], 4), check=column_sums, provider=strategy,
            shape=list(columns.shape), op="column_sum")


def test_column_sum_cupy(columns, measure, column_sums):
    measure(lambda: columns.sum(axis=0), _moved(columns, columns.shape[1], 4),
            check=column_sums, provider="cupy", shape=list(columns.shape), op="column_sum")


def test_column_sum_torch(columns, measure, torch_cuda, column_sums):
    if torch_cuda is None:
        pytest.skip("torch with CUDA not installed")
    t = torch_cuda.as_tensor(columns, device="cuda")
    measure(lambda: t.sum(dim=0), _moved(columns, columns.shape[1], 4), check=column_sums,
            provider="torch", shape=list(columns.shape), op="column_sum")
