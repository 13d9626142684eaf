"""Arrays of other libraries at the public functions' door: PyTorch tensors, other
DLPack producers, and bfloat16.

The kernels below this layer read NumPy arrays, CuPy arrays and
``__cuda_array_interface__`` arrays. A call that passes anything else is translated
here, once, on the way in and on the way out:

* **PyTorch, CPU**: the tensor's NumPy view (``Tensor.numpy()``, no copy), so it runs
  as NumPy input does; results come back as CPU tensors (``torch.from_numpy``, no
  copy), scalars as 0-d tensors.
* **PyTorch, CUDA**: a CuPy array over the tensor's memory (no copy) when CuPy is
  installed, else a :class:`~numbakern.runtime.launch.DeviceBuffer` over it; the
  kernels run on torch's current stream of the tensor's device (unless ``stream=``
  is given), so they follow the caller's queued torch work without a device
  synchronisation; results come back as CUDA tensors over the result's memory
  (``torch.as_tensor`` through ``__cuda_array_interface__``, no copy). A tensor on
  another device than torch's current one is refused (``ValueError``).
* **requires_grad**: the answer is the one on ``tensor.detach()``; results are not
  part of the autograd graph.
* **Other DLPack producers** (``__dlpack__`` without ``__cuda_array_interface__``):
  read with ``numpy.from_dlpack`` (CPU) or ``cupy.from_dlpack`` (CUDA, CuPy needed);
  results are NumPy or CuPy arrays.
* **bfloat16** (a torch tensor, or a NumPy array of ``ml_dtypes.bfloat16``): the
  softmax family, cross_entropy, sort, argsort and topk (:data:`NATIVE_BFLOAT16`) read and
  write it as its 16 bits (:class:`~numbakern.core.arrays.BFloat16Bits`), the
  softmax family computing in float32 and rounding once, the sorts and topk
  ordering the bits by bfloat16's key rule. The reductions and the scans
  (:data:`WIDENED_BFLOAT16`) read it in place too
  (:class:`~numbakern.core.arrays.BFloat16Input`: each element widened to float32 as
  it is loaded) and compute as for a float32 input; a scan writes its values as
  bfloat16 bits, rounded as its kernel stores them, and so do sum, prod, max, min,
  mean, nansum, nanprod and reduce on device input (a kernel after the reduction),
  so that a tensor call's result is a view of its own memory. The other functions (partition,
  the order statistics such as median and quantile, histograms, segments,
  cumulative_sum/prod), with
  no bfloat16 kernels yet, read a float32 working copy (made on the tensor's device
  by torch; on the host for NumPy) and a :class:`CopyWarning` says so. Both of these
  accumulate in float32, as for float16, and floating results are rounded back to
  bfloat16 once (round to nearest even) unless ``dtype=`` asked for another dtype.
  A bfloat16 ``out=`` of those functions is written through a float32 one (a
  :class:`CopyWarning`). A ``dtype=bfloat16`` of input of another dtype computes in
  float32 and rounds the results once; where ``dtype=`` is the type NumPy casts ``x``
  to (:data:`CASTS_X`) each element is rounded to bfloat16 first, as there.

Nothing here imports torch: only a tensor that the caller passed leads to it.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np

from numbakern.core.arrays import (BFloat16Bits, BFloat16Input, CopyWarning, kind_of,
                                   native_order)
from numbakern.core.deliver import OutDtypeError, check_distinct, retupled
from numbakern.kernels import bfloat16
from numbakern.runtime.device import SIMULATOR, torch_stream
from numbakern.runtime.launch import DeviceBuffer, buffer
from numbakern.runtime.stacklevel import warn
from numbakern.runtime.views import refuse_replay_of_out_copy

_ALLOWED = "bool, int8-int64, uint8-uint64, float16, bfloat16, float32, float64"
# Functions whose kernels read and write bfloat16 themselves (as uint16 bits): no
# float32 copy for them.
NATIVE_BFLOAT16 = frozenset({"softmax", "log_softmax", "softmax_backward",
                             "log_softmax_backward", "cross_entropy", "sort", "argsort",
                             "topk"})
# Functions that read a bfloat16 first argument in place, each element widened to
# float32 as it is loaded (:class:`BFloat16Input`), and compute as for float32 input:
# the reductions and the scans. Their floating results are rounded to bfloat16 once.
WIDENED_BFLOAT16 = frozenset({
    "sum", "prod", "max", "min", "mean", "var", "std", "nansum", "nanprod", "nanmax",
    "nanmin", "nanmean", "nanvar", "nanstd", "argmax", "argmin", "nanargmax",
    "nanargmin", "max_with_indices", "min_with_indices", "any", "all", "count_nonzero",
    "ptp", "logsumexp", "reduce", "cumsum", "cumprod", "nancumsum", "nancumprod",
    "cummax", "cummin", "logcumsumexp", "associative_scan", "vector_norm"})
# histogram reads a bfloat16 x in place too, as its bits, binning each bit pattern as
# NumPy's bfloat16 arithmetic does (a table made with ml_dtypes: without it, a torch
# tensor's x goes through the float32 copy, binned as float32); a Dask array's
# bfloat16 chunks (ml_dtypes arrays) go to it as they are.
WIDENED_WITH_ML_DTYPES = frozenset({"histogram"})
# The arguments whose dtypes each result takes (NumPy's result_type of them), for
# functions where that is not the first argument alone (results past the last named
# follow the last group).
_RESULTS_FOLLOW = {
    "segmented_sort": (("keys",), ("values",)), "scan_by_key": (("x",),),
    # the weights' sums; the edges as histogram makes them, NumPy's dtype (bfloat16's
    # as their bits)
    "histogram": (("weights",), ()),
    "average": (("x", "weights"),),  # NumPy's result_type of the two
    **dict.fromkeys(("quantile", "percentile", "nanquantile", "nanpercentile"),
                    (("x", "q"),)),
    **dict.fromkeys(("var", "std", "nanvar", "nanstd"), (("x", "mean"),))}
# Functions whose answer for x of no elements is np.nanmean's (NumPy's special case),
# in x's dtype whatever q's.
_MEAN_OF_NOTHING = frozenset({"nanquantile", "nanpercentile"})
# Functions whose ``dtype=`` is the type NumPy casts ``x`` to before computing (a
# float16 one reads each element rounded to float16): a bfloat16 ``dtype=`` of ``x``
# of another dtype rounds its elements to bfloat16 first too (:func:`_x_as_bfloat16`).
# (Not the variances: NumPy takes their deviations from the elements as stored.)
CASTS_X = frozenset({
    "sum", "prod", "nansum", "nanprod", "mean", "nanmean", "reduce", "cumsum", "cumprod",
    "nancumsum", "nancumprod", "cumulative_sum", "cumulative_prod", "associative_scan",
    "segmented_reduce", "segmented_scan", "scan_by_key"})
# Arguments a function writes and returns: the caller gets its own object back.
OUTS = ("out", "grad_out")
# Arguments besides the first that are arrays however few their dimensions (a 0-d
# bfloat16 one is not a number to widen): the backward passes' upstream gradient.
_ARRAYS_ALWAYS = frozenset({"dy"})
# Arguments that are numbers, which torch takes as a 0-d tensor too (its float
# parameters): one is its value, of any float dtype (bfloat16 included); a CUDA one is
# read as torch reads it, through ``item()`` (which waits for the tensor's stream).
_NUMBERS = frozenset({"scale", "label_smoothing"})
_DLPACK_CPU, _DLPACK_CUDA = 1, 2
_NATIVE_MODULES = ("numpy", "cupy", "numba", "dask", "numbakern")


def is_torch(a) -> bool:
    """Whether ``a`` is a torch tensor, by its type's module alone (no import)."""
    return type(a).__module__.startswith("torch")


def _is_bfloat16_numpy(a) -> bool:
    return isinstance(a, np.ndarray) and a.dtype.name == "bfloat16"


def _is_bfloat16_scalar(a) -> bool:
    """An ``ml_dtypes.bfloat16`` scalar or 0-d array."""
    return isinstance(a, (np.ndarray, np.generic)) and a.ndim == 0 and \
        a.dtype.name == "bfloat16"


def _is_number(a) -> bool:
    return isinstance(a, (int, float, np.integer, np.floating)) and not isinstance(a, bool)


def _is_dlpack_only(a) -> bool:
    """A DLPack producer the layers below cannot read themselves."""
    return (type(a).__module__.split(".")[0] not in _NATIVE_MODULES
            and hasattr(a, "__dlpack__") and not hasattr(a, "__cuda_array_interface__"))


def is_foreign(a) -> bool:
    """Whether argument ``a`` needs translating here (cheap: type checks only)."""
    if isinstance(a, str):  # dtype="bfloat16" (np.str_ too): NumPy's name of the type
        return a == "bfloat16"
    if isinstance(a, (np.ndarray, np.generic)):
        return a.dtype.name == "bfloat16"
    if isinstance(a, (np.dtype, type)):  # dtype=bfloat16 (ml_dtypes) is translated too
        return getattr(a, "__name__", getattr(a, "name", "")) == "bfloat16"
    if isinstance(a, (int, float, type(None), tuple, list)):
        return False
    return is_torch(a) or _is_dlpack_only(a)


def foreign_call(fn, names: list[str], args: tuple, kwargs: dict):
    """Run ``fn`` with its foreign arguments translated, and translate its results.

    ``names`` are ``fn``'s positional parameter names, for messages.
    """
    if fn.__name__ in CASTS_X:
        args, kwargs = _x_as_bfloat16(fn.__name__, names, args, kwargs)
    args, kwargs, rounded = _no_bfloat16_dtype(names, args, kwargs)
    if rounded is not None and args and kind_of(args[0]) != "numpy" and \
            not is_torch(args[0]):
        raise TypeError(f"{fn.__name__}: dtype=bfloat16 of a {type(args[0]).__name__}: "
                        f"CuPy and Numba device arrays hold no bfloat16; pass a torch "
                        f"tensor (torch.as_tensor(x)), or dtype=float32")
    call = _Call(fn.__name__, _given(names, args, kwargs, "dtype"))
    first = call.first = names[0] if names else None
    if rounded is not None:  # dtype=bfloat16 of another input: float32, rounded once
        call.bfloat16, call.dtype_given, call.rounds = rounded, False, True
    if fn.__name__ in _MEAN_OF_NOTHING and args and 0 in getattr(args[0], "shape", (1,)) \
            and str(getattr(args[0], "dtype", "")).endswith("bfloat16"):
        call.rounds = True  # np.nanmean's answer, in x's dtype whatever q's
    args = tuple(call.inward(a, names[i] if i < len(names) else f"argument {i}", i == 0)
                 for i, a in enumerate(args))
    kwargs = {k: call.inward(v, k, k == first) for k, v in kwargs.items()}
    if call.rounds or (first in call.copies and not call.dtype_given):
        args, kwargs = _initial_as_bfloat16(names, args, kwargs)
    with call.stream_context(kwargs):
        try:
            result = fn(*args, **kwargs)
        except TypeError as e:
            if call.bfloat16 is not None and "float32" in str(e):
                raise bfloat16_refused(fn.__name__, e, call.refused_name(e)) from e
            raise
        call.warn_copies()
        result = call.outward(result)
        call.bump_versions()
        return result


def bfloat16_refused(name: str, error: TypeError, argument: str = "x") -> TypeError:
    """``error``, raised for the float32 a bfloat16 ``argument`` is computed as,
    restated with the dtype the caller passed (else it names a dtype they never
    gave); an ``out`` refused for the result stays an :class:`OutDtypeError`, naming
    the bfloat16 result the caller would get."""
    if isinstance(error, OutDtypeError):
        return OutDtypeError(str(error).replace("the float32 result", "the bfloat16 result"))
    return TypeError(f"{name}: {argument} has dtype bfloat16, computed as float32 "
                     f"input, which {name} refuses: {error}")


def _initial_as_bfloat16(names: list[str], args: tuple, kwargs: dict) -> tuple:
    """``(args, kwargs)`` with a number ``initial`` (by keyword or position) rounded to
    bfloat16, as NumPy's bfloat16 loop holds it, for a call whose kernels compute in
    float32 what NumPy computes in bfloat16."""
    initial = _argument(names, args, kwargs, "initial")
    if not _is_number(initial):
        return args, kwargs
    return _with_argument(names, args, kwargs, "initial", bfloat16.round_on_host(initial))


def _x_as_bfloat16(name: str, names: list[str], args: tuple, kwargs: dict) -> tuple:
    """``(args, kwargs)`` with ``x`` as NumPy's and torch's casts to a bfloat16
    ``dtype=`` make it, each element rounded to bfloat16, held as float32 (the dtype
    the kernels then compute in, rounding the results once): the sum of float32
    ``[3.4e38, -3.4e38]`` with ``dtype=bfloat16`` is NaN, as theirs, since 3.4e38
    rounds to inf. NumPy input (and CPU tensors) are cast on the host, on their way
    to the device; a CUDA tensor by torch on its device, with a :class:`CopyWarning`.
    (CuPy and Numba device arrays, which hold no bfloat16, are refused by
    :func:`foreign_call`.)"""
    dtype = _argument(names, args, kwargs, "dtype")
    if dtype is None or "bfloat16" not in str(dtype):
        return args, kwargs
    x = _argument(names, args, kwargs, "x")
    if is_torch(x):
        cast = _torch_cast(x, name)
    elif isinstance(x, (np.ndarray, np.generic, list, tuple, int, float)):
        a = np.asarray(x)
        cast = x if a.dtype.kind not in "biuf" or a.dtype.name == "bfloat16" else \
            a.astype(numpy_bfloat16(f"{name}: dtype=bfloat16")).astype(np.float32)
    else:
        return args, kwargs
    return _with_argument(names, args, kwargs, "x", cast)


def _torch_cast(t, name: str):
    """A tensor's elements rounded to bfloat16 by torch, as float32 (itself if it is
    bfloat16 or not real)."""
    import torch

    if t.dtype == torch.bfloat16 or t.dtype.is_complex:
        return t
    if t.is_cuda:
        warn(f"numbakern copied x: {name}'s dtype=bfloat16 rounds each element to "
             f"bfloat16 first, as torch's cast; x.to(torch.bfloat16) made the copy",
             CopyWarning)
    return t.detach().to(torch.bfloat16).float()


def _argument(names: list[str], args: tuple, kwargs: dict, name: str):
    """Argument ``name`` by keyword or position, None where not passed."""
    if name in kwargs:
        return kwargs[name]
    if name in names and names.index(name) < len(args):
        return args[names.index(name)]
    return None


def _with_argument(names: list[str], args: tuple, kwargs: dict, name: str, value) -> tuple:
    """``(args, kwargs)`` with argument ``name`` (by keyword or position) replaced by
    ``value``; as they are where it was not passed."""
    if name in kwargs:
        return args, {**kwargs, name: value}
    if name in names and names.index(name) < len(args):
        i = names.index(name)
        return (*args[:i], value, *args[i + 1:]), kwargs
    return args, kwargs


def _given(names: list[str], args: tuple, kwargs: dict, name: str) -> bool:
    """Whether argument ``name`` was passed (not None), by keyword or position."""
    return _argument(names, args, kwargs, name) is not None


def _no_bfloat16_dtype(names: list[str], args: tuple, kwargs: dict):
    """``dtype=`` as NumPy's: a torch dtype becomes its NumPy dtype, and bfloat16 (an
    ``ml_dtypes`` or torch dtype) is dropped where the input is bfloat16 (it asks for
    what such an input gives anyway) and becomes float32 elsewhere: the kernels hold
    no bfloat16 accumulator, so the result is computed in float32 and rounded once,
    as ``torch.softmax(x, dtype=torch.bfloat16)`` returns bfloat16.

    Returns ``(args, kwargs, rounded)``: ``rounded`` the bfloat16 dtype the float32
    results are to be rounded to, or None.
    """
    rounded = []

    def numpy_dtype(d):
        if isinstance(d, str) and d == "bfloat16":
            d = numpy_bfloat16("dtype='bfloat16'")  # as NumPy reads the name
        if d is None or "bfloat16" not in str(d):
            return _numpy_dtype(d) if is_torch(d) else d
        # (a bfloat16 out is no input, nor is a bfloat16 initial: NumPy's loop is dtype's)
        inputs = [a for n, a in zip(names, args) if n not in (*OUTS, "initial")] + \
            [a for k, a in kwargs.items() if k not in (*OUTS, "initial")]
        arrays = (a for a in inputs if not isinstance(a, (type, np.dtype)))
        if any("bfloat16" in str(getattr(a, "dtype", "")) for a in arrays):
            return None
        rounded.append(d)
        return np.dtype(np.float32)

    args, kwargs = _with_argument(names, args, kwargs, "dtype",
                                  numpy_dtype(_argument(names, args, kwargs, "dtype")))
    return args, kwargs, (_bfloat16_for(rounded[0], args) if rounded else None)


def _bfloat16_for(asked, args: tuple):
    """The bfloat16 dtype results are rounded to: torch's for a tensor first argument
    (the tensor conversion rounds), else ml_dtypes' (NumPy's ``astype`` rounds)."""
    if args and is_torch(args[0]):
        return asked
    if is_torch(asked):
        return numpy_bfloat16("dtype=torch.bfloat16 for a NumPy input")
    return np.dtype(asked)


def _has_ml_dtypes() -> bool:
    try:
        import ml_dtypes  # noqa: F401
    except ImportError:
        return False
    return True


def numpy_bfloat16(why: str) -> np.dtype:
    """ml_dtypes' bfloat16, which NumPy results of bfloat16 values take."""
    try:
        import ml_dtypes
    except ImportError:
        raise TypeError(f"{why} needs ml_dtypes (pip install ml_dtypes)") from None
    return np.dtype(ml_dtypes.bfloat16)


class _Call:
    """One call's translations: what came in, to turn results back the same way.

    Results take the first argument's type: a NumPy ``x`` with torch ``offsets`` gives
    NumPy results."""

    def __init__(self, name: str, dtype_given: bool):
        self.name = name
        self.dtype_given = dtype_given
        self.tensor = None  # the first tensor argument: results take its device
        self.device = None
        self.via_cupy = False
        self.bfloat16 = None  # the bfloat16 dtype to round floating results back to
        self.copies = []  # the arguments read through a float32 copy (warn_copies)
        self.outs: dict[int, object] = {}  # id(translated out) -> the caller's out
        self.written: list = []  # torch out tensors, whose version counters a write bumps
        self.native_bits = None  # the bfloat16 dtype of a call that read its bits
        self.widened = False  # a reduction or scan read a bfloat16 x in place
        self.rounds = False  # dtype=bfloat16 of another input: float32 results rounded
        self.first = None  # the first argument's name
        self.widened_names: set[str] = set()  # bfloat16 arguments the kernels read as float32
        self.wider: set[str] = set()  # float arguments of another dtype (NumPy's, torch's)

    # --- in ------------------------------------------------------------------------

    def inward(self, a, name: str, first: bool):
        if isinstance(a, (tuple, list)) and name in OUTS:
            return type(a)(self.inward(v, name, False) for v in a)
        if is_torch(a) and _is_tensor(a):
            if name in _NUMBERS and a.dim() == 0 and not a.dtype.is_complex and \
                    a.device.type in ("cpu", "cuda"):  # (others: _tensor_in refuses)
                return a.item()  # (a bool stays a bool, which the checks refuse)
            return self._tensor_in(a, name, first)
        if name in OUTS and a is not None:  # the caller's own out comes back as itself
            self.outs.setdefault(id(a), a)
        if isinstance(a, (np.ndarray, np.generic)) and a.dtype.kind == "f":
            self.wider.add(name)  # (bfloat16's kind is "V")
        if _is_bfloat16_scalar(a):
            if not first and name not in OUTS and name not in _ARRAYS_ALWAYS:
                # a number (initial=, scale=, q)
                self.widened_names.add(name)
                return np.float32(a)  # exactly; a typed scalar, as NumPy promotes it
            a = np.asarray(a)  # a NumPy scalar x: as its 0-d array
        if _is_bfloat16_numpy(a):
            if self._copies_out(name):
                check_distinct(a.shape, a.strides, a.itemsize, self.name, name)
            if name in OUTS and self.rounds:
                return self._rounded_out(a, a.astype(np.float32))
            if self.name in NATIVE_BFLOAT16:
                return self._bits(a.view(np.uint16), a, name)
            if first and self._widens_first():
                return self._widened(a.view(np.uint16), a.dtype, name)
            return self._widen_numpy(a, name)
        if _is_dlpack_only(a):
            return _from_dlpack(a, name)
        return a

    def _writes(self, t, name: str, torch) -> None:
        """Check a torch ``out`` as torch's own in-place writes do, and keep it to bump
        its version counter after the call (:meth:`bump_versions`): a tensor that
        autograd saved for a backward pass (``y.detach()`` of ``y = a.exp()``) then
        fails that pass, as after torch's ``out=``, instead of giving a wrong gradient.
        A replay of the call bumps the ``out`` it returns (``runtime/replay.py``)."""
        if t.requires_grad:
            raise ValueError(f"{self.name}: {name} is a tensor that requires grad; "
                             f"numbakern writes it outside autograd, which would leave "
                             f"a wrong gradient: pass {name}.detach() or a tensor that "
                             f"does not require grad")
        if t.is_inference() and not torch.is_inference_mode_enabled():
            raise ValueError(f"{self.name}: {name} is an inference tensor, which torch "
                             f"lets nothing write outside torch.inference_mode(): call "
                             f"there, or pass {name}.clone()")
        if not t.is_inference():  # inference tensors keep no version counter
            self.written.append(t)

    def bump_versions(self) -> None:
        """Bump the version counter of each torch ``out`` written, as torch's in-place
        writes do (autograd's check that a saved tensor is unchanged)."""
        if self.written:
            import torch

            for t in self.written:  # one at a time: torch 2.4 takes no list
                torch.autograd.graph.increment_version(t)

    def _tensor_in(self, t, name: str, first: bool):
        import torch

        if t.dtype not in _torch_dtypes(torch):
            raise TypeError(f"{self.name}: {name} has torch dtype {t.dtype}, which numbakern "
                            f"does not take (its functions take {_ALLOWED}, each some of "
                            f"them)")
        if t.layout != torch.strided:
            raise TypeError(f"{self.name}: {name} is a {t.layout} tensor; numbakern takes "
                            f"dense (torch.strided) tensors: pass {name}.to_dense()")
        if t.is_nested:  # strided layout, but no one shape
            raise TypeError(f"{self.name}: {name} is a nested tensor; numbakern takes "
                            f"dense tensors of one shape: pass each of {name}.unbind()")
        caller = t
        if t.dtype.is_floating_point and t.dtype != torch.bfloat16:
            self.wider.add(name)
        if name in OUTS:
            self._writes(t, name, torch)
        if t.requires_grad:
            t = t.detach()
        if t.is_neg():
            t = self._resolved_neg(t, name)
        if t.dtype == torch.bfloat16 and self._copies_out(name):
            check_distinct(tuple(t.shape), tuple(s * t.element_size() for s in t.stride()),
                           t.element_size(), self.name, name)
        if t.is_cuda:
            self._check_device(t, name, torch)
        elif not t.is_cpu:
            raise ValueError(f"{self.name}: {name} is on device {t.device}; numbakern "
                             f"takes CPU and CUDA tensors")
        if first:
            self.tensor, self.device = t, t.device
        if t.dtype == torch.bfloat16:
            if name in OUTS and self.rounds:
                wide = t.float()
                return self._rounded_out(caller, wide, self._tensor_view(wide))
            if self.name in NATIVE_BFLOAT16:
                return self._bits(self._tensor_view(t, np.dtype(np.uint16)), caller, name)
            if first and self._widens_first():
                return self._widened(self._tensor_view(t, np.dtype(np.uint16)),
                                     torch.bfloat16, name)
            if name in OUTS:
                return self._bfloat16_out(caller, t)
            if first or self.tensor is not None:
                self._note_bfloat16(torch.bfloat16, name)
            else:  # results take the first argument's type: NumPy's bfloat16
                self._note_bfloat16(numpy_bfloat16(
                    f"{self.name}: a torch bfloat16 {name} beside a NumPy first argument "
                    "(NumPy results)"), name)
            t = t.float()
        translated = self._tensor_view(t)
        if name in OUTS:
            self.outs[id(translated)] = caller
        return translated

    def _widens_first(self) -> bool:
        """Whether this function reads a bfloat16 first argument in place, widened."""
        return self.name in WIDENED_BFLOAT16 or (
            self.name in WIDENED_WITH_ML_DTYPES and _has_ml_dtypes())

    def _copies_out(self, name: str) -> bool:
        """Whether a bfloat16 argument ``name`` is an out that reaches the kernels as a
        float32 copy, which hides its layout from ``check_out``: checked here, before
        (an out read as its bits is checked there, as any other)."""
        return name in OUTS and (self.rounds or self.name not in NATIVE_BFLOAT16)

    def _resolved_neg(self, t, name: str):
        """A negated view (torch's ``is_neg()``: its memory holds its values'
        negatives, as ``z.conj().imag`` does) copied by ``resolve_neg()``, with a
        :class:`CopyWarning`; refused as an out, which numbakern writes as memory."""
        if name in OUTS:
            raise ValueError(f"{self.name}: {name} is a negated view (torch's is_neg(): "
                             f"its memory holds its values' negatives), which numbakern "
                             f"cannot write: pass a tensor without the bit")
        warn(f"numbakern copied {name}: a negated view (torch's is_neg()) holds "
             f"its values' negatives in memory; resolve_neg() made the copy",
             CopyWarning)
        return t.resolve_neg()

    def _tensor_view(self, t, dtype=None):
        """``t`` as a NumPy, CuPy or device array, its elements read as ``dtype``
        (default: its own)."""
        if t.is_cpu:
            if dtype is None:
                return t.numpy()
            return t.view(_torch_like(dtype)).numpy().view(dtype)
        cupy = _cupy()
        self.via_cupy = cupy is not None
        return _device_view(t, cupy, dtype)

    def _bits(self, bits, caller, name: str):
        """A bfloat16 array as :class:`BFloat16Bits` for a function that reads them;
        its results (uint16 arrays) are read back as bfloat16 in :meth:`outward`."""
        self.native_bits = caller.dtype
        if name in OUTS:
            self.outs[id(bits)] = caller
        return BFloat16Bits(bits)

    def _widened(self, bits, dtype, name: str) -> BFloat16Input:
        """A bfloat16 first argument read in place by a reduction or a scan; its
        float32 results are rounded back to ``dtype`` in :meth:`outward`."""
        self.bfloat16 = self.native_bits = dtype  # a scan writes its values as bits
        self.widened = True
        self.widened_names.add(name)
        return BFloat16Input(bits)

    def _check_device(self, t, name: str, torch) -> None:
        if SIMULATOR:
            raise ValueError(f"{self.name}: {name} is a CUDA tensor, but numbakern runs "
                             f"under the CUDA simulator here (NUMBAKERN_SIMULATOR=1); "
                             f"pass a CPU tensor")
        index, current = t.get_device(), torch.cuda.current_device()
        if index != current:
            raise ValueError(f"{self.name}: {name} is on cuda:{index} but the current "
                             f"device is cuda:{current}; call inside "
                             f"`with torch.cuda.device({index}):`")

    def _bfloat16_out(self, caller, t):
        """A bfloat16 ``out`` cannot be written by the kernels: compute into a float32
        one and copy it over, rounding."""
        self._note_bfloat16(t.dtype, "out")
        wide = t.float()
        translated = self._tensor_view(wide)
        self.outs[id(translated)] = (caller, wide)
        return translated

    def _rounded_out(self, caller, wide, translated=None):
        """A bfloat16 ``out`` of a call whose ``dtype=bfloat16`` asks float32 input's
        results rounded once: the kernels write the float32 ``wide`` (``translated``:
        its view for them; default ``wide`` itself), copied over rounding, as a call
        without ``out`` rounds its float32 result. No ``CopyWarning``: that call holds
        the same float32 result."""
        translated = wide if translated is None else translated
        self.outs[id(translated)] = (caller, wide)
        return translated

    def _widen_numpy(self, a: np.ndarray, name: str) -> np.ndarray:
        self._note_bfloat16(a.dtype, name)
        wide = a.astype(np.float32)
        if name in OUTS:
            self.outs[id(wide)] = (a, wide)
        return wide

    def refused_name(self, error: TypeError) -> str:
        """The bfloat16 argument a refusal names (else the first one noted; x for
        a widened first argument)."""
        names = self.copies or sorted(self.widened_names) or [self.first or "x"]
        return next((n for n in names if n in str(error)), names[0])

    def _note_bfloat16(self, dtype, name: str) -> None:
        self.bfloat16 = dtype
        self.copies.append(name)
        self.widened_names.add(name)

    def warn_copies(self) -> None:
        """The ``CopyWarning`` of each bfloat16 argument read through a float32 copy:
        after the call, so that a call that refuses the float32 input raises its
        error alone."""
        for name in self.copies:
            verb = "write" if name in OUTS else "read"
            warn(f"{self.name}: {name} is bfloat16, which the kernels {verb} "
                 f"through a float32 copy (twice its size)", CopyWarning)

    def stream_context(self, kwargs: dict):
        """Torch's current stream as CuPy's (or as ``stream=``) for a CUDA tensor call
        that names no stream of its own."""
        t = self.tensor
        if t is None or not t.is_cuda or kwargs.get("stream") is not None:
            return _nothing()
        index = self.device.index
        handle = torch_stream(index)
        if self.via_cupy:
            return _cupy_stream(handle, index)
        kwargs["stream"] = handle
        return _nothing()

    # --- out -----------------------------------------------------------------------

    def outward(self, r, index: int = 0):
        """Result ``r`` (item ``index`` of the call's results) in the caller's types."""
        if r is None:  # a result that is not there (cross_entropy's report on host targets)
            return None
        if isinstance(r, tuple):
            return retupled(r, [self.outward(v, i) for i, v in enumerate(r)])
        if isinstance(r, list):
            return [self.outward(v, index) for v in r]
        mine = self.outs.get(id(r))
        if mine is not None:
            return self._out_back(mine)
        if self.native_bits is not None and np.dtype(getattr(r, "dtype", "O")) == np.uint16 \
                and not (self.widened and self.dtype_given):
            return self._from_bits(r)  # bfloat16 bits (a dtype= result is itself)
        rounds = self._rounds_back(index)
        if rounds:
            r = self._round_back(r)
        if self.tensor is None:
            return r
        return self._as_tensor(r, rounds)

    def _rounds_back(self, index: int) -> bool:
        """Whether result ``index``'s float32 values go back to bfloat16: ``dtype=``
        asked for it, or the arguments whose dtypes that result takes
        (:data:`_RESULTS_FOLLOW`, else the first) hold a bfloat16 one and no float of
        another dtype (NumPy's result_type: a float32 ``values`` sorted by bfloat16
        keys stays float32, so does the quantile of bfloat16 ``x`` at float32 ``q``)."""
        if self.bfloat16 is None or self.dtype_given:
            return False
        if self.rounds:
            return True
        follows = _RESULTS_FOLLOW.get(self.name)
        group = follows[min(index, len(follows) - 1)] if follows else (self.first,)
        return any(n in self.widened_names for n in group) and \
            not any(n in self.wider for n in group)

    def _out_back(self, mine):
        if isinstance(mine, tuple):  # a bfloat16 out computed in float32
            caller, wide = mine
            refuse_replay_of_out_copy()
            if isinstance(caller, np.ndarray):
                caller[...] = wide.astype(caller.dtype)
            else:
                caller.detach().copy_(wide)
            return caller
        return mine

    def _from_bits(self, r):
        """A uint16 result of a function that wrote bfloat16 bits, as bfloat16."""
        if self.tensor is None:
            return r.view(self.native_bits)
        import torch

        if isinstance(r, (np.ndarray, np.generic)):
            return torch.from_numpy(np.asarray(r).view(np.int16)).view(torch.bfloat16)
        return torch.as_tensor(_device_view_as(r, np.int16), device=self.device) \
            .view(torch.bfloat16)

    def _round_back(self, r):
        """float32 results of bfloat16 input back to bfloat16 (torch rounds tensors
        later, in :meth:`_as_tensor`)."""
        if self.tensor is not None or np.asarray(r).dtype != np.float32:
            return r
        if isinstance(r, np.generic):  # a scalar stays one, a 0-d array an array
            return np.asarray(r).astype(self.bfloat16)[()]
        return r.astype(self.bfloat16)

    def _as_tensor(self, r, rounds: bool):
        import torch

        if isinstance(r, (bool, int, float, np.generic, np.ndarray)):
            # torch holds native byte order alone: a result that keeps a big-endian
            # NumPy argument's (weights, values) is converted
            out = torch.from_numpy(native_order(np.asarray(r)))
        else:  # CuPy or Numba memory, through __cuda_array_interface__ (no copy)
            out = torch.as_tensor(r, device=self.device)
        if self.tensor.is_cuda and out.is_cpu:
            out = out.to(self.device)
        if rounds and out.dtype == torch.float32:
            out = out.to(torch.bfloat16)
        return out


def _is_tensor(a) -> bool:
    import torch

    return isinstance(a, torch.Tensor)


@functools.lru_cache(maxsize=1)
def _torch_dtypes(torch) -> frozenset:
    names = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
             "uint64", "float16", "bfloat16", "float32", "float64"]
    return frozenset(getattr(torch, n) for n in names if hasattr(torch, n))


def _from_dlpack(a, name: str):
    device, _ = a.__dlpack_device__()
    if device == _DLPACK_CPU:
        return np.from_dlpack(a)
    if device == _DLPACK_CUDA and not SIMULATOR:
        cupy = _cupy()
        if cupy is not None:
            return cupy.from_dlpack(a)
    raise TypeError(f"{name}: a DLPack array on device type {device} needs CuPy on a GPU "
                    f"(numbakern reads CPU DLPack arrays through NumPy)")


def _device_view(t, cupy, dtype=None):
    """A CUDA tensor as a CuPy array over its memory (no copy), or as a
    :class:`DeviceBuffer` where CuPy is not installed: built from its pointer, shape
    and strides, its elements read as ``dtype`` (default: its own; the same size).
    (A DLPack exchange asks torch for its current stream again and costs tens of
    microseconds a call, more than a small reduction.)"""
    dtype = _numpy_dtype(t.dtype) if dtype is None else dtype
    shape = tuple(t.shape)
    strides = tuple(s * dtype.itemsize for s in t.stride())
    if cupy is None:
        return DeviceBuffer(t.data_ptr(), shape, strides, dtype, owner=t)
    extent = dtype.itemsize + sum((n - 1) * s for n, s in zip(shape, strides)) \
        if t.numel() else 0
    memory = cupy.cuda.UnownedMemory(t.data_ptr(), extent, t, t.device.index)
    return cupy.ndarray(shape, dtype, cupy.cuda.MemoryPointer(memory, 0), strides)


def _device_view_as(r, dtype):
    """A CuPy or device array's memory read as ``dtype`` (the same size): torch reads
    no uint16 through the array interface."""
    if type(r).__module__.startswith("cupy"):
        return r.view(dtype)
    b = buffer(r)
    return DeviceBuffer(b.ptr, b.shape, b.strides, dtype, owner=r)


def _torch_like(dtype: np.dtype):
    """The torch dtype of ``dtype``'s size for a reinterpreting view (int16 for the
    uint16 bits of bfloat16)."""
    import torch

    return {2: torch.int16}[np.dtype(dtype).itemsize]


def _numpy_dtype(torch_dtype) -> np.dtype:
    return _NUMPY_DTYPES.get(torch_dtype) or _NUMPY_DTYPES.setdefault(
        torch_dtype, np.dtype(str(torch_dtype).removeprefix("torch.")))


_NUMPY_DTYPES: dict = {}


@functools.lru_cache(maxsize=64)
def _cupy_stream(handle: int, device: int):
    """A CuPy stream object for a raw handle (made once: they are not free)."""
    cupy = _cupy()
    return cupy.cuda.ExternalStream(handle, device) if handle else cupy.cuda.Stream.null


def _cupy():
    """CuPy, or None where it is not installed."""
    try:
        import cupy
    except ImportError:
        return None
    return cupy


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def positional_names(fn) -> list[str]:
    """``fn``'s positional parameter names (for messages about its arguments)."""
    params = inspect.signature(fn).parameters.values()
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
