#!/usr/bin/env bash
# One device session for the GPU pipeline (GPU machine): the GPU conformance target, then the end-to-end benchmark
# (bench/e2e_bench.cpp; WORKLOADS="llm video") and its peers (bench/e2e_peers.py: cuDNN, FlexAttention) in the same
# session. The binaries are built on the build machine for sm_90a with the preset cuda-sm90 and carried in DIR with
# the Debian libraries they link:
#   cmake --preset cuda-sm90 && cmake --build --preset cuda-sm90 -j 2
#   DIR: build-cuda-sm90/tests/spattn_gpu_tests, build-cuda-sm90/bench/spattn_bench_e2e, build-cuda-sm90/tools/spattn,
#        libtbb.so.12
#   bash scripts/gpu/e2e_session.sh DIR [LENGTHS...]        (default LENGTHS: 32768 131072)
# Logs go to $OUT; the last lines are the tables.
set -uo pipefail
source "$(dirname "$0")/prelude.sh"
gpu_session "${1:?usage: e2e_session.sh DIR [LENGTHS...]}"
shift
lengths=${*:-32768 131072}
if [[ -x $dir/spattn_gpu_tests ]]; then
  gpu_tests spattn_gpu_tests 30
fi
if [[ -x $dir/spattn ]]; then  # the program's GPU path: the same columns as on the CPU
  "$dir/spattn" run --backend cuda --method sparge --workload llm --seq 8192 --heads 8 --kv-heads 2 --dim 128
  "$dir/spattn" run --backend reference --method sparge --workload llm --seq 8192 --heads 8 --kv-heads 2 --dim 128
fi
for workload in ${WORKLOADS:-llm video}; do
  rm -rf "$out/masks" && mkdir -p "$out/masks"
  WORKLOAD=$workload OUT_DIR=$out/masks "$dir/spattn_bench_e2e" $lengths > "$out/e2e_$workload.md" 2>&1
  echo "== spattn_bench_e2e ($workload) exit status: $?"
  WORKLOAD=$workload python3 bench/e2e_peers.py "$out/masks" $lengths > "$out/e2e_peers_$workload.md" 2>&1
  echo "== e2e_peers ($workload) exit status: $?"
done
rm -rf "$out/masks"
for workload in ${WORKLOADS:-llm video}; do cat "$out/e2e_$workload.md" "$out/e2e_peers_$workload.md"; done
