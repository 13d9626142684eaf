"""Axis reductions, float32: row sums and row argmax over (32768, 4096), (4096, 32768)
and (1_000_000, 2), column sums over (4096, 32768); every strategy beside cupy and torch
in the same run. Row cases also compare one warp per row (``lanes=32``) with one block
per row (``lanes=threads``) and the automatic choice (``lanes=None``).

GB/s count the bytes a reduction must move: the input read plus the result written
(the result matters for (1_000_000, 2): 8 MB in, 4 MB of sums or 8 MB of int64 indices
out). ``extra_info["copy_fraction"]`` divides by the device-to-device copy bandwidth
measured in the same session (bench/conftest.py).

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
    return cp.random.standard_normal(request.param, dtype=cp.float32)


@pytest.fixture(scope="module")
def columns(cp):
    return cp.random.standard_normal(COLUMN_SHAPE, dtype=cp.float32)


def _lanes(strategy: str, lanes: str):
    return {"auto": None, "warp": 32,
            "block": nk.strategies.resolve("reduce", strategy).block.threads}[lanes]


def _moved(x, results: int, itemsize: int) -> int:
    return x.nbytes + results * itemsize


# --- row sums ------------------------------------------------------------------------


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("strategy", nk.strategies.available())
def test_row_sum_numbakern(rows, strategy, lanes, measure):
    n = _lanes(strategy, lanes)
    measure(lambda: nk.sum(rows, axis=1, strategy=strategy, lanes=n),
            _moved(rows, rows.shape[0], 4), provider=strategy, lanes=lanes,
            shape=list(rows.shape), op="row_sum")


def test_row_sum_cupy(rows, measure):
    measure(lambda: rows.sum(axis=1), _moved(rows, rows.shape[0], 4), provider="cupy",
            shape=list(rows.shape), op="row_sum")


def test_row_sum_torch(rows, measure, torch_cuda):
    if torch_cuda is None:
        pytest.skip("torch with CUDA not installed")
    t = torch_cuda.as_tensor(rows, device="cuda")
    measure(lambda: t.sum(dim=1), _moved(rows, rows.shape[0], 4), provider="torch",
            shape=list(rows.shape), op="row_sum")


# --- row argmax ----------------------------------------------------------------------


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("strategy", nk.strategies.available())
def test_row_argmax_numbakern(rows, strategy, lanes, measure):
    n = _lanes(strategy, lanes)
    measure(lambda: nk.argmax(rows, axis=1, strategy=strategy, lanes=n),
            _moved(rows, rows.shape[0], 8), provider=strategy, lanes=lanes,
            shape=list(rows.shape), op="row_argmax")


def test_row_argmax_cupy(rows, measure):
    measure(lambda: rows.argmax(axis=1), _moved(rows, rows.shape[0], 8), provider="cupy",
            shape=list(rows.shape), op="row_argmax")


def test_row_argmax_torch(rows, measure, torch_cuda):
    if torch_cuda is None:
        pytest.skip("torch with CUDA not installed")
    t = torch_cuda.as_tensor(rows, device="cuda")
    measure(lambda: t.argmax(dim=1), _moved(rows, rows.shape[0], 8), provider="torch",
            shape=list(rows.shape), op="row_argmax")


# --- column sums ---------------------------------------------------------------------


@pytest.mark.parametrize("strategy", nk.strategies.available())
def test_column_sum_numbakern(columns, strategy, measure):
    measure(lambda: nk.sum(columns, axis=0, strategy=strategy),
            _moved(columns, columns.shape[1], 4), provider=strategy,
            shape=list(columns.shape), op="column_sum")


def test_column_sum_cupy(columns, measure):
    measure(lambda: columns.sum(axis=0), _moved(columns, columns.shape[1], 4),
            provider="cupy", shape=list(columns.shape), op="column_sum")


def test_column_sum_torch(columns, measure, torch_cuda):
    if torch_cuda is None:
        pytest.skip("torch with CUDA not installed")
    t = torch_cuda.as_tensor(columns, device="cuda")
    measure(lambda: t.sum(dim=0), _moved(columns, columns.shape[1], 4), provider="torch",
            shape=list(columns.shape), op="column_sum")
