"""A strategy of any family is one class plus one registry line, and then serves every
layout of its family.

Each test here writes a throwaway strategy (simple on purpose), registers it, and runs
its family's matrix through it by name, against NumPy: whole arrays, rows, columns,
tiny rows and argmax for a reduction; tiles, row scans and non-commutative ops for a
scan; softmax rows; histograms, bincount and a radix sort's digit counts; sorts and
argsorts. It also checks the registry's listings and its errors.
"""

import numpy as np
import pytest
from numba import cuda, int32, uint32

import numbakern as nk
from numbakern.kernels.scan_tiles import Tile
from numbakern.runtime.launch import launch
from numbakern.strategies import register, unregister
from numbakern.strategies.protocols import (BlockStrategy, Cost, GridReduce, GridScan,
                                            HistogramStrategy, SelectStrategy, SortStrategy)

RNG = np.random.default_rng(5)


@nk.op(identity=0, commutative=False, name="last_nonzero")
def LAST_NONZERO(a, b):
    return b if b != 0 else a


@pytest.fixture
def registered():
    """Register throwaway classes for one test, and remove them after it."""
    added = []

    def add(cls):
        added.append(register(cls))
        return cls

    yield add
    for cls in added:
        unregister(cls)


# --- a block strategy: thread 0 folds everything, in thread order ------------------------


class Sequential(BlockStrategy):
    """Thread 0 combines every thread's state in thread order, through shared memory:
    no tree at all. Order-preserving; no warp form."""

    name = "sequential"
    needs_commutative = False

    def temp_slots(self) -> int:
        return self.threads + 1  # the states, and the total

    def barriers(self) -> int:
        return 2

    def build_reduce(self, kit):
        scan = self.build_scan(kit)

        @cuda.jit(device=True)
        def block_reduce(s, t0, t1):
            return scan(s, t0, t1)[2]

        return block_reduce

    def build_scan(self, kit):
        combine, identity, store, load = kit.combine, kit.identity, kit.store, kit.load
        threads = self.threads

        @cuda.jit(device=True)
        def block_scan(s, t0, t1):
            tid = cuda.threadIdx.x
            store(t0, t1, tid, s)
            cuda.syncthreads()
            if tid == 0:
                acc = load(t0, t1, 0)
                for i in range(1, threads):
                    acc = combine(acc, load(t0, t1, i))
                    store(t0, t1, i, acc)
                store(t0, t1, threads, acc)
            cuda.syncthreads()
            exc = load(t0, t1, tid - 1) if tid > 0 else identity()
            return load(t0, t1, tid), exc, load(t0, t1, threads)

        return block_scan


class ReduceOnly(Sequential):
    """Sequential's reduce without its scan: a block strategy the scans cannot take."""

    name = "reduce_only"
    build_scan = BlockStrategy.build_scan

    def build_reduce(self, kit):
        scan = Sequential.build_scan(self, kit)

        @cuda.jit(device=True)
        def block_reduce(s, t0, t1):
            return scan(s, t0, t1)[2]

        return block_reduce


def test_a_block_without_a_scan_named_for_a_scan_is_refused_as_such(registered):
    registered(ReduceOnly)
    assert "reduce_only" in nk.strategies.available("block")
    assert "reduce_only" not in nk.strategies.available("block", scan=True)
    assert nk.sum(np.arange(100.0), strategy="reduce_only") == 4950.0
    for spec in ("reduce_only", "decoupled_lookback/reduce_only"):
        with pytest.raises(ValueError, match="'reduce_only' has no block scan"):
            nk.cumsum(np.arange(5.0), strategy=spec)


class PlainPython(Sequential):
    """A block whose build_reduce returns a plain function: the simulator would run
    it, a GPU's compiler would not."""

    name = "plain_python"

    def build_reduce(self, kit):
        def block_reduce(s, t0, t1):
            return s

        return block_reduce


def test_a_block_building_a_plain_function_is_refused_under_the_simulator_too(registered):
    registered(PlainPython)
    with pytest.raises(TypeError, match="PlainPython.build_reduce must return a CUDA device "
                                        "function"):
        nk.sum(np.arange(10.0), strategy="plain_python")


def _sample(shape, dtype=np.float64):
    return RNG.integers(-9, 10, shape).astype(dtype)


def test_a_block_strategy_serves_every_reduction_layout(registered):
    registered(Sequential)
    assert "two_pass/sequential" in nk.strategies.available()
    assert "sequential" in nk.strategies.available("block", scan=True)
    x = _sample((33, 40))
    for grid in ("two_pass", "atomic_fold"):
        strategy = f"{grid}/sequential"
        if grid == "atomic_fold":  # atomic folds need a commutative op
            with pytest.raises(ValueError, match="commutative"):
                nk.reduce(x, LAST_NONZERO, strategy=strategy)
        assert nk.sum(x, strategy=strategy) == x.sum()  # the whole array
        np.testing.assert_array_equal(nk.sum(x, axis=1, strategy=strategy), x.sum(1))  # rows
        np.testing.assert_array_equal(nk.max(x, axis=0, strategy=strategy), x.max(0))  # cols
        np.testing.assert_array_equal(nk.argmax(x, axis=1, strategy=strategy), x.argmax(1))
        pairs = _sample((50, 2))  # tiny rows: a thread each, no block strategy at work
        np.testing.assert_array_equal(nk.sum(pairs, axis=1, strategy=strategy), pairs.sum(1))
    y = (RNG.integers(0, 3, 300) * RNG.integers(1, 9, 300)).astype(np.int64)
    last = y[np.flatnonzero(y)[-1]]
    assert nk.reduce(y, LAST_NONZERO, strategy="two_pass/sequential") == last
    # no warp form: a row gets a block, and asking for a warp says why not
    with pytest.raises(ValueError, match="lanes must be"):
        nk.sum(x, axis=1, strategy="sequential", lanes=16)


def test_a_block_strategy_serves_scans_and_softmax(registered):
    registered(Sequential)
    x = _sample((5, 70))
    for grid in ("decoupled_lookback", "reduce_then_scan"):
        got = nk.cumsum(x, axis=1, strategy=f"{grid}/sequential")  # rows: tiles (no warp)
        np.testing.assert_array_equal(got, np.cumsum(x, axis=1))
        flat = nk.cumsum(x, strategy=f"{grid}/sequential", exclusive=True)
        np.testing.assert_array_equal(flat, np.concatenate([[0], np.cumsum(x)[:-1]]))
    with pytest.raises(ValueError, match="sequential has none"):
        nk.cumsum(x, axis=1, strategy="sequential", layout="warp")
    probs = nk.softmax(x, sum_strategy="sequential", max_strategy="sequential")
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(probs, e / e.sum(axis=1, keepdims=True), rtol=1e-12)
    with pytest.raises(ValueError, match="warp forms"):
        nk.softmax(x, sum_strategy="sequential", layout="warp")


@pytest.mark.simulator
def test_explain_records_a_new_block_strategy(registered):
    from numbakern.teach.trace import trace_reduce

    registered(Sequential)
    trace = trace_reduce(np.arange(40, dtype=np.float32), "sum", "two_pass/sequential")
    assert trace.exact_cover and trace.value == 780.0
    assert trace.total("joins") == 39


# --- a grid reduce: always through partials -----------------------------------------------


class AlwaysPartials(GridReduce):
    """Every piece writes a partial and a second pass reduces them, even when each
    output is one piece."""

    name = "always_partials"
    deterministic = True
    needs_commutative = False

    def reduce(self, job):
        plan = job.plan(self)
        partials = job.alloc_state(job.outputs * plan.pieces)
        job.run(plan, job.emit_partial(plan), partials)
        return job.reduce_partials(plan, partials)

    def cost(self, n, itemsize, state_bytes, blocks):
        return Cost(2, n * itemsize, state_bytes, 0)


def test_a_grid_reduce_serves_every_layout(registered):
    registered(AlwaysPartials)
    assert "always_partials/shared_tree" in nk.strategies.available()
    x = _sample((33, 40), np.float32)
    checks = [  # each layout once, two a block strategy, a sum on each
        lambda s: nk.sum(x, strategy=s) == x.sum(),  # the whole array
        lambda s: np.array_equal(nk.argmin(x, axis=0, strategy=s), x.argmin(0)),  # columns
        lambda s: np.array_equal(nk.sum(x, axis=1, strategy=s), x.sum(1)),  # rows
        lambda s: np.array_equal(nk.min(x[:, :4], axis=1, strategy=s), x[:, :4].min(1)),
        lambda s: np.array_equal(nk.sum(x, axis=0, strategy=s), x.sum(0)),  # columns
        lambda s: np.array_equal(nk.mean(x, axis=1, strategy=s), x.mean(1)),  # rows
    ]
    for k, block in enumerate(("warp_shuffle", "shared_tree", "blelloch")):
        for check in checks[2 * k:2 * k + 2]:
            assert check(f"always_partials/{block}"), (block, checks.index(check))


# --- a grid scan: one block walks each segment's tiles in order ----------------------------


class OneBlockPerSegment(GridScan):
    """Each segment is scanned by one block, tile after tile, carrying the total."""

    name = "one_block_per_segment"
    deterministic = True

    def scan(self, job):
        items = self.tile_items(job)
        tile = Tile(self.block, job.kit, items, job.element_loader(), job.output_storer(),
                    job.exclusive, job.empty, self.hold)
        launch(_segment_kernel(tile, job.kit), job.segments, self.block.threads, job.stream,
               *job.sources, *job.outs, job.n)

    def cost(self, n, in_itemsize, out_itemsize, tiles):
        return Cost(1, n * in_itemsize, n * out_itemsize, 0)


def _segment_kernel(t, kit):
    combine, identity = kit.combine, kit.identity
    xs_storage, temp_storage, local_storage = t.xs_storage, t.temp_storage, t.local_storage
    size, load_tile, block_scan = t.size, t.load_tile, t.block_scan
    emit_tile, thread_prefix = t.emit_tile, t.thread_prefix

    @cuda.jit
    def kernel(src0, src1, dst0, dst1, n):
        xs0, xs1 = xs_storage()
        tmp0, tmp1 = temp_storage()
        l0, l1 = local_storage()
        seg = cuda.blockIdx.x
        a, b = seg // src0.shape[1], seg % src0.shape[1]
        carry, has = identity(), False
        start = 0
        while start < n:
            r = load_tile(src0[a, b], src1[a, b], n, start, xs0, xs1, l0, l1)
            inc, exc, total = block_scan(r, tmp0, tmp1)
            pre, have = thread_prefix(exc, carry, has)
            emit_tile(dst0[a, b], dst1[a, b], n, start, pre, have, xs0, xs1, l0, l1)
            carry = combine(carry, total) if has else total
            has = True
            cuda.syncthreads()
            start += size

    return kernel


def test_a_grid_scan_serves_every_scan(registered):
    registered(OneBlockPerSegment)
    assert "one_block_per_segment/blelloch" in nk.strategies.available("scan")
    x = _sample((3, 90))
    y = (RNG.integers(0, 3, 90) * RNG.integers(1, 9, 90)).astype(np.int64)
    filled = [y[:i + 1][np.flatnonzero(y[:i + 1])[-1]] if y[:i + 1].any() else 0
              for i in range(y.size)]
    factors = x[:, :8] % 3 + 1
    scans = [  # (ours, NumPy's): every scan form; block strategy k runs forms k and k + 2
        (lambda s: nk.cumsum(x, strategy=s), np.cumsum(x)),  # the whole array
        (lambda s: nk.cumsum(x, axis=1, strategy=s, layout="tiles"), np.cumsum(x, axis=1)),
        (lambda s: nk.cumprod(factors, axis=0, strategy=s, reverse=True, layout="tiles"),
         np.cumprod(factors[::-1], 0)[::-1]),  # strided columns, reversed
        (lambda s: nk.associative_scan(y, LAST_NONZERO, strategy=s), filled),  # in order
    ]
    blocks = nk.strategies.available("block", scan=True)
    for k, block in enumerate(blocks):
        for ours, want in (scans[k % 4], scans[(k + 2) % 4]):
            np.testing.assert_array_equal(ours(f"one_block_per_segment/{block}"), want)
    assert len(blocks) >= 2  # so that every form above ran
    counts = RNG.integers(0, 9, 100).astype(np.uint8)  # a radix sort's digit offsets by
    # this scan (one-byte keys: one digit pass)
    assert (nk.sort(counts, strategy=nk.RadixSort(scan="one_block_per_segment"))
            == np.sort(counts)).all()


# --- a histogram strategy ------------------------------------------------------------------


class Halves(HistogramStrategy):
    """Two shared copies of the bins per block, one for even threads and one for odd:
    a block-private histogram that halves the contention on each counter."""

    name = "halves"
    privatized = True

    def shared_slots(self, bins):
        return 2 * bins

    def build_counter(self, bins):
        threads = self.threads

        @cuda.jit(device=True)
        def clear(sh):
            b = cuda.threadIdx.x
            while b < 2 * bins:
                sh[b] = uint32(0)
                b += threads
            cuda.syncthreads()

        @cuda.jit(device=True)
        def count(sh, out, b):
            cuda.atomic.add(sh, (cuda.threadIdx.x % 2) * bins + b, uint32(1))

        @cuda.jit(device=True)
        def total(sh, b):
            return uint32(sh[b] + sh[bins + b])

        return clear, count, total


def test_a_histogram_strategy_serves_every_count(registered):
    registered(Halves)
    assert "halves" in nk.strategies.available("histogram")
    x = RNG.integers(0, 20, 777)
    np.testing.assert_array_equal(nk.bincount(x, strategy="halves"), np.bincount(x))
    v = RNG.random(500)
    np.testing.assert_array_equal(nk.histogram(v, 7, strategy="halves")[0],
                                  np.histogram(v, 7)[0])
    keys = RNG.integers(0, 2**16, 100).astype(np.uint16)  # the radix sort's digit counter
    assert (nk.sort(keys, strategy=nk.RadixSort(histogram="halves")) == np.sort(keys)).all()


# --- a sort strategy: odd-even transposition in one block per row ---------------------------


class OddEven(SortStrategy):
    """Odd-even transposition sort of ``(key, index)`` pairs, one block per row of at
    most ``threads`` keys: ``n`` rounds of compare-exchanges, a barrier after each."""

    name = "odd_even"

    def __init__(self, threads: int | None = None):
        from numbakern.strategies.protocols import check_threads

        self.threads = check_threads(threads)

    @property
    def key(self):
        return (self.name, self.threads)

    def fits(self, n):
        return n <= self.threads

    def sort(self, job):  # fits(job.n) held: the front end checks it
        launch(_odd_even(self.threads, job.to_key(), job.key_dtype, job.emitter()), job.rows,
               self.threads, job.stream, job.x, job.out, job.n)


def _odd_even(threads, to_key, key_dtype, emit):
    from numba import from_dtype

    kt = from_dtype(key_dtype)

    @cuda.jit
    def kernel(x, out, n):
        keys = cuda.shared.array(threads, kt)
        idx = cuda.shared.array(threads, int32)
        tid = cuda.threadIdx.x
        base = cuda.blockIdx.x * n
        if tid < n:
            keys[tid] = to_key(x[base + tid])
            idx[tid] = tid
        cuda.syncthreads()
        for r in range(n):
            i = 2 * tid + r % 2
            if i + 1 < n and (keys[i] > keys[i + 1] or
                              (keys[i] == keys[i + 1] and idx[i] > idx[i + 1])):
                keys[i], keys[i + 1] = keys[i + 1], keys[i]
                idx[i], idx[i + 1] = idx[i + 1], idx[i]
            cuda.syncthreads()
        if tid < n:
            emit(x, out, base, tid, idx[tid])

    return kernel


def test_a_sort_strategy_serves_sort_and_argsort(registered):
    registered(OddEven)
    assert "odd_even" in nk.strategies.available("sort")
    x = RNG.integers(-5, 5, (6, 40)).astype(np.float32)
    x[2, 7] = np.nan
    np.testing.assert_array_equal(nk.sort(x, strategy="odd_even"), np.sort(x, kind="stable"))
    np.testing.assert_array_equal(nk.argsort(x, axis=0, strategy="odd_even"),
                                  np.argsort(x, axis=0, kind="stable"))
    n = OddEven().threads + 1  # a row longer than its block: refused before it runs
    for call in (lambda: nk.sort(np.zeros(n), strategy="odd_even"),
                 lambda: nk.segmented_sort(np.zeros(n), np.array([0, n]),
                                           strategy="odd_even"),
                 lambda: nk.topk(np.zeros(n), 2, strategy=nk.SortSlice(sort=OddEven()))):
        with pytest.raises(ValueError, match=f"odd_even sort strategy does not take rows "
                                             f"of {n} keys"):
            call()


# --- a select strategy: k rounds of the next minimum, a thread per row --------------------


class RepeatedMinimum(SelectStrategy):
    """Selection by ``k`` scans of the row, each finding the smallest ``(key, index)``
    after the one found last: one thread per row, any ``k`` up to ``max_k``."""

    name = "repeated_minimum"
    max_k = 16

    def __init__(self, threads: int | None = None):
        from numbakern.strategies.protocols import check_threads

        self.threads = check_threads(threads)

    @property
    def key(self):
        return (self.name, self.threads)

    def select(self, job):
        self.check(job.n, job.k)
        launch(_repeated_minimum(job.to_key()), job.rows, 1, job.stream, job.x, job.n, job.k,
               job.values, job.indices)


def _repeated_minimum(to_key):
    @cuda.jit
    def kernel(x, n, k, values, indices):
        row = cuda.blockIdx.x
        base = row * n
        last_key = to_key(x[base])
        last = -1
        for j in range(k):
            best = -1
            best_key = last_key
            for i in range(n):
                key = to_key(x[base + i])
                after = last < 0 or key > last_key or (key == last_key and i > last)
                if after and (best < 0 or key < best_key):
                    best, best_key = i, key
            values[row * k + j] = x[base + best]
            indices[row * k + j] = best
            last, last_key = best, best_key

    return kernel


def test_a_select_strategy_serves_topk(registered):
    registered(RepeatedMinimum)
    assert "repeated_minimum" in nk.strategies.available("select")
    x = RNG.integers(-5, 5, (3, 40)).astype(np.float32)
    x[1, 7] = np.nan
    got = nk.topk(x, 6, strategy="repeated_minimum")
    order = 39 - np.argsort(x[:, ::-1], axis=1, kind="stable")[:, ::-1][:, :6]
    np.testing.assert_array_equal(got.indices, order)
    np.testing.assert_array_equal(got.values, np.take_along_axis(x, order, 1))
    got = nk.topk(x, 2, axis=0, largest=False, strategy="repeated_minimum")
    np.testing.assert_array_equal(got.indices, np.argsort(x, axis=0, kind="stable")[:2])
    with pytest.raises(ValueError, match="k=17"):
        nk.topk(x, 17, strategy="repeated_minimum")


@pytest.mark.simulator  # compare and explain run under the simulator here
def test_compare_and_explain_leave_out_a_strategy_of_ones_own_they_cannot_run(registered):
    """``compare topk`` at a k past a select's ``max_k`` shows it n/a, not WRONG;
    ``explain sorts`` records the built-in sorts and says it leaves a sort of one's own
    out; ``explain`` of that sort by name is a usage error naming the two it records."""
    from click.testing import CliRunner

    from numbakern.teach.cli import cli

    registered(RepeatedMinimum)
    registered(OddEven)
    run = CliRunner().invoke
    result = run(cli, ["compare", "topk", "-n", "2x40", "--repeat", "1"])
    row = next(line for line in result.output.splitlines() if "repeated_minimum" in line)
    assert result.exit_code == 0, result.output
    assert "n/a" in row and "k=40" in row and "k <= 16" in row and "WRONG" not in row
    result = run(cli, ["explain", "sorts", "--values", "3,1,4,1,5", "--dtype", "int32"])
    assert result.exit_code == 0, result.output
    assert "odd_even: not shown, explain records the sorts bitonic, radix" in result.output
    result = run(cli, ["explain", "odd_even", "--values", "3,1,4,1,5"])
    assert result.exit_code == 2 and "explain records the sorts ['bitonic', 'radix']" in \
        result.output


# --- the registry's own contract -----------------------------------------------------------


def test_registry_listings_and_errors():
    assert nk.strategies.available() == nk.strategies.available("reduce")
    assert nk.strategies.available("sort") == ["bitonic", "radix"]
    assert len(nk.strategies.every("reduce", threads=32)) == len(nk.strategies.available())
    with pytest.raises(ValueError, match="family must be one of"):
        nk.strategies.available("sorts")
    with pytest.raises(ValueError, match="known: bitonic, radix"):
        nk.strategies.resolve("sort", "merge")
    for family, name, hint in [("select", "bitonic", "a sort strategy: sort and argsort"),
                               ("sort", "radix_select", "a select strategy: topk"),
                               ("histogram", "two_pass/shared_tree", "a reduce strategy"),
                               ("reduce", "radix", "a sort strategy"),
                               ("scan", "warp_privatized", "a histogram strategy"),
                               ("sort", "warp_shuffle", "a block strategy"),
                               ("block", "two_pass", "a reduce strategy")]:
        with pytest.raises(ValueError, match=f"{name!r} \\({hint}"):
            nk.strategies.resolve(family, name)
    for family, name in [("select", "radix/x"), ("histogram", "decoupled_lookback/no")]:
        with pytest.raises(ValueError, match=f"{name!r}; known"):  # no family has it whole
            nk.strategies.resolve(family, name)
    with pytest.raises(TypeError, match="is a block strategy; a histogram takes"):
        nk.strategies.resolve("histogram", nk.WarpShuffle())
    with pytest.raises(TypeError, match="strategy must be None"):
        nk.strategies.resolve("block", 3)
    for family, sizes in (("sort", {"n": -1}), ("histogram", {"bins": -1}),
                          ("select", {"k": -1})):  # sizes the default is chosen for
        with pytest.raises(ValueError, match=f"{next(iter(sizes))} must be at least 0"):
            nk.strategies.resolve(family, None, **sizes)
    with pytest.raises(TypeError, match="n must be an int"):
        nk.strategies.resolve("sort", None, n=2.5)
    with pytest.raises(TypeError, match="register takes a strategy class"):
        register(int)

    class Clash(Sequential):
        name = "warp_shuffle"

    with pytest.raises(ValueError, match="registered already: WarpShuffle"):
        register(Clash)
    with pytest.warns(DeprecationWarning, match="resolve\\('reduce', spec\\)"):
        assert nk.strategies.resolve("two_pass/shared_tree") == \
            nk.strategies.resolve("reduce", "two_pass/shared_tree")



def test_every_built_in_strategy_names_its_source():
    """Its docstring cites where the algorithm comes from: a paper or report (a year),
    or the library it follows (CUB, PyTorch). two_pass, atomic_fold, the three
    histograms and sort_slice cited none."""
    import re

    for family in nk.strategies.FAMILIES:
        for name, cls in nk.strategies.REGISTRY[family].items():
            # a year closing a citation ("(NVIDIA, 2007)", "Harris 2007,", "SC 2023)"),
            # not a count such as "Default 2048 on"
            assert re.search(r"[ (,](19|20)\d\d[),]|CUB|PyTorch", cls.__doc__), \
                (family, name)


@pytest.mark.parametrize("spec, name, family", [
    ("two_pass", "two_pass/warp_shuffle", "reduce"),
    ("atomic_fold/shared_tree", "atomic_fold/shared_tree", "reduce"),
    ("warp_shuffle", "warp_shuffle", "block"),
    ("decoupled_lookback", "decoupled_lookback/warp_shuffle", "scan"),
    ("global_atomic", "global_atomic", "histogram"),
    (nk.RadixSort(), "radix", "sort"),
    (nk.strategies.SortSlice(), "sort_slice", "select"),
])
def test_describe_takes_a_strategy_of_any_family_or_its_name(spec, name, family):
    """describe('two_pass') was "'str' object has no attribute 'label'", and a strategy
    of any family but the reductions an AttributeError."""
    info = nk.strategies.describe(spec)
    assert info["name"] == name and info["family"] == family and info["threads"] >= 32
    if family in ("histogram", "sort", "select"):  # integer counts and keys
        assert info["deterministic"] is True


def test_describe_and_unregister_refuse_what_is_no_strategy(registered):
    with pytest.raises(TypeError, match="describe takes a strategy object"):
        nk.strategies.describe(nk.RadixSort)  # the class, not a strategy
    with pytest.raises(TypeError, match="describe takes a strategy object"):
        nk.strategies.describe(5)
    with pytest.raises(ValueError, match="'merge' is not registered"):
        nk.strategies.describe("merge")

    class Twin(OddEven):
        name = "global_atomic"  # a sort named as a histogram is

    registered(Twin)
    with pytest.raises(ValueError, match="'global_atomic' is registered in histogram, sort"):
        nk.strategies.describe("global_atomic")
    with pytest.raises(TypeError, match="unregister takes a strategy class"):
        unregister(int)

@pytest.mark.parametrize("make, error, message", [
    (lambda: nk.RadixSort(scan=3), TypeError,
     r"^scan must be None, a name from numbakern\.strategies\.available\('scan'\) or a scan "
     r"strategy object, got 3$"),
    (lambda: nk.RadixSort(histogram=3), TypeError,
     r"^histogram must be None, a name from numbakern\.strategies\.available\('histogram'\)"),
    (lambda: nk.RadixSort(scan="no_such_scan"), ValueError,
     r"^scan: unknown scan strategy 'no_such_scan'; known: decoupled_lookback/warp_shuffle"),
    (lambda: nk.RadixSort(histogram="halves"), ValueError,
     r"^histogram: unknown histogram strategy 'halves'; known: shared_privatized"),
    (lambda: nk.RadixSort(scan=nk.SharedPrivatized()), TypeError,
     r"^scan=SharedPrivatized\(.*\) is a histogram strategy; a scan takes one of "),
    (lambda: nk.strategies.RadixSelect(histogram=3), TypeError, r"^histogram must be None"),
    (lambda: nk.strategies.RadixSelect(sort="merge"), ValueError,
     r"^sort: unknown sort strategy 'merge'; known: bitonic, radix$"),
    (lambda: nk.strategies.SortSlice(sort=3), TypeError, r"^sort must be None"),
    (lambda: nk.sort(np.zeros(3), strategy="merge"), ValueError,
     r"^strategy: unknown sort strategy 'merge'"),
    # a class where its object belongs (its family is a class attribute)
    (lambda: nk.sum(np.zeros(3), strategy=nk.TwoPass), TypeError,
     r"^strategy must be a strategy object, not a class: pass TwoPass\(\), got the class"),
    (lambda: nk.topk(np.zeros(3), 1, strategy=nk.RadixSelect), TypeError,
     r"^strategy must be a strategy object, not a class: pass RadixSelect\(\)"),
    (lambda: nk.RadixSort(scan=nk.Blelloch), TypeError,
     r"^scan must be a strategy object, not a class: pass Blelloch\(\)"),
])
def test_a_strategy_argument_is_named_in_its_error(make, error, message):
    """A strategy's strategy arguments (a radix sort's scan and histogram) resolve as
    a function's ``strategy`` does, and each error names the argument it came in."""
    with pytest.raises(error, match=message):
        make()


def test_a_subclass_of_the_same_name_gets_its_own_kernels(registered):
    """Kernels are cached on the strategy's key, which starts with its class: a
    subclass that keeps a built-in's name cannot take or leave the built-in's kernels
    (found by a fresh-user trial), and a class registered again under a name replaces
    the old one's plans and recorded calls."""

    class OnlyThreadZero(nk.SharedTree):  # a deliberately wrong reduce: thread 0's state
        def build_reduce(self, kit):
            @cuda.jit(device=True)
            def block_reduce(s, t0, t1):
                return s

            return block_reduce

    x = np.arange(1, 101, dtype=np.int64)
    assert nk.sum(x, strategy="two_pass/shared_tree") == 5050
    assert nk.sum(x, strategy=nk.TwoPass(OnlyThreadZero(), blocks=1)) != 5050
    assert nk.sum(x, strategy="two_pass/shared_tree") == 5050

    class First(Sequential):
        name = "edited"

    class Second(OnlyThreadZero):
        name = "edited"

    registered(First)
    assert nk.sum(x, strategy="two_pass/edited") == 5050
    unregister(First)
    registered(Second)
    assert nk.sum(x, strategy="two_pass/edited") != 5050  # Second's kernel, not First's
    methods = {k: Sequential.__dict__[k] for k in ("temp_slots", "barriers", "build_reduce")}
    with pytest.raises(TypeError, match="must set needs_commutative"):
        register(type("NoCommutativity", (BlockStrategy,), {"name": "nc", **methods}))


def test_register_refuses_what_would_not_resolve_to_the_class_alone():
    """Found in a review: each of these was registered, then failed at a later call
    (an empty NotImplementedError, an unpacking error of ``every``) or silently turned
    a grid's name into a block."""
    with pytest.raises(TypeError, match=r"^NoReduce must implement barriers, build_reduce "
                                        r"\(methods of a block strategy"):
        register(type("NoReduce", (BlockStrategy,), {
            "name": "no_reduce", "needs_commutative": False,
            "temp_slots": lambda self: 1}))
    with pytest.raises(TypeError, match="Can't instantiate abstract class NoScan"):
        nk.cumsum(np.arange(4), strategy=type("NoScan", (nk.strategies.GridScan,),
                                              {"name": "no_scan", "deterministic": True})())
    for name in ["my/block", "", "two words"]:
        with pytest.raises(ValueError, match="must be a non-empty word without '/'"):
            register(type("Named", (Sequential,), {"name": name}))
    with pytest.raises(ValueError, match="'atomic_fold' names a reduction strategy "
                                         "already"):
        register(type("Shadow", (Sequential,), {"name": "atomic_fold"}))
    grid = nk.strategies.TwoPass
    with pytest.raises(ValueError, match="'shared_tree' names a block strategy already"):
        register(type("Shadow", (grid,), {"name": "shared_tree"}))
    with pytest.raises(TypeError, match=r"needs_commutative must be True or False, got "
                                        r"'no'"):
        register(type("Flagged", (Sequential,), {"name": "flagged",
                                                 "needs_commutative": "no"}))
    assert nk.strategies.resolve("reduce", "atomic_fold") == nk.AtomicFold(nk.WarpShuffle())
    assert nk.strategies.available("block") == ["warp_shuffle", "shared_tree",
                                                "hillis_steele", "blelloch"]


def test_a_strategys_repr_makes_it_again():
    """``repr`` names every option that changes what a strategy runs: evaluated, it gives
    a strategy of the same key (two that run differently never print alike)."""
    import numbakern.strategies as namespace
    from numbakern.strategies import DecoupledLookback, WarpShuffle, every
    from numbakern.strategies.registry import FAMILIES

    made = [s for family in FAMILIES for s in every(family, threads=32)]
    made += [DecoupledLookback(WarpShuffle(threads=32), items=2, publish_prefix=False,
                               hold="registers"),
             DecoupledLookback(WarpShuffle(threads=32), items=2, vectors=False)]
    for strategy in made:
        assert eval(repr(strategy), vars(namespace)).key == strategy.key, repr(strategy)
    assert len({repr(s) for s in made}) == len({s.key for s in made})


def test_a_strategy_class_shows_its_own_parameters():
    """``help()`` and ``inspect.signature`` show each class's ``__init__`` parameters
    (the immutability metaclass's ``__call__`` would show ``*args, **kwargs``)."""
    import inspect

    from numbakern.strategies.registry import FAMILIES

    classes = {type(s) for family in FAMILIES for s in nk.strategies.every(family)}
    assert len(classes) >= 15
    for cls in classes:
        shown = list(inspect.signature(cls).parameters)
        assert shown == list(inspect.signature(cls.__init__).parameters)[1:], cls
        assert "args" not in shown and "kwargs" not in shown, cls


def test_a_named_strategy_gets_threads_by_keyword():
    """Found by a fresh-user trial: ``cls(threads)`` gave a sort of one's own, whose
    first parameter is another option, the thread count as that option; by keyword it
    is given, or refused naming the strategy and threads=."""
    from numbakern.strategies import BitonicSort

    class Own(BitonicSort):
        name = "own_sized_sort"

        def __init__(self, max_n=128):
            super().__init__(max_size=max_n)

    register(Own)
    try:
        assert nk.strategies.resolve("sort", "own_sized_sort").max_size == 128
        with pytest.raises(TypeError, match="'own_sized_sort' takes no threads= "
                                            r"\(given 64\)"):
            nk.strategies.resolve("sort", "own_sized_sort", threads=64)
    finally:
        unregister(Own)
    assert nk.strategies.resolve("sort", "bitonic", threads=64).threads == 64
