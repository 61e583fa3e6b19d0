#!/usr/bin/env bash
# One device session for the GPU pipeline (device machine, repository root): the GPU conformance target, then the
# end-to-end benchmark (bench/e2e_bench.cpp; WORKLOADS="llm video") and its peers (bench/e2e_peers.py: cuDNN, FlexAttention) in the same
# session. Binaries are built here for sm_90a and carried in DIR with the Debian libraries they link:
#   bash bench/e2e_session.sh DIR [LENGTHS...]     DIR holds spattn_gpu_tests, spattn_bench_e2e, spattn, libtbb.so.12
# Logs go to $OUT; the last lines are the tables.
set -uo pipefail
dir=$1
shift
lengths=${*:-32768 131072}
out=${OUT:-/tmp}
export LD_LIBRARY_PATH=$dir:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
if [[ -x $dir/spattn_gpu_tests ]]; then
  "$dir/spattn_gpu_tests" > "$out/gpu_tests.log" 2>&1
  echo "== spattn_gpu_tests exit status: $?"
  grep -E "MESSAGE|ERROR|test cases|assertions|Status" "$out/gpu_tests.log" | sed 's/^.*MESSAGE: //' | tail -30
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
