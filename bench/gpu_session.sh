#!/usr/bin/env bash
# One device session (device machine, from the repository root): the GPU conformance target, then the CUDA
# executor benchmark, alternating the new binary with an old one (A/B in the same session) when one is given.
# Binaries are built here for sm_90a and carried in one folder with the Debian libraries they link:
#   bash bench/gpu_session.sh DIR [LENGTHS...]       DIR holds spattn_gpu_tests, spattn_bench_cuda[, old_bench_cuda]
# Logs go to $OUT; the last lines are a short table.
set -uo pipefail
dir=$1
shift
lengths=${*:-8192 32768}
out=${OUT:-/tmp}
export LD_LIBRARY_PATH=$dir:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
"$dir/spattn_gpu_tests" > "$out/gpu_tests.log" 2>&1
tests_rc=$?
grep -E "MESSAGE|ERROR|test cases|assertions|Status" "$out/gpu_tests.log" | sed 's/^.*MESSAGE: //' | tail -25
for round in 1 2; do
  "$dir/spattn_bench_cuda" $lengths > "$out/bench_new_$round.md" 2>&1
  [[ -x $dir/old_bench_cuda ]] && "$dir/old_bench_cuda" $lengths > "$out/bench_old_$round.md" 2>&1
done
echo "== spattn_gpu_tests exit status: $tests_rc"
for f in "$out"/bench_*_1.md "$out"/bench_*_2.md; do
  [[ -f $f ]] || continue
  echo "== $(basename "$f")"
  grep -E "^[0-9]" "$f"
done
