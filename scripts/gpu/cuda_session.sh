#!/usr/bin/env bash
# One device session (GPU machine): the GPU conformance target, then the CUDA executor benchmark, alternating the new
# binary with an old one (A/B in the same session) when one is given. The binaries are built on the build machine
# for sm_90a with the preset cuda-sm90 and carried in one folder with the Debian libraries they link:
#   cmake --preset cuda-sm90 && cmake --build --preset cuda-sm90 -j 2
#   DIR: build-cuda-sm90/tests/spattn_gpu_tests, build-cuda-sm90/bench/spattn_bench_cuda[, an older one as
#        old_bench_cuda], libtbb.so.12
#   bash scripts/gpu/cuda_session.sh DIR [LENGTHS...]        (default LENGTHS: 8192 32768)
# Logs go to $OUT; the last lines are a short table.
set -uo pipefail
source "$(dirname "$0")/prelude.sh"
gpu_session "${1:?usage: cuda_session.sh DIR [LENGTHS...]}"
shift
lengths=${*:-8192 32768}
tests_rc=0
gpu_tests spattn_gpu_tests 25 || tests_rc=$?
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
