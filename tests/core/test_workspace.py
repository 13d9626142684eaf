"""``Workspace.from_host`` (numbakern/core/arrays.py): a small 1-D host array (at most
``PUT_WORDS`` 8-byte words: an ``initial=``, flags, a few dims) is written by a launch
that carries its bytes, so a recorded call replays it; anything larger is copied,
which refuses the recording. The device copy holds the host's bytes exactly, every
dtype and length around the limit."""

from __future__ import annotations

import numpy as np
import pytest

import numbakern  # noqa: F401  (before numba: the simulator's switch)
from numba import cuda
from numbakern.core.arrays import Workspace
from numbakern.kernels.elementwise import PUT_WORDS
from numbakern.runtime import replay
from numbakern.runtime.launch import set_recording
from numbakern.runtime.views import host_copy


def _workspace():
    return Workspace("device", cuda.default_stream())


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.int32, np.int64,
                                   np.float16, np.float32, np.float64])
@pytest.mark.parametrize("nbytes", [1, 7, 8, 9, PUT_WORDS * 8 - 1, PUT_WORDS * 8,
                                    PUT_WORDS * 8 + 1])
def test_a_small_host_array_arrives_bit_for_bit(dtype, nbytes):
    n = max(1, nbytes // np.dtype(dtype).itemsize)
    host = np.random.default_rng(n).integers(0, 255, n * np.dtype(dtype).itemsize,
                                             dtype=np.uint8).view(dtype)
    if np.dtype(dtype).kind == "b":
        host = host.view(np.uint8) % 2 == 1
    got = host_copy(_workspace().from_host(host))
    assert got.dtype == host.dtype and got.shape == host.shape
    assert got.tobytes() == host.tobytes()


@pytest.mark.parametrize("n, replays", [(PUT_WORDS, True), (PUT_WORDS + 1, False)])
def test_a_put_records_as_a_launch_and_a_copy_refuses(n, replays):
    recording = replay.Recording([replay._Array("sim", 1, np.dtype(np.float32), (1,), (4,))])
    set_recording(recording)
    try:
        _workspace().from_host(np.arange(n, dtype=np.int64))
    finally:
        set_recording(None)
    assert (recording.flaw is None) is replays
    assert len(recording.launches) == int(replays)


@pytest.mark.parametrize("dtype", [np.int64, np.float64, np.int32, np.uint8])
@pytest.mark.parametrize("n, times", [(1, 1), (1, 300), (3, 129), (PUT_WORDS, 33),
                                      (PUT_WORDS + 1, 5)])
def test_copies_one_after_another_arrive_bit_for_bit(dtype, n, times):
    """``times`` copies (a selection's ranks for each row): whole 8-byte words are put
    by the launch however many times; a pattern of part words, or too long, is copied."""
    host = (np.arange(n) * 37 + 5).astype(dtype)
    got = host_copy(_workspace().from_host(host, times=times))
    assert got.dtype == host.dtype and np.array_equal(got, np.tile(host, times))
