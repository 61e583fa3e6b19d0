#!/usr/bin/env bash
# SALE's estimate on the GPU machine (issue 42): an A/B of two builds of spattn_bench_e2e in one session, on the llm
# workload at 32K with the default τ: Hq 32 / Hkv 8 (the bench's shape) and Hq 6 / Hkv 2 (the trained LM of
# bench/quality). Optionally (PROFILE=1) the NEW build's candidate kernel under Nsight Compute: its source-level SASS
# instruction counts and stall reasons, where the machine's runtime lets ncu read counters.
#   here:  bash scripts/gpu/build_cuda.sh DIR   (and a baseline build in BASE_DIR)
#   there: bash scripts/gpu/sale_session.sh DIR [BASE_DIR]      (writes to $OUT when set)
# Environment: LENGTHS (default 32768), ARMS (default "sale int4 tau 0.004"), PROFILE, SASS_OBJ (an object file whose
# candidate-kernel SASS cuobjdump dumps into $OUT).
set -uo pipefail
source "$(dirname "$0")/prelude.sh"
new=$(carried_dir "$1")
base=${2:+$(carried_dir "$2")}
out=${OUT:-/tmp/sale_session}
mkdir -p "$out"
arms=${ARMS:-sale int4 tau 0.004}
lengths=${LENGTHS:-32768}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for heads in "32 8" "6 2"; do
  read -r hq hkv <<<"$heads"
  for dir in $base $new; do
    echo "== $dir  Hq $hq Hkv $hkv"
    # shellcheck disable=SC2086
    LD_LIBRARY_PATH=$dir HQ=$hq HKV=$hkv KOKKOS=0 ARMS="$arms" "$dir/spattn_bench_e2e" $lengths 2>&1 | grep -v "^workload\|^N " |
      tee -a "$out/timings.txt"
  done
done
if [[ -n ${SASS_OBJ:-} ]]; then
  cuobjdump --dump-sass "$SASS_OBJ" >"$out/sale_sass.txt" 2>&1 || echo "cuobjdump failed"
fi
if [[ -n ${PROFILE:-} ]]; then
  LD_LIBRARY_PATH=$new HQ=6 HKV=2 KOKKOS=0 ARMS="$arms" timeout 300 ncu --clock-control none -k regex:candidate_kernel -c 1 \
    --set full --import-source no -f -o "$out/candidate" "$new/spattn_bench_e2e" 32768 >"$out/ncu.log" 2>&1 ||
    echo "ncu failed: $(tail -3 "$out/ncu.log")"
  if [[ -f $out/candidate.ncu-rep ]]; then
    ncu -i "$out/candidate.ncu-rep" --page source --print-source sass --csv >"$out/candidate_source.csv" 2>&1 || true
    ncu -i "$out/candidate.ncu-rep" --page details >"$out/candidate_details.txt" 2>&1 || true
  fi
fi
echo "== estimate ms (est column), per build and shape"
grep -v "est+" "$out/timings.txt" | awk '{print $1, $2, $3, $4, $5, $6, $7, $8, $9, $10}'
