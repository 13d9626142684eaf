"""An event-driven thread block for Numba's CUDA simulator.

Numba's simulator runs every CUDA thread of a block as an OS thread. Its
``BlockManager`` finds the threads waiting in ``syncthreads()`` by polling them in
a loop that holds the GIL, so each barrier costs tens of milliseconds of threads
waiting for the poller to let go. Here nothing polls: a waiting thread blocks on a
lock of its own, and whichever thread completes a barrier releases the others.

The same machinery gives warps their rendezvous (:meth:`BlockManager.meet`), which
``numbakern.runtime.simulator`` builds the warp intrinsics on. The rules, after the CUDA C++
Programming Guide (Synchronization Functions; Warp Vote, Match and Shuffle
Functions):

* ``syncthreads()`` completes when every thread that has not exited has arrived:
  an exited thread counts as arrived, as in Numba's own simulator. Every thread of a
  barrier must call it from the same place in the kernel's code: threads that meet
  at different ``syncthreads()`` calls (one inside a branch only some take) raise a
  ``RuntimeError`` naming both places, where a GPU's behaviour is undefined (it may
  hang, or pass the barrier early).
* A warp rendezvous is keyed by its member mask, so lanes of one warp that
  diverged into groups with disjoint masks meet separately. It completes when
  every lane of the mask that exists and has not exited has arrived; lanes past
  the end of a partial last warp never exist.
* If every live thread of a block is waiting and no meeting can complete, the
  kernel deadlocks on a GPU; here it fails with a ``RuntimeError`` saying who waits
  where, instead of hanging.

A thread that raises aborts its block: threads waiting anywhere are released and
raise, and the launch re-raises the first exception with the thread's ``tid`` and
``ctaid`` in its message, as Numba's simulator does.

The OS threads come from a pool reused across blocks and launches, and are kept
on one CPU; bench/NOTES.md has what each of these choices saves.

Each block knows the ``FakeCUDAModule`` of its own launch (:func:`kernel_context`,
set by the launching thread), and each simulated thread reads ``cuda.*`` from its
block's: so launches from several Python threads at once run side by side, each
with its own grid, shared memory and abort flag.

A ``KeyboardInterrupt`` (or any exception) raised in the launching thread while it
waits for a block aborts the block: threads waiting at a barrier or a rendezvous
raise, threads still computing stop at their next ``cuda.*`` access or barrier (or
finish their thread's work), the launcher waits up to :data:`DRAIN_SECONDS` for
them, and the exception propagates, so no later block of that launch starts.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading

import numpy as np
from numba.cuda.simulator.kernel import BlockThread
from numba.cuda.simulator.kernelapi import Dim3

from .device import FULL_MASK, WARP
from .simulator import own_files

# The FakeCUDAModule of the launch the current (launching) thread is running.
_launching = threading.local()

#: the interpreter's least switch interval (seconds) while a simulated launch runs
SWITCH_INTERVAL = 0.05
_switching = threading.Lock()
_running = 0  # launches running, in all threads
_interval_before = 0.0  # the switch interval they found


@contextlib.contextmanager
def kernel_context(module):
    """Numba's ``_push_kernel_context``, per launching thread instead of one global
    (Numba's asserts that no other launch is running)."""
    before = getattr(_launching, "module", None)
    _launching.module = module
    try:
        with _switching_rarely():
            yield
    finally:
        _launching.module = before


@contextlib.contextmanager
def _switching_rarely():
    """The switch interval at least :data:`SWITCH_INTERVAL` while any launch runs.

    A thread waiting for the GIL asks its holder to let go once an interval. Simulated
    threads give the GIL up by blocking and need no time slices, but a barrier wakes
    every thread of the block at once: at the default 5 ms hundreds of them asked in
    turn, and the thread waking the rest was made to hand the GIL over again and
    again (a 1024-thread block's 40 barriers: 7-9 s, 1 s at 50 ms; bench/NOTES.md).
    Other Python threads of the process switch less often meanwhile.
    """
    global _running, _interval_before
    with _switching:
        if _running == 0:
            _interval_before = sys.getswitchinterval()
            if _interval_before < SWITCH_INTERVAL:
                sys.setswitchinterval(SWITCH_INTERVAL)
        _running += 1
    try:
        yield
    finally:
        with _switching:
            _running -= 1
            if _running == 0 and _interval_before < SWITCH_INTERVAL:
                # the interval is kept in whole microseconds, read back rounded down:
                # half of one more restores it exactly
                sys.setswitchinterval(_interval_before + 5e-7)


def current_module():
    """Numba's ``_get_kernel_context``: the calling simulated thread's launch module."""
    t = threading.current_thread()
    return t.cuda_module if isinstance(t, SimThread) else None


class Aborted(RuntimeError):
    """Raised in a simulated thread whose block was aborted."""


class Meeting:
    """One rendezvous of warp lanes: who came, with what.

    ``values[lane]`` holds what each lane brought; ``arrived`` is the bit mask of
    the lanes that took part once the meeting completes.
    """

    __slots__ = ("op", "mask", "arrived", "values", "waiters")

    def __init__(self, op: str, mask: int):
        self.op = op
        self.mask = mask
        self.arrived = 0
        self.values = [None] * WARP
        self.waiters: list[SimThread] = []


class _Warp:
    """Per-warp bookkeeping: lanes alive, lanes waiting, open meetings."""

    __slots__ = ("index", "live", "parked", "meetings", "sites")

    def __init__(self, index: int, lanes: int):
        self.index = index
        self.live = (1 << lanes) - 1  # lanes that exist and have not exited
        self.parked = 0  # lanes waiting anywhere (barrier, meeting, activemask)
        self.meetings: dict[int, Meeting] = {}  # open warp-sync meetings by mask
        self.sites: dict[object, Meeting] = {}  # open activemask() calls by site


class SimThread(BlockThread):
    """A simulated CUDA thread: an OS thread that runs one kernel thread after another.

    Starting an OS thread costs about as much as running a small kernel's thread,
    so threads are pooled and reused across blocks and launches; one left idle
    for :data:`IDLE_SECONDS` ends. Waiting (for a job, or at a barrier) is blocking
    on the thread's own ``wake`` lock, which whoever has work for it releases.
    """

    cuda_module = None  # the FakeCUDAModule of the launch being run

    def __init__(self):
        threading.Thread.__init__(self, daemon=True)
        self.wake = threading.Lock()
        self.wake.acquire()  # held while the thread may run; released to wake it
        self.job = None

    def run(self):
        _share_one_cpu()
        while self._next_job():
            self._run(*self.job)

    def _next_job(self) -> bool:
        if not self.wake.acquire(timeout=IDLE_SECONDS):
            if _pool.retire(self):
                return False
            self.wake.acquire()  # taken from the pool as the timeout expired
        return True

    def _run(self, manager, blockIdx, threadIdx, target, debug):
        """Run one CUDA thread: Numba's BlockThread, with the fields it sets."""
        self._manager = manager
        self.cuda_module = manager.module
        self.blockIdx = Dim3(*blockIdx)
        self.threadIdx = Dim3(*threadIdx)
        bx, by, _ = manager.block_dim
        self.thread_id = threadIdx[0] + bx * (threadIdx[1] + by * threadIdx[2])
        self.lane = self.thread_id % WARP
        self.bit = 1 << self.lane
        self.warp = manager.warps[self.thread_id // WARP]
        self.exception = None
        try:
            try:
                # Numba's debug mode raises on division by zero; otherwise arithmetic is
                # silent as on a GPU (integer wrap-around, inf - inf), not a flood of
                # NumPy RuntimeWarnings. A context, so no reuse of the thread inherits it.
                with np.errstate(**({"divide": "raise"} if debug else {"all": "ignore"})):
                    target()
            except Exception as e:
                self.exception = (self._with_ids(e), sys.exc_info()[2])
        except BaseException:  # e.g. SystemExit: this OS thread ends
            manager.exit(self)
            raise
        _pool.give_back(self)  # first: exit() may wake the launcher for the next block
        manager.exit(self)

    def _with_ids(self, e: Exception) -> Exception:
        """The exception as Numba's simulator reports it: tid and ctaid first."""
        ids = "tid=%s ctaid=%s" % (list(self.threadIdx), list(self.blockIdx))
        try:
            return type(e)(ids if str(e) == "" else "%s: %s" % (ids, e))
        except Exception:  # a constructor wanting other arguments: lose nothing
            return RuntimeError("%s: %s: %s" % (ids, type(e).__name__, e))

    def syncthreads(self):
        self._manager.syncthreads(self, _call_site())

    def _votes(self, value) -> np.ndarray:
        """The predicates of the threads at this barrier: each sets its own slot,
        all read them after the barrier, and each clears its slot after a second one,
        so a thread that has exited (or voted at an earlier call) counts for nothing,
        as on a GPU (Numba's simulator counted both)."""
        state = self._manager.block_state
        idx = self.threadIdx.x, self.threadIdx.y, self.threadIdx.z
        state[idx] = 1 if value else 0
        self.syncthreads()
        votes = state[state >= 0]
        self.syncthreads()
        state[idx] = -1
        return votes

    def syncthreads_count(self, value):
        return np.int32(np.count_nonzero(self._votes(value)))

    def syncthreads_and(self, value):
        return np.int32(self._votes(value).all())

    def syncthreads_or(self, value):
        return np.int32(self._votes(value).any())


_OWN_FILES = own_files()


def _call_site():
    """``(file, line)`` of the kernel code that called the barrier: the first frame
    outside the simulator's own files."""
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(_OWN_FILES):
        f = f.f_back
    return None if f is None else (f.f_code.co_filename, f.f_lineno)


def _share_one_cpu() -> None:
    """Keep the calling simulated thread on the CPU all the others use, under
    Linux's batch policy.

    Simulated threads take turns holding the GIL, so they never run in parallel;
    handing the GIL to a thread waiting on another CPU costs a cross-CPU wake-up,
    which made barriers about 40% slower on 2 CPUs (bench/NOTES.md). Only
    numbakern's own threads are pinned. Parallel processes should each get a CPU of
    their own: ``NUMBAKERN_SIMULATOR_CPU=i`` picks the i-th allowed CPU (modulo their
    count; the test suite sets it from pytest-xdist's worker number), else the
    process id picks one, which two processes share half the time.

    ``SCHED_BATCH``: a thread woken at a barrier does not preempt the one waking it,
    whose GIL it would only wait for (two context switches a waiter, where one
    suffices; barriers of 64-thread blocks ran 40% faster). Each step is skipped
    where unsupported or not allowed (some sandboxes).
    """
    if not hasattr(os, "sched_setaffinity"):
        return
    try:
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[_cpu_index() % len(cpus)]})
    except OSError:
        pass  # run unpinned
    try:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except (AttributeError, OSError):
        pass


def _cpu_index() -> int:
    """The ``NUMBAKERN_SIMULATOR_CPU`` setting when it is an integer, else the pid."""
    try:
        return int(os.environ["NUMBAKERN_SIMULATOR_CPU"])
    except (KeyError, ValueError):
        return os.getpid()


class _Pool:
    """Idle :class:`SimThread` s; the most recently used is reused first."""

    def __init__(self):
        self._lock = threading.Lock()
        self._idle: list[SimThread] = []

    def start(self, job) -> None:
        with self._lock:
            t = self._idle.pop() if self._idle else None
        if t is None:
            t = SimThread()
            t.start()
        t.job = job
        t.wake.release()

    def give_back(self, t: SimThread) -> None:
        with self._lock:
            self._idle.append(t)

    def retire(self, t: SimThread) -> bool:
        """Remove an idle ``t`` that timed out; False if it was just handed a job."""
        with self._lock:
            if t in self._idle:
                self._idle.remove(t)
                return True
            return False


IDLE_SECONDS = 0.5
DRAIN_SECONDS = 2.0  # how long an interrupted launch waits for its threads to stop
_pool = _Pool()


def _where(site) -> str:
    return "an unknown place" if site is None else "%s:%d" % site


class BlockManager:
    """Runs one thread block; a drop-in for Numba's ``BlockManager``."""

    def __init__(self, f, grid_dim, block_dim, debug):
        self._f = f
        self.block_dim = block_dim
        self._debug = debug
        # syncthreads_count & co: each thread's vote, -1 where it has none
        self.block_state = np.full(block_dim, -1, dtype=np.int8)
        nthreads = int(np.prod(block_dim))
        self.warps = [
            _Warp(w, min(WARP, nthreads - w * WARP))
            for w in range((nthreads + WARP - 1) // WARP)
        ]
        self._mutex = threading.Lock()  # guards everything below
        self._live = nthreads  # threads not exited; set before any starts
        self._parked = 0  # threads waiting anywhere
        self._barrier: list[SimThread] = []  # threads waiting in syncthreads()
        self._barrier_site = None  # where they called it
        self._failure = None  # (exception, traceback) of the first failure
        self._aborted = False
        self._finished = threading.Lock()
        self._finished.acquire()  # released once: all exited, or the first failure
        self._drained = threading.Event()  # set once every thread has exited
        self._ctaid = None
        self.module = getattr(_launching, "module", None)

    def run(self, grid_point, *args):
        def target():
            self._f(*args)

        self._ctaid = list(grid_point)
        progress = getattr(_launching, "progress", None)
        started = 0
        try:
            for point in np.ndindex(*self.block_dim):
                _pool.start((self, grid_point, point, target, self._debug))
                started += 1
            self._finished.acquire()  # the launching thread sleeps; nothing polls
        except BaseException:  # KeyboardInterrupt: stop this block, start no other
            self.interrupt(int(np.prod(self.block_dim)) - started)
            raise
        if progress is not None:
            progress()
        if self._failure is not None:
            exc, tb = self._failure
            raise exc.with_traceback(tb)

    @property
    def aborted(self) -> bool:
        return self._aborted

    def interrupt(self, unstarted: int = 0) -> None:
        """Abort the block from the launching thread and wait (at most
        :data:`DRAIN_SECONDS`) for its threads to stop; ``unstarted`` of them never
        started."""
        with self._mutex:
            self._live -= unstarted
            if self._live <= 0:
                self._drained.set()
            if self._failure is None:
                self._failure = (Aborted("launch interrupted"), None)
            self._abort()
        self._drained.wait(DRAIN_SECONDS)

    # -- entry points called from simulated threads ------------------------------

    def syncthreads(self, t: SimThread, site=None) -> None:
        """Wait until every live thread of the block has arrived, each from the same
        call ``site`` (``(file, line)``) of the kernel's code.

        Raises:
            RuntimeError: ``t`` arrives from another site than the threads already
                waiting (a barrier in divergent code: undefined on a GPU).
        """
        with self._mutex:
            self._check_abort("syncthreads call")
            if not self._barrier:
                self._barrier_site = site
            elif site != self._barrier_site:
                raise RuntimeError(
                    "threads of one block meet at different syncthreads() calls, %s "
                    "and %s: a barrier that only some threads reach (one in a branch "
                    "they do not all take) is undefined on a GPU"
                    % (_where(self._barrier_site), _where(site)))
            self._barrier.append(t)
            self._park(t)
            if len(self._barrier) == self._live:
                self._release_barrier()
            else:
                self._settle(t.warp)
        self._wait(t, "syncthreads clear")

    def meet(self, t: SimThread, op: str, mask: int, value) -> Meeting:
        """Rendezvous of the lanes in ``mask`` for the warp-synchronous ``op``.

        Returns the completed :class:`Meeting`; every lane reads its own result
        from it. Raises ``ValueError`` if the caller is not in ``mask`` (undefined
        behaviour in CUDA) and ``RuntimeError`` if the lanes of one mask call
        different intrinsics.
        """
        if not mask & t.bit:
            raise ValueError(
                "%s: lane %d is not in its member mask %#010x" % (op, t.lane, mask)
            )
        warp = t.warp
        with self._mutex:
            self._check_abort(op + " call")
            meeting = warp.meetings.get(mask)
            if meeting is None:
                meeting = warp.meetings[mask] = Meeting(op, mask)
            elif meeting.op != op:
                raise RuntimeError(
                    "warp %d: lane %d calls %s(mask=%#010x) while lanes %#010x "
                    "wait in %s with that mask"
                    % (warp.index, t.lane, op, mask, meeting.arrived, meeting.op)
                )
            meeting.values[t.lane] = value
            meeting.arrived |= t.bit
            meeting.waiters.append(t)
            self._park(t)
            if not self._try_complete(warp, meeting):
                self._settle(warp)
        self._wait(t, op + " clear")
        return meeting

    def converge(self, t: SimThread, site) -> int:
        """The lanes of ``t``'s warp that reach the call ``site`` together.

        A lane waits until every other live lane of its warp is waiting too
        (here, at a barrier, at a meeting or at another site) or has exited; the
        lanes waiting here are the ones that are converged.
        """
        warp = t.warp
        with self._mutex:
            self._check_abort("activemask call")
            meeting = warp.sites.get(site)
            if meeting is None:
                meeting = warp.sites[site] = Meeting("activemask", FULL_MASK)
            meeting.arrived |= t.bit
            meeting.waiters.append(t)
            self._park(t)
            self._settle(warp)
        self._wait(t, "activemask clear")
        return meeting.arrived

    def exit(self, t: SimThread) -> None:
        """Thread ``t`` has returned or raised: it no longer holds anyone up."""
        warp = t.warp
        with self._mutex:
            self._live -= 1
            warp.live &= ~t.bit
            if t.exception is not None:
                if self._failure is None:
                    self._failure = t.exception
                self._abort()
            elif not self._aborted:
                self._progress_after_exit(warp, t.bit)
            if self._live == 0:
                self._drained.set()
                if not self._aborted:
                    self._finished.release()

    # -- internals; all called with the mutex held --------------------------------

    def _check_abort(self, where: str) -> None:
        if self._aborted:
            raise Aborted("abort flag set on " + where)  # Numba's wording

    def _wait(self, t: SimThread, where: str) -> None:
        t.wake.acquire()  # blocks, GIL released, until a completer wakes us
        self._check_abort(where)

    def _park(self, t: SimThread) -> None:
        self._parked += 1
        t.warp.parked |= t.bit

    def _release(self, waiters) -> None:
        for w in waiters:
            self._parked -= 1
            w.warp.parked &= ~w.bit
            w.wake.release()

    def _release_barrier(self) -> None:
        waiters, self._barrier = self._barrier, []
        self._release(waiters)

    def _try_complete(self, warp: _Warp, meeting: Meeting) -> bool:
        """Complete ``meeting`` if every live lane of its mask has arrived."""
        if meeting.arrived != meeting.mask & warp.live:
            return False
        del warp.meetings[meeting.mask]
        self._release(meeting.waiters)
        return True

    def _settle(self, warp: _Warp) -> None:
        """After a lane waits or exits: release activemask() sites, detect deadlock."""
        if warp.sites and not warp.live & ~warp.parked:
            sites, warp.sites = warp.sites, {}
            for meeting in sites.values():
                self._release(meeting.waiters)
        if self._live and self._parked == self._live:
            self._deadlock()

    def _progress_after_exit(self, warp: _Warp, bit: int) -> None:
        if self._barrier and len(self._barrier) == self._live:
            self._release_barrier()
        for meeting in list(warp.meetings.values()):
            if meeting.mask & bit:
                self._try_complete(warp, meeting)
        self._settle(warp)

    def _deadlock(self) -> None:
        where = []
        if self._barrier:
            where.append("%d thread(s) in syncthreads()" % len(self._barrier))
        for warp in self.warps:
            for meeting in warp.meetings.values():
                where.append(
                    "warp %d lanes %#010x in %s(mask=%#010x), waiting for lanes %#010x"
                    % (warp.index, meeting.arrived, meeting.op, meeting.mask,
                       meeting.mask & warp.live & ~meeting.arrived)
                )
        self._failure = (
            RuntimeError(
                "deadlock in block ctaid=%s: every live thread waits and no "
                "barrier can complete: %s" % (self._ctaid, "; ".join(where))
            ),
            None,
        )
        self._abort()

    def _abort(self) -> None:
        """Fail the block: wake every waiting thread (they raise) and the launcher."""
        if self._aborted:
            return
        self._aborted = True
        self._release_barrier()
        for warp in self.warps:
            for group in (warp.meetings, warp.sites):
                for meeting in group.values():
                    self._release(meeting.waiters)
                group.clear()
        self._finished.release()
