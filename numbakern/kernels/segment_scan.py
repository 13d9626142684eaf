"""Segment heads: where each segment of a segmented scan (or sort) starts.

The lesson
----------
A segmented scan is a plain scan of ``(flags, value)`` pairs
(``numbakern/ops/segmented.py``), so all it needs beside the values is one byte per
element saying whether a segment starts there: the **head flags**. They come from
the offsets in one launch, a thread per segment writing one byte (:func:`mark_heads`
on a zeroed array), so the cost is a memset of ``n`` bytes and a scattered write per
segment, not a pass that searches the offsets for every element. Empty segments
mark nothing: a head belongs to the segment that owns the element. A reverse scan
marks each segment's *last* element, the head of the reversed view.

The same launch writes each non-empty segment's *index* at its head instead
(``ids=True``): a running maximum of those gives every element its segment's index,
which the segmented sort orders by.

The scan then reads the flags as its second source (``ScanJob.sources``), through
:func:`head_loader`: an inclusive scan loads ``(flag, x[j])``; an exclusive one
loads the element before, ``(0, x[j - 1])``, or at a head ``(HEAD | EMPTY,
identity)``, which starts the segment from nothing.

A scan by key needs no offsets: a head is where a key differs from the one before it
(:func:`mark_key_heads`, one thread an element).

Offsets on the device are checked as they are read. Their ends come first: the caller
reads ``offsets[0]`` and ``offsets[-1]`` and names them where they decrease or leave
``[0, len(x)]`` ("got 5 .. 3", where ``segmented_reduce``, which reads no ends, names
the first bad segment). Then a segment whose bounds decrease or leave ``[0, len(x)]``
marks nothing and records its index in ``bad[0]`` (an atomic minimum), for the caller to
raise after: the segment ``segmented_reduce`` names. One that only leaves ``[offsets[0],
offsets[-1]]`` (the span, which the caller read and checked against ``[0, len(x)]``)
marks nothing either: offsets that leave their span decrease somewhere, and that segment
is the one reported. :func:`mark_span` does the same before the host has read anything:
the kernel reads the span's ends itself, checks them against ``[0, len(x)]`` and writes
them beside its record of the first bad segment, so that one copy to the host brings
back all the caller needs (the one synchronisation of a segmented scan of device
offsets).
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32, int8, int64, uint64

from numbakern.kernels.elementwise import THREADS, grid_for, zeros
from numbakern.kernels.segment_reduce import misplaced
from numbakern.ops.segmented import EMPTY, HEAD
from numbakern.runtime.cache import cached, device_key
from numbakern.runtime.device import ceil_div
from numbakern.runtime.launch import launch
from numbakern.runtime.views import reinterpreted, sliced


def head_loader(inner, shifted: bool, reverse: bool):
    """``load(row0, row1, j, n) -> (flags, value)``: element ``j`` of the values
    ``row0`` lifted to a segmented state, ``row1[j]`` its head flag; ``shifted``:
    the exclusive scan's shift (module docstring). ``inner``: the unlifted op's kit
    (its ``to_state`` maps an element, its identity starts a segment). The index
    passed to the op's map is the element's place in the input's order."""
    to_state = inner.to_state
    nothing = inner.identity_values[0]

    @cuda.jit(device=True)
    def load(row0, row1, j, n):
        head = row1[uint64(j)]
        if shifted:
            if head != 0:
                return int8(HEAD | EMPTY), nothing
            v = to_state(row0[uint64(j - 1)], n - j if reverse else j - 1)
            return int8(0), v[0]
        v = to_state(row0[uint64(j)], n - 1 - j if reverse else j)
        return int8(head), v[0]

    return load


def _build_marker(ids: bool, ends: bool):
    @cuda.jit
    def mark_kernel(offsets, m, lo, hi, size, marks, bad):
        i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        step = int64(cuda.gridDim.x) * cuda.blockDim.x
        while i < m:
            start, stop = int64(offsets[i]), int64(offsets[i + 1])
            if misplaced(start, stop, size):
                cuda.atomic.min(bad, 0, i)
            elif start < lo or stop > hi:  # a segment that decreases is reported
                pass
            elif stop > start:
                p = (stop - 1 if ends else start) - lo
                if ids:
                    marks[p] = i
                else:
                    marks[p] = 1
            i += step

    return mark_kernel


def mark_heads(offsets, segments: int, lo: int, hi: int, size: int, marks, bad, stream, *,
               ids: bool = False, ends: bool = False) -> None:
    """Write each non-empty segment's head into ``marks`` (a zeroed 1-D device array of
    ``hi - lo`` elements, element ``p`` standing for ``x[lo + p]``): 1, or the
    segment's index with ``ids``; at its last element with ``ends``. ``offsets``: a
    1-D device array of ``segments + 1`` integers, ``lo`` and ``hi`` its first and last
    (checked against ``[0, size]``); ``bad``: a device int64 array whose element 0
    holds ``segments``, lowered to the first bad segment's index."""
    kernel = cached(("mark_heads", ids, ends, device_key()), lambda: _build_marker(ids, ends))
    launch(kernel, grid_for(segments), THREADS, stream, offsets, segments, lo, hi, size,
           marks, bad)


def _build_span_marker(ends: bool):
    @cuda.jit
    def span_mark_kernel(offsets, m, size, marks, info):
        lo, hi = int64(offsets[0]), int64(offsets[m])
        i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        step = int64(cuda.gridDim.x) * cuda.blockDim.x
        if i == 0:
            info[0] = lo
            info[1] = hi
        if lo < 0 or hi > size or hi < lo:  # bad ends: the host raises, naming them
            return
        while i < m:
            start, stop = int64(offsets[i]), int64(offsets[i + 1])
            if misplaced(start, stop, size):
                cuda.atomic.max(info, 2, m - i)  # the first bad segment has the largest
            elif start < lo or stop > hi:  # a segment that decreases is reported
                pass
            elif stop > start:
                marks[(stop - 1 if ends else start) - lo] = 1
            i += step

    return span_mark_kernel


def mark_span(offsets, size: int, workspace, *, ends: bool = False):
    """Heads from device offsets whose ends the host has not read: ``(marks, info)``.

    ``marks``: ``size`` zeroed uint8 flags (one if ``size`` is 0), each non-empty
    segment's head set at ``p - offsets[0]`` (its last element with ``ends``), room
    for any span inside ``[0, size]``. ``info``: three int64 on the device,
    ``offsets[0]``, ``offsets[-1]`` and ``m - i`` for the first bad segment ``i``
    (0 if none), for the host to read in one copy. Ends outside ``[0, size]`` or
    decreasing mark nothing. One clear of the flags and ``info`` (one allocation),
    one launch a thread per segment."""
    segments = offsets.shape[0] - 1
    words = ceil_div(max(int(size), 1), 8)
    both = zeros(workspace, words + 3, np.int64)
    marks, info = reinterpreted(both, np.uint8, max(int(size), 1)), sliced(both, words,
                                                                             words + 3)
    kernel = cached(("mark_span", ends, device_key()), lambda: _build_span_marker(ends))
    launch(kernel, grid_for(segments), THREADS, workspace.stream, offsets, segments,
           int(size), marks, info)
    return marks, info


def _build_key_marker(ends: bool, half: bool):
    widen = _to_float32 if half else _as_is  # float16 keys compare in float32

    @cuda.jit
    def key_heads_kernel(keys, marks):
        i = int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        step = int64(cuda.gridDim.x) * cuda.blockDim.x
        n = int64(keys.shape[0])
        while i < n:
            if ends:
                last = i == n - 1
                marks[i] = 1 if last or widen(keys[i]) != widen(keys[i + 1 - last]) else 0
            else:
                first = i == 0
                marks[i] = 1 if first or widen(keys[i]) != widen(keys[i - 1 + first]) else 0
            i += step

    return key_heads_kernel


@cuda.jit(device=True)
def _to_float32(v):
    return float32(v)


@cuda.jit(device=True)
def _as_is(v):
    return v


def mark_key_heads(keys, marks, stream, *, ends: bool = False) -> None:
    """``marks[i] = 1`` where a run of equal ``keys`` starts (with ``ends``: where one
    ends), else 0: the head flags of a scan by key, each run a segment. Keys compare
    with ``!=``, as CUB's and Thrust's default equality: ``-0.0`` and ``+0.0`` are one
    run, and every NaN starts its own."""
    half = np.dtype(keys.dtype) == np.float16
    kernel = cached(("key_heads", ends, half, device_key()),
                    lambda: _build_key_marker(ends, half))
    launch(kernel, grid_for(keys.shape[0]), THREADS, stream, keys, marks)
