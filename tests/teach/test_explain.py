"""numbakern.teach.trace and ``numbakern explain``: counts recorded from the real kernels.

The recorded counts are held to what each strategy's lesson says (5 shuffle steps
per warp reduce, one barrier per shared-tree level, one atomic per block, two
launches for two passes) and to the strategy objects' own ``barriers()``; a broken
strategy must show up in the recording.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from numba import cuda

import numbakern
from numbakern.teach.cli import cli
from numbakern.strategies import AtomicFold, SharedTree, TwoPass, WarpShuffle
from numbakern.teach.trace import SHARED, SHUFFLE, TraceError, trace_reduce

simulator_only = pytest.mark.simulator  # tracing runs under the simulator

X64 = np.random.default_rng(0).integers(0, 10, 64).astype(np.float32)


def blocks_of(trace, launch):
    return {b: c for (l, b), c in trace.blocks.items() if l == launch}


def last_launch(trace):
    return trace.combining_launches[-1]


# every strategy over 3 blocks of two warps; the small grids (two full one-warp blocks;
# one block with fewer elements than a warp) on the registry's strategies in turn
@simulator_only
@pytest.mark.parametrize("strategy, n, threads, blocks", [
    (strategy, *size) for i, strategy in enumerate(numbakern.strategies.available())
    for size in [(200, 64, 3), [(64, 32, 2), (5, 32, 1)][i % 2]]])
def test_every_element_once_and_n_minus_1_joins(strategy, n, threads, blocks):
    x = np.random.default_rng(n).integers(0, 10, n).astype(np.float32)
    trace = trace_reduce(x, "sum", strategy, threads=threads, blocks=blocks)
    assert trace.value == x.sum()
    assert trace.exact_cover
    assert trace.total("joins") == n - 1


@simulator_only
@pytest.mark.parametrize("threads", [32, 64])
def test_warp_shuffle_five_shuffle_steps_per_warp_reduce(threads):
    trace = trace_reduce(X64, "sum", "two_pass/warp_shuffle", threads=threads, blocks=2)
    for c in blocks_of(trace, trace.combining_launches[0]).values():
        # phase 1: every warp log2(32) = 5 steps; phase 3: warp 0 five more
        assert c.shuffle_steps == {w: 5 + 5 * (w == 0) for w in range(threads // 32)}
        assert c.barriers == 1 == WarpShuffle(threads).barriers()
        assert c.steps == 10


@simulator_only
@pytest.mark.parametrize("threads,levels", [(32, 5), (64, 6), (96, 7)])
def test_shared_tree_one_barrier_per_level(threads, levels):
    trace = trace_reduce(X64, "max", "two_pass/shared_tree", threads=threads, blocks=2)
    for c in trace.blocks.values():
        # stage, (96: fold 96 -> 64,) then one barrier per halving level
        assert c.barriers == 1 + levels == SharedTree(threads).barriers()
        assert c.steps == levels
        assert c.shuffle_steps == {}
        assert c.shared_stores > 0 and c.shared_loads > 0


@simulator_only
@pytest.mark.parametrize("block", ["warp_shuffle", "shared_tree"])
@pytest.mark.parametrize("op", ["sum", "max"])  # a native atomicAdd; a CAS loop (float max)
def test_atomic_fold_one_atomic_per_block(block, op):
    trace = trace_reduce(X64, op, f"atomic_fold/{block}", threads=32, blocks=2)
    assert len(trace.combining_launches) == 1
    per_block = blocks_of(trace, last_launch(trace))
    assert len(per_block) == 2
    assert all(c.atomics == 1 and c.global_stores == 0 for c in per_block.values())
    assert trace.exact_cover and trace.value == getattr(np, op)(X64)


@simulator_only
@pytest.mark.parametrize("blocks,launches", [(1, 1), (2, 2), (3, 2)])
def test_two_pass_launches(blocks, launches):
    trace = trace_reduce(X64, "sum", "two_pass/shared_tree", threads=32, blocks=blocks)
    assert len(trace.combining_launches) == launches
    assert trace.total("atomics") == 0
    if blocks > 1:  # every partial written once, then read by the second launch
        first, second = trace.combining_launches
        assert sum(c.global_stores for c in blocks_of(trace, first).values()) == blocks
        assert blocks_of(trace, second)[0].global_state_loads == blocks


@simulator_only
def test_moves_name_their_source():
    trace = trace_reduce(X64, "sum", "two_pass/warp_shuffle", threads=64, blocks=1)
    joins = [n for n in trace.nodes if trace.is_join(n)]
    shuffled = [trace.nodes[n.args[1]] for n in joins if trace.nodes[n.args[1]].via == SHUFFLE]
    offsets = sorted({m.offset for m in shuffled})
    assert offsets == [1, 2, 4, 8, 16]
    # The last join: lane 0 takes warp 0's total from shared slot 0, and warp 1's
    # total by a shuffle from lane 1, which loaded it from slot 1, stored by thread 32.
    final = trace.nodes[trace.result]
    while not trace.is_join(final):
        final = next(trace.nodes[a] for a in final.args if not trace.nodes[a].empty)
    mine, theirs = (trace.nodes[a] for a in final.args)
    assert (mine.via, mine.offset, trace.nodes[mine.args[0]].thread) == (SHARED, 0, 0)
    assert (theirs.via, trace.nodes[theirs.args[0]].thread) == (SHUFFLE, 1)
    loaded = trace.nodes[theirs.args[0]]
    assert (loaded.via, loaded.offset, trace.nodes[loaded.args[0]].thread) == (SHARED, 1, 32)
    assert final.cover == frozenset(range(64))


@simulator_only
def test_a_state_picked_up_is_shown_in_the_combine_s_operand_order():
    """A combine with the identity prints its operands in the kernel's order: lane 0
    of the second launch combines its own shared slot (left) with the identity
    shuffled from lane 1 (right), where the thread reduce folds a load onto the
    identity (left)."""
    result = CliRunner().invoke(cli, ["explain", "warp_shuffle", "-n", "40",
                                      "--threads", "64"])
    assert result.exit_code == 0, result.output
    assert "t0: [0-39] (shared slot 0, stored by t0) ⊕ identity = " in result.output
    assert "t0: identity ⊕ [0] (x[0], global load) = " in result.output


class FourStepShuffle(WarpShuffle):
    """A broken warp_shuffle whose warp reduce stops at offset 8 (4 steps)."""

    name = "four_step_shuffle"

    def build_reduce(self, kit):
        combine, shfl_down, store, load = kit.combine, kit.shfl_down, kit.store, kit.load
        identity, warps = kit.identity, self.warps

        @cuda.jit(device=True)
        def warp_reduce(s):
            offset = 1
            while offset < 16:
                s = combine(s, shfl_down(s, offset))
                offset *= 2
            return s

        @cuda.jit(device=True)
        def block_reduce(s, t0, t1):
            lane = cuda.threadIdx.x % 32
            warp = cuda.threadIdx.x // 32
            s = warp_reduce(s)
            if lane == 0:
                store(t0, t1, warp, s)
            cuda.syncthreads()
            if warp == 0:
                s = load(t0, t1, lane) if lane < warps else identity()
                s = warp_reduce(s)
            return s

        return block_reduce


@simulator_only
def test_a_broken_strategy_shows_in_the_recording():
    x = np.arange(32, dtype=np.float32)
    trace = trace_reduce(x, "sum", TwoPass(FourStepShuffle(32), blocks=1))
    assert not trace.exact_cover
    assert trace.nodes[trace.result].cover == frozenset(range(16))
    assert trace.value == x[:16].sum()
    assert trace.blocks[(1, 0)].shuffle_steps == {0: 8}


@simulator_only
def test_explain_command_tree_counts_and_json(tmp_path):
    out = tmp_path / "counts.json"
    result = CliRunner().invoke(cli, ["explain", "two_pass/shared_tree", "--values",
                                      "3,1,4,1,5", "--blocks", "1", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "result [0-4] = 14" in result.output
    assert "every element exactly once: yes" in result.output
    assert "barrier: __syncthreads()" in result.output
    counts = json.loads(out.read_text())
    assert counts["strategy"] == "two_pass/shared_tree"
    assert counts["joins"] == 4 and counts["exact_cover"]
    assert counts["barriers"] == {"1/0": 6}


@simulator_only
def test_a_block_strategy_alone_is_the_default_grid_with_it(tmp_path):
    out = tmp_path / "counts.json"
    result = CliRunner().invoke(cli, ["explain", "shared_tree", "--values", "3,1,4,1,5",
                                      "--blocks", "1", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["strategy"] == "two_pass/shared_tree"


@simulator_only
def test_explain_all_figures(tmp_path):
    pytest.importorskip("matplotlib")
    pattern = str(tmp_path / "{name}.png")
    result = CliRunner().invoke(cli, ["explain", "all", "-n", "40", "--figure", pattern])
    assert result.exit_code == 0, result.output
    for name in numbakern.strategies.available():
        png = tmp_path / (name.replace("/", "__") + ".png")
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@simulator_only
def test_explain_on_a_gpu_backend_says_how_to_run_it(monkeypatch):
    gpu = numbakern.Backend("cuda", "NVIDIA H200", (9, 0), "test")
    monkeypatch.setattr(numbakern, "backend", lambda: gpu)
    result = CliRunner().invoke(cli, ["explain"])
    assert result.exit_code == 1
    assert "NUMBAKERN_SIMULATOR=1 numbakern explain" in result.output
    assert "Traceback" not in result.output


@pytest.mark.gpu
def test_trace_refuses_a_gpu():
    with pytest.raises(TraceError, match="NUMBAKERN_SIMULATOR=1"):
        trace_reduce(X64, "sum", AtomicFold(WarpShuffle(32)))


@simulator_only
@pytest.mark.parametrize("strategy", numbakern.strategies.available())
def test_tree_numbers_steps_as_the_table_counts_them(strategy):
    """Every block's steps are listed 1, 2, ... up to the table's count (found in a
    trial: barriers used to take numbers, and a write alone showed as a step)."""
    import re

    from rich.console import Console

    from numbakern.teach.explain import tree

    trace = trace_reduce(np.arange(5, dtype=np.float32), "sum", strategy, blocks=1)
    console = Console(width=200, record=True, file=open("/dev/null", "w"))
    console.print(tree(trace, limit=1))
    text = console.export_text()
    for (launch, block), counts in trace.blocks.items():
        section = text.split(f"launch {launch}:")[1].split(f"block {block}")[1]
        section = re.split(r"block \d|launch \d|result", section)[0]
        shown = [int(k) for k in re.findall(r"step (\d+)", section)]
        assert shown == list(range(1, counts.steps + 1)), (launch, block, shown)


@simulator_only
def test_barriers_in_a_row_are_one_line():
    """Blelloch's reduce passes barriers with nothing of a 5-element result between
    them: one line says how many, and the lines still add up to the table's count."""
    result = CliRunner().invoke(cli, ["explain", "two_pass/blelloch", "--values",
                                      "3,1,4,1,5", "--blocks", "1"])
    assert result.exit_code == 0, result.output
    assert "barrier: __syncthreads() × 3, all 32 threads wait" in result.output
    lines = [line for line in result.output.splitlines() if "barrier: __syncthreads()" in line]
    shown = sum(int(line.split("× ")[1].split(",")[0]) if "×" in line else 1 for line in lines)
    trace = trace_reduce(np.array([3, 1, 4, 1, 5], np.float32), "sum", "two_pass/blelloch",
                         blocks=1)
    assert shown == trace.total("barriers")


@simulator_only
@pytest.mark.parametrize("args", [["--values", "1,2,3", "-n", "10"],
                                  ["bitonic", "--values", "1,2,3", "--size", "10"]])
def test_size_beside_values_is_a_usage_error(args):
    """--values is the input: a --size beside it would be dropped silently."""
    result = CliRunner().invoke(cli, ["explain", *args])
    assert result.exit_code == 2, result.output
    assert "'--size'" in result.stderr and "--values gives the input" in result.stderr


CANCELLING = "16777216,1,1,1,1,1,1,1,-16777216"


@simulator_only
def test_a_float_trace_says_the_library_call_may_round_otherwise():
    """The recording's grid (32 threads a block here, a thread an element) adds in
    another order than numbakern.sum's own grid: float32 7.0 here, 6.0 from the call.
    The tree says so; it claims no equality with the call, and integers need no word."""
    x = np.array(CANCELLING.split(","), np.float32)
    assert trace_reduce(x, "sum", "two_pass/shared_tree").value == 7.0
    assert numbakern.sum(x, strategy="two_pass/shared_tree") == 6.0
    result = CliRunner().invoke(cli, ["explain", "shared_tree", "--values", CANCELLING,
                                      "--limit", "1"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "result [0-8] = 7.0" in text
    assert ('numbakern.sum(x, strategy="two_pass/shared_tree") runs its own grid' in text
            and "can round differently" in text)
    assert "equals" not in text
    for values, dtype in ((CANCELLING, "int32"), ("3,1,4,1,5", "float32")):
        # integers; floats whose every partial sum is exact in any order
        result = CliRunner().invoke(cli, ["explain", "shared_tree", "--values", values,
                                          "--dtype", dtype, "--limit", "1"])
        assert result.exit_code == 0 and "round differently" not in result.output
    result = CliRunner().invoke(cli, ["explain", "--values", "0.1,0.2", "--limit", "1"])
    assert "round differently" in result.output
