"""topk benchmarks: numbakern's select strategies beside torch.topk (GPU only).

Run: ``pytest bench/bench_topk.py --benchmark-json=topk.json``, then
``python bench/table.py topk.json``. Two cases of
issue 19: a language model's logits, (8192, 50257) float32 with k=50 (the
next-token sampler's top-k), and one row of 2^28 float32 with k=1024. GB/s count
the input read once and the k values and int64 indices of each row written once
(a selection cannot move less).

Besides every registered strategy (``numbakern.strategies.available("select")``),
the A/B variants below run in the same process: ``radix_block_select`` at other
block sizes and items a thread, and ``radix_select`` compacting a single row after its
first digit (measured slower, so asked for only), in 8-bit or 12-bit digits instead
of 11 (``/d8``, ``/d12``), with its count a pass of its own instead of fused into the digit passes
(``/unfused``), and both (``/d8-unfused``: the radix_select measured at 5.91 ms on
2^28), so one run shows what each choice is worth.

Each result is checked before timing: the values equal the k largest of each row,
largest first (``cupy.sort``'s, exactly); the indices lie in the row, none twice, and
``x`` holds those values there (equal values may be taken in any order).
"""

import pytest

import numbakern as nk
from numbakern.strategies import RadixBlockSelect, RadixSelect

CASES = {"logits_8192x50257_k50": ((8192, 50257), 50), "flat_2^28_k1024": ((1 << 28,), 1024)}
#: A/B variants: a label and a function making the strategy
VARIANTS = {
    "radix_block_select/t256": lambda: RadixBlockSelect(threads=256),
    "radix_block_select/t1024": lambda: RadixBlockSelect(threads=1024),
    "radix_block_select/i8": lambda: RadixBlockSelect(items=8),
    "radix_block_select/aggregate": lambda: RadixBlockSelect(aggregate=True),
    "radix_select/compact": lambda: RadixSelect(compact=1 << 20),
    "radix_select/d8": lambda: RadixSelect(digit_bits=8),
    "radix_select/d12": lambda: RadixSelect(digit_bits=12),
    "radix_select/unfused": lambda: RadixSelect(fuse_count=False),
    "radix_select/d8-unfused": lambda: RadixSelect(digit_bits=8, fuse_count=False),
}
#: a block per row: one block for 2^28 keys is not their case (seconds)
BLOCK_PER_ROW = ("bitonic_select", "radix_block_select")
IMPLS = [*nk.strategies.available("select"), *VARIANTS, "default", "torch"]


def _check(verify, cp, x, k):
    """The check of a (values, indices) pair: the module doc's."""
    want = cp.ascontiguousarray(cp.sort(x, axis=-1)[..., :-k - 1:-1])  # largest first
    return verify.pair(x, want)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("impl", IMPLS)
def test_topk(measure, cp, torch_cuda, verify, case, impl):
    shape, k = CASES[case]
    x = cp.random.RandomState(0).standard_normal(shape, dtype=cp.float32)  # seeded
    rows = x.size // shape[-1]
    if impl.split("/")[0] in BLOCK_PER_ROW and rows == 1:
        pytest.skip("a block per row: one block for 2^28 keys is not its case (seconds)")
    if impl == "radix_select/compact" and rows > 1:
        pytest.skip("the compaction is of a single row: the same as radix_select here")
    if impl == "torch":
        if torch_cuda is None:
            pytest.skip("PyTorch with CUDA is not installed")
        t = torch_cuda.as_tensor(x, device="cuda")
        fn = lambda: torch_cuda.topk(t, k)  # noqa: E731
    else:
        strategy = VARIANTS[impl]() if impl in VARIANTS else \
            None if impl == "default" else impl
        fn = lambda: nk.topk(x, k, strategy=strategy)  # noqa: E731
    measure(fn, x.nbytes + rows * k * (4 + 8), check=_check(verify, cp, x, k),
            op=f"topk k={k}", provider=impl, shape="x".join(map(str, shape)), dtype="float32")
