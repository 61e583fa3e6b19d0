#!/usr/bin/env bash
# Mask regression across a refactor: writes the mask of every method at 44 explicit settings (the demo workloads,
# chunked prefill, GQA, rescues, union semantics, …) with one `spattn` binary, so that the masks of two commits can
# be compared byte for byte (the .npz files are deterministic):
#   tests/regression/method_masks.sh OLD/build/tools/spattn /tmp/old
#   tests/regression/method_masks.sh NEW/build/tools/spattn /tmp/new
#   tests/regression/method_masks.sh --compare /tmp/old /tmp/new     # prints "44 masks compared, 0 differ"
# Parameters are explicit (not the defaults), so a change of defaults does not show up as a difference.
set -uo pipefail
if [[ ${1:-} == --compare ]]; then
  n=0 bad=0
  for f in "$2"/*.npz; do
    n=$((n + 1))
    cmp -s "$f" "$3/$(basename "$f")" || { echo "DIFF $(basename "$f")"; bad=$((bad + 1)); }
  done
  echo "$n masks compared, $bad differ"
  [[ $bad -eq 0 ]]
  exit
fi
S=$1 D=$2
mkdir -p "$D"
run() { name=$1; shift; "$S" run "$@" --mask-out "$D/$name.npz" --json > "$D/$name.json" || echo "FAIL $name"; }
for w in "llm --heads 4 --kv-heads 1 --seq 4096" "video --heads 2 --kv-heads 2 --seq 4096" "random --heads 2 --kv-heads 2 --seq 2048"; do
  wn=${w%% *}
  # shellcheck disable=SC2086
  {
    run sparge_$wn --workload $w --seed 1 --method sparge --sim-threshold 0.6 --cdf-threshold 0.98
    run sparge_topk_$wn --workload $w --seed 1 --method sparge --sim-threshold -0.1 --topk 0.5
    run sparge_tau_$wn --workload $w --seed 1 --method sparge --sim-threshold 0.2 --cdf-threshold 0.9 --sink
    run sale_$wn --workload $w --seed 1 --method sale --tau 0.004
    run sale8_$wn --workload $w --seed 1 --method sale --tau 0.01 --bits 8
    run anchor_$wn --workload $w --seed 1 --method anchor --theta 12 --step 16
    run anchor4_$wn --workload $w --seed 1 --method anchor --theta 4 --step 8
    run fgattn_$wn --workload $w --seed 1 --method fgattn --top-p 0.9
    run fgattn_union_$wn --workload $w --seed 1 --method fgattn --top-p 0.7 --semantics union --merge xor --tile 16x16
    run fgattn_cons_$wn --workload $w --seed 1 --method fgattn --top-p 0.8 --semantics union --merge consecutive
    run bfla_$wn --workload $w --seed 1 --method bfla --gamma 0.99
    run bfla_resc_$wn --workload $w --seed 1 --method bfla --gamma 0.9 --eta 7 --rho 0.05 --rescue-seed 3
    run bfla_tile_$wn --workload $w --seed 1 --method bfla --gamma 0.9 --eta 5 --rescue-grid tile --block 128 --group 32
  }
done
chunk="--workload llm --seq 3000 --seq-q 1000 --heads 4 --kv-heads 2 --seed 2"
# shellcheck disable=SC2086
{
  run bfla_chunk $chunk --method bfla --gamma 0.95
  run sparge_chunk $chunk --method sparge --sim-threshold 0.2 --cdf-threshold 0.9
  run sale_chunk $chunk --method sale --tau 0.01
  run anchor_chunk $chunk --method anchor --theta 6 --step 4
  run fgattn_chunk $chunk --method fgattn --top-p 0.8
}
