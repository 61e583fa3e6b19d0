#!/usr/bin/env bash
# The generators' fit to the trained models (io/src/workload.cpp, "Fit to trained models"; issue 41 asks ±30 %): the
# oracle mask's density at rel L1 5e-2 on the generator at a capture's shape, against the capture's (data/captures.npz),
# at FG-Attn's 32×32 and SpargeAttn's 128×64 tiles (documented: −19 % / +22 % for llm, −12 % / +25 % for video).
# Run by ctest with SPATTN=<the spattn binary> and SPATTN_SOURCE_DIR=<the source tree>; not in the asan preset (a data
# check, and its eight oracle sweeps take minutes under the sanitizers).
set -u
bin=${SPATTN:?set SPATTN to the spattn binary}
captures=${SPATTN_SOURCE_DIR:?set SPATTN_SOURCE_DIR}/data/captures.npz
[[ -f $captures ]] || { echo "FAIL: no $captures"; exit 1; }
failures=0
oracle_at() { "$bin" frontier --targets 5e-2 --no-progress "$@" | awk '$3 == "5e-02" { print $(NF - 1); exit }'; }
for fit in "lm|--workload llm --seq 4096 --heads 3 --kv-heads 1 --seed 1" \
           "dit|--workload video --seq 2048 --heads 2 --kv-heads 2 --seed 1"; do
  for m in "fgattn --settings 0.9" "sparge --settings 0.5"; do
    # shellcheck disable=SC2086
    want=$(oracle_at --method $m --capture "$captures:${fit%%|*}") got=$(oracle_at --method $m ${fit#*|})
    if awk -v a="$got" -v b="$want" 'BEGIN { exit !(b > 0 && a / b >= 0.7 && a / b <= 1.3) }'; then
      echo "generator fit (${fit%%|*}, $m): oracle density $got against the capture's $want"
    else
      echo "FAIL: generator fit (${fit%%|*}, $m): oracle density $got against the capture's $want"
      failures=$((failures + 1))
    fi
  done
done
exit $((failures > 0))
