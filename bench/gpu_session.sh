#!/usr/bin/env bash
# Every GPU check and benchmark, in the order a lent H200 session should run them.
# Run from the repository root on the GPU host (the `device` tool: carry .whl/, made by
# ../shared/gpu/fetch-wheels.sh). Logs and pytest-benchmark JSON go to $OUT (or ./gpu-out).
#
#   bash bench/gpu_session.sh tests 1    # gpu-marked tests, first part (tests/api/test_[a-l]*)
#   bash bench/gpu_session.sh tests 6    # second part (tests/api/test_[m-r]*): [a-r] at once
#                                        # ran past 580 s on an H100 (2026-12-07)
#   bash bench/gpu_session.sh tests 2    # third part (tests/api/test_s*): one device
#                                        # call (600 s) holds one part;
#                                        # 5 processes on an 80 GB card, 10 on an H200
#   bash bench/gpu_session.sh tests 7    # fourth part (tests/api/test_[t-z]*): [s-z] at
#                                        # once ran past 590 s on an H100 (2026-12-07)
#   bash bench/gpu_session.sh tests 5    # the gpu tests outside tests/api, then the
#                                        # big-memory ones (half 2 with these ran past
#                                        # 585 s on an H100 at 5 processes)
#   bash bench/gpu_session.sh tests 3    # tests/api's other tests on the GPU's kernels (not
#                                        # gpu, not simulator-marked: 7.5 minutes at -n 15)
#   bash bench/gpu_session.sh tests 4    # the same for tests/core, ops, runtime, strategies
#                                        # and teach
#   bash bench/gpu_session.sh bench      # the benchmark suites
#   bash bench/gpu_session.sh demo       # the main job on real shapes
#   bash bench/gpu_session.sh pending    # what landed without a GPU since the last run:
#                                        # its gpu tests, then its benchmarks (bench/NOTES.md
#                                        # holds the predictions)
#
# Most of a fresh machine's time goes to Numba compiling kernel variants (0.3-0.5 s
# each, several hundred in the test suites), so the tests run in 15 processes: all 375
# took 3 minutes on a 16-core H200 host (2026-11-30). Both halves run in 10: at 15,
# 51 tests of the second half failed once (2026-12-03, bench/NOTES.md) and 13 of the
# first (2026-12-04: the 8192 x 50257 softmax rows, the 2^28 sorts, and the worker's
# later tests), all passing again at 4-12 processes (the 2026-12-03 failures were
# CUDA out-of-memory errors of 15 processes' largest tests at once; the later ones
# printed no traceback before the run's time limit).
set -uo pipefail
root=$PWD
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
python3 -m pip install -q --upgrade --no-deps --no-build-isolation --no-compile --target /tmp/site . \
  2>&1 | grep -v WARN
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
# Run pytest from outside the checkout so `numbakern` is the installed package (with
# numbakern.strategies), not the source folder.
pt() { (cd /tmp && python3 -m pytest -c "$root/setup.cfg" --rootdir "$root" -p no:cacheprovider \
        -W ignore::DeprecationWarning "$@"); }

gpu_mib() { nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1; }

case "${1:-tests}" in
  tests)
    marks="gpu and not bigmem"
    if [ "${2:-1}" = 1 ]; then
      files=("$root"/tests/api/test_[a-l]*.py) procs=10
    elif [ "${2}" = 6 ]; then
      files=("$root"/tests/api/test_[m-r]*.py) procs=10
    elif [ "${2}" = 3 ]; then
      files=("$root"/tests/api) procs=15 marks="not gpu and not bigmem"
    elif [ "${2}" = 4 ]; then
      files=("$root"/tests/core "$root"/tests/ops "$root"/tests/runtime "$root"/tests/strategies
             "$root"/tests/teach) procs=15 marks="not gpu and not bigmem"
    elif [ "${2}" = 5 ]; then
      files=("$root"/tests/ops "$root"/tests/runtime "$root"/tests/strategies
             "$root"/tests/teach "$root"/tests/core "$root"/tests/test_*.py) procs=10
    elif [ "${2}" = 7 ]; then
      files=("$root"/tests/api/test_[t-z]*.py) procs=10
      [ "$(gpu_mib)" -lt 100000 ] && procs=5
    else
      files=("$root"/tests/api/test_s*.py) procs=10
      # an 80 GB card holds 5 of this half's processes, not 10 (a 141 GB H200 does)
      [ "$(gpu_mib)" -lt 100000 ] && procs=5
    fi
    pt "${files[@]}" -m "$marks" -q -n "$procs" --durations=10 2>&1 \
      | tee "$out/gpu-tests-${2:-1}.log" | tail -25
    if [ "${2:-1}" = 5 ]; then
      pt "$root/tests" -m bigmem -q 2>&1 | tee "$out/gpu-bigmem.log" | tail -5
    fi
    ;;
  bench)
    for suite in reduce axes softmax half moments segments cross_entropy scans sort topk selection where; do
      [ -f "$root/bench/bench_$suite.py" ] || continue
      pt "$root/bench/bench_$suite.py" -q --benchmark-json="$out/bench_$suite.json" 2>&1 \
        | tee "$out/bench-$suite.log" | tail -3
    done
    ;;
  pending)
    procs=8
    [ "$(gpu_mib)" -lt 100000 ] && procs=4  # 8 ran out of memory on an 80 GB card
    a=$root/tests/api r=$root/tests/runtime
    pt "$a/test_argmax.py" "$a/test_scans.py" "$a/test_scan_carry.py" "$a/test_torch.py" \
       "$r/test_replay.py" "$r/test_tensor_table.py" \
       -m "gpu and not bigmem" -q -n "$procs" -rfE --tb=short 2>&1 \
      | tee "$out/pending-tests.log" | tail -25
    # what landed without a GPU, not gpu-marked, on the GPU's kernels (argmax's indices
    # alone, the single-tile scan without status words)
    pt "$a/test_argmax.py" "$a/test_scans.py" "$a/test_segment_scans.py" "$r/test_replay.py" \
       -m "not gpu and not bigmem" -q -n "$procs" -rfE --tb=short 2>&1 \
      | tee "$out/pending-api.log" | tail -25
    (cd /tmp && python3 "$root/bench/host_time.py") 2>&1 | tee "$out/host-time.log"
    ;;
  demo)
    (cd /tmp && python3 -m numbakern demo) 2>&1 | tee "$out/demo.log" | tail -40
    ;;
  *)
    echo "usage: bash bench/gpu_session.sh tests 1|tests 6|tests 2|tests 3|tests 4|tests 5|bench|demo|pending" >&2
    exit 2
    ;;
esac
