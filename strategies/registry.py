"""The registry: one table of strategies per family, and one way to resolve a name.

``REGISTRY[family][name]`` is a strategy class; :func:`register` adds one (the one
line a new strategy needs beside its file), :func:`resolve` turns what a caller
passes (``None``, a name, an object) into a strategy of the family, and
:func:`available` lists the names. Families and their contracts:
``strategies/protocols.py``. This module imports no strategy (it knows them by their
``family`` and ``name`` attributes), so any strategy module may import it.

A change to the registry drops every cached plan and recorded call
(``numbakern/runtime/memo.py``, ``replay.py``): a name may then mean another class.
"""

from __future__ import annotations

import warnings

from numbakern.runtime import memo, replay
from numbakern.runtime.checks import check_count

#: the families, in the order listings show them
FAMILIES = ("block", "reduce", "scan", "histogram", "sort", "select")

#: family -> {name: class}, in the order listings show them (defaults first)
REGISTRY: dict[str, dict[str, type]] = {family: {} for family in FAMILIES}

#: what a strategy of each family is called in messages
_NOUN = {"block": "block", "reduce": "reduction", "scan": "scan", "histogram": "histogram",
         "sort": "sort", "select": "selection"}

#: the grid each grid family takes when only a block is named, and the default block
_DEFAULT_GRID = {"reduce": "two_pass", "scan": "decoupled_lookback"}
DEFAULT_BLOCK = "warp_shuffle"


def register(cls: type) -> type:
    """Add a strategy class to its family's registry (by ``cls.family`` and
    ``cls.name``); returns it, so it serves as a class decorator.

    Raises:
        TypeError: ``cls`` is not a class of one of the families (a subclass of a
            base in ``strategies/protocols.py`` has its ``family``), leaves one of
            its family's methods unimplemented, or lacks one of its flags (or sets
            one to anything but a bool).
        ValueError: its name is empty, holds a ``/`` or a space (a ``"grid/block"``
            name would not read back), is taken in its family by another class, or
            (a block's, or a reduce or scan grid's) names the other kind: a block
            called ``"two_pass"`` would turn ``strategy="two_pass"`` into another
            grid.
    """
    family, name = getattr(cls, "family", None), getattr(cls, "name", None)
    if not isinstance(cls, type) or family not in FAMILIES or not isinstance(name, str):
        raise TypeError(f"register takes a strategy class (a subclass of a base in "
                        f"numbakern.strategies.protocols, with a name), got {cls!r}")
    _check_contract(cls, family)
    _check_name(cls, family, name)
    REGISTRY[family][name] = cls
    _forget()
    return cls


def _check_contract(cls: type, family: str) -> None:
    """``TypeError`` for a class missing what its family's protocol asks of it."""
    abstract = sorted(getattr(cls, "__abstractmethods__", ()))
    if abstract:
        raise TypeError(f"{cls.__name__} must implement {', '.join(abstract)} (methods "
                        f"of a {family} strategy: strategies/protocols.py)")
    missing = [a for a in _REQUIRED.get(family, ()) if not hasattr(cls, a)]
    if missing:
        raise TypeError(f"{cls.__name__} must set {', '.join(missing)} (class attributes "
                        f"of a {family} strategy: strategies/protocols.py)")
    flags = [a for a in _REQUIRED.get(family, ()) if not isinstance(getattr(cls, a), bool)]
    if flags:
        raise TypeError(f"{cls.__name__}: {', '.join(flags)} must be True or False, got "
                        f"{', '.join(repr(getattr(cls, a)) for a in flags)}")


def _check_name(cls: type, family: str, name: str) -> None:
    """``ValueError`` for a name that would not resolve to ``cls`` alone."""
    if not name or "/" in name or any(c.isspace() for c in name):
        raise ValueError(f"{cls.__name__}: a strategy's name must be a non-empty word "
                         f"without '/' or spaces, got {name!r}")
    known = REGISTRY[family].get(name)
    if known is not None and known is not cls:
        raise ValueError(f"a {family} strategy named {name!r} is registered already: "
                         f"{known.__name__} (unregister it first)")
    others = ("reduce", "scan") if family == "block" else \
        ("block",) if family in _DEFAULT_GRID else ()
    clash = next((f for f in others if name in REGISTRY[f]), None)
    if clash is not None:
        raise ValueError(f"{cls.__name__}: {name!r} names a {_NOUN[clash]} strategy "
                         f"already, and a name alone may mean either a grid or a block "
                         f"(strategy={name!r}): choose another")


#: class attributes each family's contract asks for (beyond ``name``)
_REQUIRED = {"block": ("needs_commutative",), "reduce": ("deterministic", "needs_commutative"),
             "scan": ("deterministic",), "histogram": ("privatized",)}


def _forget() -> None:
    memo.forget()
    replay.forget()


def unregister(cls: type) -> None:
    """Remove a class :func:`register` added (a throwaway strategy in a test); a
    strategy class not registered (or registered under another) is left as is.

    Raises:
        TypeError: ``cls`` is not a strategy class (one with a family and a name).
    """
    family, name = getattr(cls, "family", None), getattr(cls, "name", None)
    if not isinstance(cls, type) or family not in FAMILIES or not isinstance(name, str):
        raise TypeError(f"unregister takes a strategy class (a subclass of a base in "
                        f"numbakern.strategies.protocols, with a name), got {cls!r}")
    if REGISTRY[family].get(name) is cls:
        del REGISTRY[family][name]
        _forget()


def block_names(scan: bool = False) -> list[str]:
    """The registered block strategies (``scan``: those with a block scan)."""
    return [name for name, cls in REGISTRY["block"].items() if not scan or cls.offers_scan()]


def available(family: str = "reduce", *, scan: bool = False) -> list[str]:
    """The names :func:`resolve` takes for ``family``.

    ``"reduce"`` and ``"scan"``: every ``"grid/block"`` pair (scans: blocks with a
    block scan), ``["two_pass/warp_shuffle", ...]``; ``"block"``, ``"histogram"``,
    ``"sort"``, ``"select"``: the names. ``available("block", scan=True)``: blocks with a scan.

    Raises:
        ValueError: an unknown family.
    """
    family = _check_family(family)
    if family in _DEFAULT_GRID:
        return [f"{g}/{b}" for g in REGISTRY[family] for b in block_names(family == "scan")]
    if family == "block":
        return block_names(scan)
    return list(REGISTRY[family])


def every(family: str, *, threads: int | None = None, **options) -> list:
    """One strategy of each name :func:`available` lists for ``family``, made with
    ``threads`` per block (``None``: each class's default) and ``options`` (for the
    grid families, passed to the grid: ``every("reduce", threads=32, blocks=2)``).
    What a test or a benchmark runs to cover a family from the registry itself.

    Raises:
        ValueError: an unknown family; ``threads`` not a multiple of 32 from 32 to
            1024, or an option out of its range (as the classes raise it).
        TypeError: ``threads`` not an int, or an option a class of the family does not
            take.
    """
    family = _check_family(family)
    if family in _DEFAULT_GRID:
        return [REGISTRY[family][g](block=_block(b, threads), **options)
                for g, b in (name.split("/") for name in available(family))]
    return [REGISTRY[family][name](**({} if threads is None else {"threads": threads}),
                                   **options) for name in available(family)]


def available_scans() -> list[str]:
    """Every scan ``"grid/block"`` name: ``available("scan")``."""
    return available("scan")


def resolve(family, spec=None, *, threads: int | None = None, n: int = 0, bins: int = 1,
            k: int = 1, argument: str = "strategy"):
    """Turn a strategy spec into a strategy of ``family``.

    Args:
        family: ``"block"``, ``"reduce"``, ``"scan"``, ``"histogram"``, ``"sort"`` or
            ``"select"``.
        spec: ``None`` (the family's default), a strategy object of the family, a name
            from :func:`available`, or for ``"reduce"``/``"scan"`` a block strategy
            (run under the family's default grid).
        threads: threads per block when ``spec`` is a name or ``None``.
        n: the row length a sort is for (``None`` then picks ``bitonic`` for rows that
            fit one block, else ``radix``).
        bins: the bins a histogram is for (``None`` then picks ``shared_privatized``
            when its counters fit in shared memory, else ``global_atomic``; per-warp
            counters measured 2-3% slower on an H200, bench/NOTES.md 2026-12-01).
        k: the ``k`` a selection is for (with ``n``, the row length: ``None`` then
            picks ``radix_block_select``, a block per row, for ``k`` up to its limit
            (2048) on rows of at most ``SELECT_BLOCK_ROWS`` elements, else
            ``radix_select``).
        argument: the caller's argument that ``spec`` came in (``"scan"`` of
            ``RadixSort(scan=...)``), named in every error message.

    Raises:
        ValueError: an unknown family or name (the message lists the known ones);
            ``threads`` not a multiple of 32 from 32 to 1024; ``n``, ``bins`` or ``k``
            below 0 (read where ``spec`` is None).
        TypeError: a strategy object of another family, a strategy class, or anything
            else; ``n``, ``bins`` or ``k`` not an int.
    """
    if family not in FAMILIES and _a_reduce_spec(family):  # the older resolve(spec, threads)
        warnings.warn("numbakern.strategies.resolve(spec) is resolve('reduce', spec) now",
                      DeprecationWarning, stacklevel=2)
        return resolve("reduce", family, threads=spec)
    family = _check_family(family)
    if isinstance(spec, type):  # its family is a class attribute: it would pass below
        raise TypeError(f"{argument} must be a strategy object, not a class: pass "
                        f"{spec.__name__}(), got the class {spec.__name__}")
    kind = getattr(spec, "family", None)
    if kind == family:
        return spec
    if kind is not None:
        if family in _DEFAULT_GRID and kind == "block":
            return REGISTRY[family][_DEFAULT_GRID[family]](block=spec)
        raise TypeError(f"{argument}={spec!r} is a {_NOUN[kind]} strategy; a {_NOUN[family]} "
                        f"takes one of {', '.join(available(family))}")
    if spec is not None and not isinstance(spec, str):
        raise TypeError(f"{argument} must be None, a name from numbakern.strategies."
                        f"available({family!r}) or a {family} strategy object, got {spec!r}")
    if family in _DEFAULT_GRID:
        return _grid_from_name(family, spec, threads, argument)
    if family == "block":
        return _block(DEFAULT_BLOCK if spec is None else spec, threads, argument)
    if spec is None:
        return _default(family, _size(n, "n"), _size(bins, "bins"), threads, _size(k, "k"))
    if spec not in REGISTRY[family]:
        raise ValueError(f"{argument}: unknown {family} strategy {spec!r}"
                         f"{_elsewhere(family, spec)}; known: {', '.join(REGISTRY[family])}")
    cls = REGISTRY[family][spec]
    return cls() if threads is None else _with_threads(cls, threads, argument)


def _with_threads(cls, threads: int, argument: str):
    """``cls(threads=threads)``: by keyword, so that a strategy of one's own whose first
    parameter is another option is not given the thread count as that option."""
    try:
        return cls(threads=threads)
    except TypeError as exc:
        if "threads" not in str(exc):
            raise
        raise TypeError(f"{argument}: the {cls.family} strategy {cls.name!r} takes no "
                        f"threads= (given {threads}); its __init__ must take threads= to be "
                        "resolved with a thread count") from exc


def _a_reduce_spec(spec) -> bool:
    """Whether ``spec`` reads as the older form's first argument: None, a strategy
    object, or a reduction strategy's name (``"two_pass/warp_shuffle"``, ``"two_pass"``,
    ``"warp_shuffle"``)."""
    if spec is None or getattr(spec, "family", None) is not None:
        return True
    if not isinstance(spec, str):
        return False
    grid, _, block = spec.partition("/")
    return grid in REGISTRY["reduce"] or grid in REGISTRY["block"] or block in REGISTRY["block"]


def _check_family(family) -> str:
    if not isinstance(family, str) or family not in FAMILIES:
        raise ValueError(f"family must be one of {list(FAMILIES)}, got {family!r}")
    return family


#: the longest rows ``resolve("select")`` gives a block each (longer: radix select,
#: whose passes spread a row over many blocks)
SELECT_BLOCK_ROWS = 1 << 17


def _default(family: str, n: int, bins: int, threads, k: int = 1):
    if family == "select":
        block = REGISTRY["select"]["radix_block_select"](threads)
        if block.fits(n, k) and n <= SELECT_BLOCK_ROWS:
            return block
        return REGISTRY["select"]["radix_select"](threads)
    if family == "sort":
        bitonic = REGISTRY["sort"]["bitonic"](threads)
        return bitonic if bitonic.fits(n) else REGISTRY["sort"]["radix"](threads)
    shared = REGISTRY["histogram"]["shared_privatized"](threads)
    return shared if shared.fits(bins) else REGISTRY["histogram"]["global_atomic"](threads)


def _block(name: str, threads, argument: str = "block"):
    if name not in REGISTRY["block"]:
        raise ValueError(f"{argument}: unknown block strategy {name!r}"
                         f"{_elsewhere('block', name)}; known: {', '.join(REGISTRY['block'])}")
    return REGISTRY["block"][name](threads)


# The functions that take each family's strategies, for a strategy given to another
_TAKERS = {"block": "sum, cumsum, softmax, ... take it as their block",
           "reduce": "sum, max, argmax, ... take it",
           "scan": "cumsum, associative_scan, ... take it",
           "histogram": "histogram and bincount take it", "sort": "sort and argsort take it",
           "select": "topk, partition, median, ... take it"}


def _elsewhere(family: str, name: str) -> str:
    """`` (a sort strategy: sort and argsort take it)`` where ``name`` is, whole, a
    strategy of another family (a grid's name alone included), else ``""``."""
    hints = [f"a {other} strategy: {takers}" for other, takers in _TAKERS.items()
             if other != family and (name in REGISTRY[other] or name in available(other))]
    return f" ({'; '.join(hints)})" if hints else ""


def _grid_from_name(family: str, spec: str | None, threads, argument: str):
    """A grid strategy from ``"grid/block"``, a grid name alone (block
    ``warp_shuffle``) or a block name alone (the family's default grid)."""
    grids, blocks = REGISTRY[family], block_names(family == "scan")
    if spec is None:
        return grids[_DEFAULT_GRID[family]](block=_block(DEFAULT_BLOCK, threads))
    grid_name, slash, block_name = spec.partition("/")
    if slash and not block_name:  # "two_pass/": a block was meant and left out
        grid_name = ""
    if not block_name and grid_name in REGISTRY["block"]:
        grid_name, block_name = _DEFAULT_GRID[family], grid_name
    block_name = block_name or DEFAULT_BLOCK
    if grid_name in grids and block_name in REGISTRY["block"] and block_name not in blocks:
        raise ValueError(f"{argument}: block strategy {block_name!r} has no block scan "
                         f"(build_scan), which a scan strategy needs; blocks with one: "
                         f"{', '.join(blocks)}")
    if grid_name not in grids or block_name not in blocks:
        what = "strategy" if family == "reduce" else "scan strategy"
        raise ValueError(
            f"{argument}: unknown {what} {spec!r}{_elsewhere(family, spec)}; known: "
            f"{', '.join(available(family))} "
            f"(or a grid name {sorted(grids)} or a block name {sorted(blocks)} alone)")
    return grids[grid_name](block=_block(block_name, threads))


def describe(strategy) -> dict:
    """What a strategy promises: for tables and for teaching.

    Args:
        strategy: a strategy object of any family, or a name :func:`resolve` takes,
            looked up in the one family that registers it (``"two_pass"``,
            ``"two_pass/shared_tree"``, ``"radix"``; a block's name is the block's).

    Returns:
        a dict with ``name`` (``"grid/block"`` for reductions and scans), ``family``
        and ``threads`` (per block), and those of ``deterministic``,
        ``needs_commutative`` (bools), ``barriers_per_block`` (block, reduce and scan),
        ``privatized`` (histograms, a bool) and ``max_k`` (selections, an int or
        ``None``) its family has.

    Raises:
        TypeError: ``strategy`` neither a strategy object (a strategy class is not
            one) nor a name.
        ValueError: a name no family registers, or one that several do (give the
            object, ``resolve(family, name)``).
    """
    if isinstance(strategy, str):
        strategy = resolve(_family_of(strategy), strategy)
    family = getattr(strategy, "family", None)
    if isinstance(strategy, type) or family not in FAMILIES:
        raise TypeError(f"describe takes a strategy object of a family {list(FAMILIES)} "
                        f"(such as TwoPass()) or a registered name, got {strategy!r}")
    grid = family in _DEFAULT_GRID
    block = strategy.block if grid else strategy
    info = {"name": strategy.label if grid else strategy.name, "family": family,
            "threads": block.threads}
    if family != "block":
        info["deterministic"] = family == "histogram" or strategy.deterministic
    if grid or family == "block":
        info["needs_commutative"] = (strategy.commutative_required if grid
                                     else strategy.needs_commutative)
        info["barriers_per_block"] = block.barriers()
    if family == "histogram":
        info["privatized"] = strategy.privatized
    if family == "select":
        info["max_k"] = strategy.max_k
    return info


def _family_of(name: str) -> str:
    """The one family that registers ``name`` (its grid part, for ``"grid/block"``)."""
    grid, slash, _ = name.partition("/")
    families = [f for f in (_DEFAULT_GRID if slash else FAMILIES) if grid in REGISTRY[f]]
    if len(families) != 1:
        held = f"is registered in {', '.join(families)}" if families else "is not registered"
        raise ValueError(f"describe: strategy name {name!r} {held}; give a name one family "
                         "registers (numbakern.strategies.available(family) lists them) or "
                         "the strategy object")
    return families[0]


def _size(value, name: str) -> int:
    """``value`` checked as a count of things: an int of at least 0."""
    value = check_count(value, name)
    if value < 0:
        raise ValueError(f"{name} must be at least 0, got {value}")
    return value


def resolve_scan(spec=None, threads: int | None = None):
    """``resolve("scan", spec, threads=threads)`` (the older name)."""
    return resolve("scan", spec, threads=threads)


def resolve_sort(spec=None, n: int = 0):
    """``resolve("sort", spec, n=n)`` (the older name)."""
    return resolve("sort", spec, n=n)


def resolve_histogram(spec=None, bins: int = 1):
    """``resolve("histogram", spec, bins=bins)`` (the older name)."""
    return resolve("histogram", spec, bins=bins)
