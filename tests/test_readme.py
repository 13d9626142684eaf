"""The README's Python examples run as written, and the values their comments claim
are the values they give.

The blocks run in order in one namespace (later ones use earlier imports and
names), as a reader pasting them into one session would. A block needing CuPy runs
only where CuPy runs on a GPU; the ``if __name__ == "__main__":`` block of the Dask
cluster example is compiled, not started (tests/api/test_dask.py starts a cluster).

A line ``expression  # value, remark`` claims ``value``: the longest start of the
comment that Python can evaluate (with NumPy's ``array``, ``nan`` and dtypes in
scope) is compared with the expression's value.
"""

import ast
import importlib.util
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import numbakern as nk

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
CLAIM_SCOPE = {"array": np.array, "nan": np.nan, "inf": np.inf, "float32": np.float32,
               "int64": np.int64, "dtype": np.dtype}


def _needs_cupy_gpu(block: str) -> bool:
    return "import cupy" in block


def _needs_missing_module(block: str) -> bool:
    """A block importing an optional extra (dask) that this machine lacks: the GPU
    host's image has none of the extras unless their wheels are carried."""
    names = re.findall(r"^\s*(?:import|from) (\w+)", block, re.MULTILINE)
    return any(importlib.util.find_spec(n) is None for n in names)


def _claim(comment: str):
    """The value a comment claims, or None: its longest evaluable start."""
    cuts = [m.start() for m in re.finditer(r"[,(;:]| \(| or ", comment)] + [len(comment)]
    for end in sorted(set(cuts), reverse=True):
        text = comment[:end].strip()
        if not text:
            continue
        try:
            return (eval(text, dict(CLAIM_SCOPE)),)  # noqa: S307 (the README's own text)
        except Exception:  # noqa: BLE001 (a remark, not a value)
            continue
    return None


def _claims(block: str):
    """``(line, expression, claimed value)`` of each single-line claim in a block."""
    for number, line in enumerate(block.splitlines(), 1):
        code, sep, comment = line.partition("  #")
        if not sep or not code.strip() or code.startswith((" ", "\t")):
            continue
        try:
            tree = ast.parse(code.strip())
        except SyntaxError:
            continue
        if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Expr):
            continue
        claim = _claim(comment.strip())
        if claim is not None:
            yield number, code.strip(), claim[0]


def _agrees(got, claimed) -> bool:
    if isinstance(claimed, tuple):
        return isinstance(got, tuple) and len(got) == len(claimed) and \
            all(_agrees(g, c) for g, c in zip(got, claimed))
    try:
        got = np.asarray(got.get() if hasattr(got, "get") else got)
    except TypeError:
        return got == claimed
    claimed = np.asarray(claimed)
    if got.shape != claimed.shape:
        return False
    if got.dtype.kind in "biu" and claimed.dtype.kind in "biu":
        return bool((got == claimed).all())
    return bool(np.allclose(got.astype(np.float64), claimed.astype(np.float64),
                            rtol=1e-6, atol=1e-8, equal_nan=True))


def test_the_readme_has_examples():
    assert len(BLOCKS) >= 5


def test_every_example_runs_and_says_what_it_gives():
    on_gpu_with_cupy = not nk.backend().is_simulator and _has_cupy()
    namespace = {"__name__": "readme"}
    checked = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nk.CopyWarning)  # the bfloat16 example says so
        for i, block in enumerate(BLOCKS):
            if (_needs_cupy_gpu(block) and not on_gpu_with_cupy) or \
                    _needs_missing_module(block):
                continue
            exec(compile(block, f"README block {i}", "exec"), namespace)  # noqa: S102
            for number, code, claimed in _claims(block):
                got = eval(code, namespace)  # noqa: S307
                assert _agrees(got, claimed), (
                    f"README block {i}, line {number}: {code} gives {got!r}, the comment "
                    f"says {claimed!r}")
                checked += 1
    assert checked >= 10


def _has_cupy() -> bool:
    try:
        import cupy  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("comment, claimed", [
    ("14 (an int64, as np.sum)", 14),
    ("array([ 3,  4,  8,  9, 14])", None),
    ("each row sums to 1", None),
])
def test_a_claim_is_the_comment_s_value(comment, claimed):
    got = _claim(comment)
    if claimed is None and comment.startswith("array"):
        assert (got[0] == np.array([3, 4, 8, 9, 14])).all()
    elif claimed is None:
        assert got is None
    else:
        assert got == (claimed,)
