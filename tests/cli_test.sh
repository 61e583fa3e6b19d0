#!/usr/bin/env bash
# The spattn program on good and bad input. Run by ctest with SPATTN=<path to the binary>.
# Good input: values in the output are checked (JSON keys and numbers, file sizes, a mask that loads back).
# Bad input: each case must print exactly one line on stderr starting "spattn: error:" and exit non-zero.
set -u
bin=${SPATTN:?set SPATTN to the spattn binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; failures=$((failures + 1)); }

# --- good input -------------------------------------------------------------------------------------
json=$("$bin" run --method dense --workload llm --seq 300 --heads 4 --kv-heads 2 --dim 64 --json \
         --out "$tmp/o.npy" --mask-out "$tmp/m.npz" --mask-png "$tmp/m.png" --tile-q 32 --tile-k 16) \
  || bad "run --json exited non-zero"
for key in method backend density estimate_ms attend_ms dense_ms speedup rel_l1 max_abs; do
  [[ $json == *"\"$key\":"* ]] && ok || bad "JSON lacks key $key: $json"
done
[[ $json == *'"method":"dense"'* && $json == *'"backend":"reference"'* ]] && ok || bad "JSON method/backend: $json"
[[ $json == *'"density":1.0'* ]] && ok || bad "dense density must be 1: $json"
# 32×16 tiles chunk the keys differently from the 128×128 dense baseline: equal up to fp32 summation order.
rel=$(sed 's/.*"rel_l1":\([^,}]*\).*/\1/' <<< "$json")
awk -v r="$rel" 'BEGIN { exit !(r >= 0 && r < 1e-6) }' && ok || bad "dense (32x16) vs dense: rel_l1 $rel"
same=$("$bin" run --method dense --workload llm --seq 300 --heads 4 --kv-heads 2 --dim 64 --json) || bad "run"
[[ $same == *'"rel_l1":0.0'* && $same == *'"max_abs":0.0'* ]] && ok || bad "same tiles must be bit-exact: $same"
# float32 [1,4,300,64] = 76800 floats = 307200 bytes after a 128-byte header
size=$(stat -c %s "$tmp/o.npy")
[[ $size -eq $((307200 + 128)) ]] && ok || bad "--out size $size"
head -c 6 "$tmp/o.npy" | grep -q NUMPY && ok || bad "--out is not .npy"
info=$("$bin" inspect "$tmp/m.npz") || bad "inspect failed"
[[ $info == *"tile_q 32 tile_k 16"*"seqlen_q 300 seqlen_kv 300 causal 1"* && $info == *"density 1.000000"* ]] \
  && ok || bad "inspect: $info"
[[ $(head -c 8 "$tmp/m.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] && ok || bad "--mask-png not a PNG"
table=$("$bin" run --workload random --seq 100 --heads 1 --dim 32) || bad "table run"
[[ $table == *method*density*rel_l1*max_abs* && $table == *dense*random*reference* ]] && ok || bad "table: $table"

# A committed capture of a trained model (data/captures.npz, when the source tree is beside the binary's tests): its
# causality read from the file, SALE sparse on it.
captures=${SPATTN_SOURCE_DIR:-}/data/captures.npz
if [[ -n ${SPATTN_SOURCE_DIR:-} && -f $captures ]]; then
  cap=$("$bin" run --method sale --tau 0.1 --capture "$captures:lm" --json) || bad "run --capture"
  d=$(sed 's/.*"density":\([^,}]*\).*/\1/' <<< "$cap")
  [[ $cap == *'"shape":"B=1 Hq=3 Hkv=1 Nq=4096 Nkv=4096 D=128 Dv=128 causal bf16"'* ]] && ok || bad "capture shape: $cap"
  awk -v x="$d" 'BEGIN { exit !(x > 0.05 && x < 0.6) }' && ok || bad "SALE on the LM capture: density $d"
fi

# FG-Attn on the video workload: a sparse mask, small error, its tiles in the saved mask.
fg=$("$bin" run --method fgattn --workload video --seq 2048 --heads 2 --kv-heads 1 --dim 64 --tile 32x16 \
       --top-p 0.9 --merge xor --json --mask-out "$tmp/fg.npz") || bad "fgattn run"
fg_density=$(sed 's/.*"density":\([^,}]*\).*/\1/' <<< "$fg")
fg_rel=$(sed 's/.*"rel_l1":\([^,}]*\).*/\1/' <<< "$fg")
awk -v d="$fg_density" -v r="$fg_rel" 'BEGIN { exit !(d > 0 && d < 0.9 && r > 0 && r < 0.2) }' && ok \
  || bad "fgattn density $fg_density rel_l1 $fg_rel"
[[ $("$bin" inspect "$tmp/fg.npz") == *"tile_q 32 tile_k 16"*"causal 0"* ]] && ok || bad "fgattn mask file"
all=$("$bin" run --method fgattn --workload video --seq 1000 --heads 1 --dim 64 --top-p 1 --json) || bad "p=1"
[[ $all == *'"density":1.0'* ]] && ok || bad "fgattn p=1 must be dense: $all"

# AnchorAttention on the llm workload; θ = inf is dense attention exactly.
an=$("$bin" run --method anchor --workload llm --seq 3000 --heads 2 --kv-heads 1 --dim 64 --theta 12 --step 4 --json) \
  || bad "anchor run"
an_density=$(sed 's/.*"density":\([^,}]*\).*/\1/' <<< "$an")
awk -v d="$an_density" 'BEGIN { exit !(d > 0 && d < 1) }' && ok || bad "anchor density $an_density"
inf=$("$bin" run --method anchor --workload llm --seq 3000 --heads 1 --dim 64 --theta inf --step 4 --json) || bad "inf"
[[ $inf == *'"density":1.0'* ]] && ok || bad "anchor theta=inf must be dense: $inf"

# BFLA with chunked prefill; γ = 1 is dense attention exactly.
bf=$("$bin" run --method bfla --workload llm --seq 4096 --seq-q 1000 --heads 4 --kv-heads 2 --dim 64 --block 256 \
       --group 64 --gamma 0.95 --eta 16 --json) || bad "bfla run"
bf_density=$(sed 's/.*"density":\([^,}]*\).*/\1/' <<< "$bf")
awk -v d="$bf_density" 'BEGIN { exit !(d > 0 && d < 1) }' && ok || bad "bfla density $bf_density"
one=$("$bin" run --method bfla --workload llm --seq 2000 --heads 2 --kv-heads 1 --dim 64 --gamma 1 --json) || bad "γ=1"
[[ $one == *'"density":1.0'* && $one == *'"rel_l1":0.0'* ]] && ok || bad "bfla gamma=1 must be dense: $one"

# SpargeAttn Stage 1: a sparse mask with τ < 1; θ = 1 forces every block (dense).
sp=$("$bin" run --method sparge --workload llm --seq 3000 --heads 2 --kv-heads 1 --dim 64 --cdf-threshold 0.5 \
       --sim-threshold -1 --json) || bad "sparge run"
sp_density=$(sed 's/.*"density":\([^,}]*\).*/\1/' <<< "$sp")
awk -v d="$sp_density" 'BEGIN { exit !(d > 0 && d < 1) }' && ok || bad "sparge density $sp_density"
spd=$("$bin" run --method sparge --workload llm --seq 1000 --heads 1 --dim 64 --sim-threshold 1 --json) || bad "θ=1"
[[ $spd == *'"density":1.0'* ]] && ok || bad "sparge theta=1 must be dense: $spd"

pv=$("$bin" run --method sparge --workload llm --seq 3000 --heads 2 --kv-heads 1 --dim 64 --pv-threshold 4 --json) \
  || bad "pv run"
[[ $pv == *'"pv_skipped":'* && $pv != *'"pv_skipped":0'* ]] && ok || bad "PV-skip at threshold 4 must skip tiles: $pv"

i8=$("$bin" run --method sparge --workload llm --seq 2000 --heads 2 --kv-heads 1 --dim 64 --int8 --json) || bad "int8"
i8_rel=$(sed 's/.*"rel_l1":\([^,}]*\).*/\1/' <<< "$i8")
awk -v r="$i8_rel" 'BEGIN { exit !(r > 0 && r < 0.5) }' && ok || bad "int8 rel_l1 $i8_rel"

# SpargeAttn tuner: writes per-head parameters that `run --params` uses.
"$bin" calibrate --method sparge --l1 0.08 --l2 0.09 --seq 1024 --heads 2 --kv-heads 1 --dim 64 --samples 1 \
  --theta-steps 2 --out "$tmp/sp.json" > "$tmp/cal.txt" 2> "$tmp/cal.err" || bad "calibrate"
grep -q '"heads"' "$tmp/sp.json" && grep -q "wrote" "$tmp/cal.txt" && grep -q "100%" "$tmp/cal.err" && ok \
  || bad "calibrate output: $(cat "$tmp/cal.txt")"
tuned=$("$bin" run --method sparge --params "$tmp/sp.json" --workload llm --seq 1024 --heads 2 --kv-heads 1 --dim 64 \
          --json) || bad "run --params"
tuned_rel=$(sed 's/.*"rel_l1":\([^,}]*\).*/\1/' <<< "$tuned")
awk -v r="$tuned_rel" 'BEGIN { exit !(r >= 0 && r < 0.09) }' && ok || bad "tuned rel_l1 $tuned_rel"

# SALE: sparse at τ = 0.004, dense at τ = 0; calibration writes τ per head that run --params reads.
sa=$("$bin" run --method sale --workload llm --seq 3000 --heads 2 --kv-heads 1 --dim 64 --bits 4 --tau 0.004 --json) \
  || bad "sale run"
sa_density=$(sed 's/.*"density":\([^,}]*\).*/\1/' <<< "$sa")
awk -v d="$sa_density" 'BEGIN { exit !(d > 0 && d < 1) }' && ok || bad "sale density $sa_density"
sa0=$("$bin" run --method sale --workload llm --seq 1000 --heads 1 --dim 64 --tau 0 --json) || bad "sale tau 0"
[[ $sa0 == *'"density":1.0'* && $sa0 == *'"rel_l1":0.0'* ]] && ok || bad "sale tau=0 must be dense: $sa0"
"$bin" calibrate --method sale --theta 0.4 --seq 1024 --heads 2 --kv-heads 1 --dim 64 --samples 1 \
  --out "$tmp/sale.json" > "$tmp/scal.txt" 2> /dev/null && grep -q '"tau"' "$tmp/sale.json" && ok || bad "sale calibrate"
"$bin" run --method sale --params "$tmp/sale.json" --seq 1024 --heads 2 --kv-heads 1 --dim 64 --json > /dev/null \
  && ok || bad "sale run --params"

# .npy inputs round trip: the program's own output, used as Q, K and V, runs (f32 [1,4,300,64]).
"$bin" run --q "$tmp/o.npy" --k "$tmp/o.npy" --v "$tmp/o.npy" --json > "$tmp/files.json" && ok || bad "npy inputs"
grep -q '"rel_l1":0.0' "$tmp/files.json" && ok || bad "npy inputs result"

# --- bad input --------------------------------------------------------------------------------------
expect_error() {  # name, then the command's arguments
  local name=$1
  shift
  "$bin" "$@" > "$tmp/out" 2> "$tmp/err"
  local rc=$?
  local lines
  lines=$(wc -l < "$tmp/err")
  if [[ $rc -ne 0 && $lines -eq 1 ]] && grep -q '^spattn: error: ' "$tmp/err"; then
    ok
  else
    bad "$name: rc=$rc, stderr lines=$lines: $(cat "$tmp/err")"
  fi
}
printf 'not a numpy file at all' > "$tmp/garbage.npy"
head -c 100 "$tmp/o.npy" > "$tmp/truncated.npy"
head -c 5000 "$tmp/o.npy" > "$tmp/short.npy"
# A valid float32 [1,1,2,32] array holding a NaN, written byte by byte (header padded to 128 bytes).
{
  hdr="{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 2, 32), }"
  printf '\x93NUMPY\x01\x00\x76\x00%s' "$hdr"
  printf '%*s\n' $((128 - 10 - ${#hdr} - 1)) ''
  for i in $(seq 1 63); do printf '\x00\x00\x80\x3f'; done
  printf '\x00\x00\xc0\x7f'
} > "$tmp/nan.npy"
"$bin" run --workload random --seq 64 --heads 1 --dim 32 --out "$tmp/small.npy" > /dev/null || bad "small"

expect_error "capture without a prefix" run --capture "$tmp/m.npz"
expect_error "capture prefix absent" run --capture "$tmp/m.npz:lm"
expect_error "unknown method" run --method nosuch --seq 64 --dim 32
expect_error "unknown workload" run --workload nosuch --seq 64 --dim 32
expect_error "unknown dtype" run --dtype f64 --seq 64 --dim 32
expect_error "negative length" run --seq -5
expect_error "non-numeric length" run --seq abc
expect_error "bad head dim" run --seq 64 --dim 20
expect_error "heads not a multiple" run --seq 64 --dim 32 --heads 3 --kv-heads 2
expect_error "bad tile" run --seq 64 --dim 32 --tile-k 0
expect_error "bad tile q" run --seq 64 --dim 32 --tile-q 4096
expect_error "missing file" run --q "$tmp/none.npy" --k "$tmp/o.npy" --v "$tmp/o.npy"
expect_error "garbage file" run --q "$tmp/garbage.npy" --k "$tmp/o.npy" --v "$tmp/o.npy"
expect_error "truncated header" run --q "$tmp/truncated.npy" --k "$tmp/o.npy" --v "$tmp/o.npy"
expect_error "truncated data" run --q "$tmp/short.npy" --k "$tmp/o.npy" --v "$tmp/o.npy"
expect_error "only one file" run --q "$tmp/o.npy"
expect_error "shape mismatch" run --q "$tmp/o.npy" --k "$tmp/small.npy" --v "$tmp/small.npy"
expect_error "NaN input" run --q "$tmp/nan.npy" --k "$tmp/nan.npy" --v "$tmp/nan.npy"
expect_error "bad layout" run --q "$tmp/o.npy" --k "$tmp/o.npy" --v "$tmp/o.npy" --layout xyz
expect_error "unknown subcommand option" run --frobnicate
expect_error "no subcommand"
expect_error "inspect non-mask" inspect "$tmp/garbage.npy"
expect_error "bad --tile" run --method fgattn --seq 64 --dim 32 --tile 32by32
expect_error "bad fgattn tile" run --method fgattn --seq 64 --dim 32 --tile 24x16
expect_error "bad --merge" run --method fgattn --seq 64 --dim 32 --merge random
expect_error "bad --top-p" run --method fgattn --seq 64 --dim 32 --top-p -1
expect_error "bad --step" run --method anchor --seq 64 --dim 32 --step 0
expect_error "bad --theta" run --method anchor --seq 64 --dim 32 --theta nan
expect_error "bad --group" run --method bfla --seq 64 --dim 32 --group 48
expect_error "bad --rescue-grid" run --method bfla --seq 64 --dim 32 --rescue-grid fine
expect_error "bad --topk" run --method sparge --seq 64 --dim 32 --topk 2
expect_error "bad --pv-threshold" run --seq 64 --dim 32 --pv-threshold -2
expect_error "params with other heads" run --method sparge --params "$tmp/sp.json" --seq 1024 --heads 4 --dim 64
expect_error "calibrate bad bounds" calibrate --l1 0.1 --l2 0.05 --seq 256 --dim 32 --heads 1
expect_error "bad --bits" run --method sale --seq 64 --dim 32 --bits 3
expect_error "bad --tau" run --method sale --seq 64 --dim 32 --tau 2
expect_error "unwritable output" run --seq 64 --dim 32 --out /nonexistent/dir/o.npy

# --- bad input that once crashed, hung or was silently changed (issue 19): the exact message --------------
expect_message() {  # name, the expected message (after "spattn: error: "), then the command's arguments
  local name=$1 want=$2
  shift 2
  timeout 20 "$bin" "$@" > "$tmp/out" 2> "$tmp/err"
  local rc=$?
  local got
  got=$(cat "$tmp/err")
  if [[ $rc -ne 0 && $rc -ne 124 && $(wc -l < "$tmp/err") -eq 1 && $got == "spattn: error: $want"* ]]; then
    ok
  else
    bad "$name: rc=$rc, expected 'spattn: error: $want…', got: $got"
  fi
}
expect_message "seq overflows numel" "q [batch, heads_q, seqlen_q, head_dim]: 1 × 4 × 4611686018427387904 × 64 does not fit in 64 bits" \
  run --method dense --workload random --seq 4611686018427387904 --heads 4 --kv-heads 1 --dim 64
expect_message "huge batch (was a hang)" "q [batch, heads_q, seqlen_q, head_dim]: 4611686018427387904 × 4 × 16 × 64 does not fit in 64 bits" \
  run --workload llm --batch 4611686018427387904 --seq 16 --heads 4 --kv-heads 1 --dim 64
expect_message "anchor step overflow" "anchor step: must be in [1, 2048], got 16777217" \
  run --method anchor --seq 64 --dim 32 --step 16777217
expect_message "--tile 0x0 dense" "dense tile_q: must be in [16, 2048], got 0" run --seq 64 --dim 32 --tile 0x0
expect_message "--tile 0x0 fgattn" "fgattn tile_q (M): must be a multiple of 16 in [16, 128], got 0" \
  run --method fgattn --seq 64 --dim 32 --tile 0x0
expect_message "--tile 16x0 dense" "dense tile_k: must be in [1, 128], got 0" run --seq 64 --dim 32 --tile 16x0
expect_message "--tile 16x0 bfla" "--tile/--tile-q: bfla sets its query tile (min(128, block)); give --tile-k" \
  run --method bfla --seq 64 --dim 32 --tile 16x0
expect_message "--tile 0x16 bfla" "--tile/--tile-q: bfla sets its query tile (min(128, block)); give --tile-k" \
  run --method bfla --seq 64 --dim 32 --tile 0x16
expect_message "--tile-k 0 bfla" "bfla tile: must be in [1, 128], got 0" run --method bfla --seq 64 --dim 32 --tile-k 0
expect_message "--gamma -1" "bfla gamma: must be in [0, 1] (1 = dense, 0 = no mass rule), got -1" \
  run --method bfla --seq 64 --dim 32 --gamma -1
expect_message "--gamma 2" "bfla gamma: must be in [0, 1] (1 = dense, 0 = no mass rule), got 2" \
  run --method bfla --seq 64 --dim 32 --gamma 2
expect_message "--sim-threshold 5" "sparge theta: must be in [-1, 1] (1 = no block self-similar: dense), got 5" \
  run --method sparge --seq 64 --dim 32 --sim-threshold 5
expect_message "--cdf-threshold 2" "sparge tau: must be in [0, 1], got 2" run --method sparge --seq 64 --dim 32 --cdf-threshold 2
expect_message "anchor --theta -1" "anchor theta: must be in [0, inf] (inf = dense; or -inf: the anchor region only), got -1" \
  run --method anchor --seq 64 --dim 32 --theta -1
expect_message "--pv-vote-rows 7" "pv_vote_rows: must be 0 (the whole row block), 16, 32, 64 or 128, got 7" \
  run --seq 64 --dim 32 --pv-vote-rows 7
expect_message "--seq-q 0" "workload seqlen_q: must be in [1, 64], got 0" run --seq 64 --seq-q 0 --dim 32
expect_message "--threads 0" "--threads: Value 0 not in range 1 to 65536" run --seq 64 --dim 32 --threads 0
# Finite inputs whose scores overflow fp32: float32 [1,1,2,32], every value 1e20.
{
  hdr="{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 2, 32), }"
  printf '\x93NUMPY\x01\x00\x76\x00%s' "$hdr"
  printf '%*s\n' $((128 - 10 - ${#hdr} - 1)) ''
  for i in $(seq 1 64); do printf '\xec\x78\xad\x60'; done
} > "$tmp/huge.npy"
expect_message "scores overflow fp32" "scores overflow fp32: head_dim · max|q| · max|k| · max(scale, 1) = 3.2e+41 exceeds 2^100" \
  run --q "$tmp/huge.npy" --k "$tmp/huge.npy" --v "$tmp/huge.npy"
expect_message "--seq 1e12" "q [batch, heads_q, seqlen_q, head_dim]: 1 × 1 × 1000000000000 × 64 elements of 4 bytes exceed the limit of one array, 1099511627776 bytes (2^40, spattn::kMaxAllocationBytes)" \
  run --seq 1000000000000 --dim 64
# Output paths are checked before the work: a 16K calibration would take minutes, this must fail at once.
start=$SECONDS
expect_message "calibrate --out unwritable" "--out '/nonexistent/dir/p.json': cannot write there" \
  calibrate --seq 16384 --heads 4 --out /nonexistent/dir/p.json
expect_message "run --mask-out unwritable" "--mask-out '/nonexistent/dir/m.npz': cannot write there" \
  run --seq 16384 --heads 4 --mask-out /nonexistent/dir/m.npz
expect_message "run --out a directory" "--out '$tmp': is a directory" run --seq 16384 --heads 4 --out "$tmp"
(( SECONDS - start <= 5 )) && ok || bad "output paths were not checked before the work ($((SECONDS - start)) s)"
[[ ! -e "$tmp/probe.npy" ]] && "$bin" run --seq 64 --dim 32 --out "$tmp/probe.npy" > /dev/null && [[ -s "$tmp/probe.npy" ]] \
  && ok || bad "a writable --out must be written"
# frontier: a tiny run writes a non-empty PNG, JSON and CSV, and its point is what `run` reports for the setting.
fr=$("$bin" frontier --method fgattn --settings 0.9,0.99 --workload video --seq 600 --heads 2 --kv-heads 1 --dim 64 \
       --no-progress --plot "$tmp/fr.png" --json "$tmp/fr.json" --csv "$tmp/fr.csv") || bad "frontier run"
[[ $(head -c 8 "$tmp/fr.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a && $(stat -c %s "$tmp/fr.png") -gt 2000 ]] \
  && ok || bad "frontier --plot: not a non-empty PNG"
[[ -s "$tmp/fr.json" && $(grep -c '^point,fgattn' "$tmp/fr.csv") -eq 2 && $(grep -c '^oracle,fgattn' "$tmp/fr.csv") -ge 5 ]] \
  && ok || bad "frontier --json/--csv content"
[[ $fr == *"at rel_l1"*"oracle"*"epsilon"* ]] && ok || bad "frontier tables: $fr"
one=$("$bin" run --method fgattn --top-p 0.99 --workload video --seq 600 --heads 2 --kv-heads 1 --dim 64 --json) \
  || bad "run for the frontier point"
run_d=$(sed 's/.*"density":\([^,}]*\).*/\1/' <<< "$one")
run_e=$(sed 's/.*"rel_l1":\([^,}]*\).*/\1/' <<< "$one")
# The CSV prints 17 digits; the same doubles must come out of both (compared as numbers, exactly).
csv_d=$(awk -F, '$1 == "point" && $5 > 0.989 && $5 < 0.991 { print $6 }' "$tmp/fr.csv")
csv_e=$(awk -F, '$1 == "point" && $5 > 0.989 && $5 < 0.991 { print $7 }' "$tmp/fr.csv")
awk -v a="$run_d" -v b="$csv_d" -v c="$run_e" -v d="$csv_e" 'BEGIN { exit !(b != "" && a + 0 == b + 0 && c + 0 == d + 0) }' \
  && ok || bad "frontier point ($csv_d, $csv_e) differs from run ($run_d, $run_e)"
expect_message "frontier dense" "--method: frontier takes sparge, sale, anchor, fgattn, bfla or all, got 'dense'" \
  frontier --method dense --seq 64 --dim 32
expect_message "frontier --settings with two methods" "--settings: give one --method with --settings (got 2 methods)" \
  frontier --method sale,bfla --settings 0.1 --seq 64 --dim 32
expect_message "frontier --oracle" "--oracle: threshold, mass or density, got 'best'" frontier --method sale --oracle best --seq 64 --dim 32
expect_message "frontier --plot unwritable" "--plot '/nonexistent/dir/f.png': cannot write there" \
  frontier --seq 16384 --plot /nonexistent/dir/f.png

# Global options anywhere on the line.
"$bin" run --threads 2 --seq 64 --dim 32 --json > "$tmp/t_after.json" && "$bin" --threads 2 run --seq 64 --dim 32 --json \
  > "$tmp/t_before.json" && ok || bad "--threads after the subcommand"
[[ $(sed 's/"[a-z_]*_ms":[^,]*,//g; s/"speedup":[^,]*,//' "$tmp/t_after.json") == \
   $(sed 's/"[a-z_]*_ms":[^,]*,//g; s/"speedup":[^,]*,//' "$tmp/t_before.json") ]] && ok || bad "--threads position changes results"

# spattn check: the program's own output over its mask passes; planted faults fail at their (batch, head, row).
"$bin" run --q "$tmp/o.npy" --k "$tmp/o.npy" --v "$tmp/o.npy" --tile 32x16 --out "$tmp/c_out.npy" \
  --mask-out "$tmp/c_mask.npz" > /dev/null || bad "run for check"
check=("$bin" check --q "$tmp/o.npy" --k "$tmp/o.npy" --v "$tmp/o.npy")
report=$("${check[@]}" --out "$tmp/c_out.npy" --mask "$tmp/c_mask.npz") && ok || bad "check of run's output: $report"
[[ $report == "spattn check: PASS (tile mask 32x16, f32 inputs, f32 output, B 1, Hq 4, Nq 300, Dv 64)"* \
   && $report == *"0 failing rows"* && $report == *"batch 0:  h0 "*"h3 "* ]] && ok || bad "check report: $report"
# the same causal rule as a boolean [Nq, Nkv] element mask (lower triangle, uint8), written byte by byte
{
  hdr="{'descr': '|u1', 'fortran_order': False, 'shape': (300, 300), }"
  printf '\x93NUMPY\x01\x00\x76\x00%s' "$hdr"
  printf '%*s\n' $((128 - 10 - ${#hdr} - 1)) ''
  ones=$(head -c 300 /dev/zero | tr '\0' '\1')
  for i in $(seq 0 299); do printf '%s' "${ones:0:$((i + 1))}"; head -c $((299 - i)) /dev/zero; done
} > "$tmp/tril.npy"
report=$("${check[@]}" --out "$tmp/c_out.npy" --mask "$tmp/tril.npy") && ok || bad "check, element mask: $report"
[[ $report == *"PASS (element mask"* ]] && ok || bad "check element mask report: $report"
# non-causal attention is not the causal output: every row but the last of each head fails, the first is row 0
report=$("${check[@]}" --out "$tmp/c_out.npy")
[[ $? -eq 1 && $report == *"FAIL"*"1196 failing rows"*"first failing: batch 0, head 0, row 0 "* ]] && ok \
  || bad "check non-causal: $report"
# a NaN at head 2, row 123, column 5 of the float32 [1,4,300,64] output (128-byte header)
plant() {  # file, head, row, column, 4 bytes as printf escapes
  cp "$tmp/c_out.npy" "$1"
  printf "$5" | dd of="$1" bs=1 seek=$((128 + (($2 * 300 + $3) * 64 + $4) * 4)) conv=notrunc status=none
}
plant "$tmp/c_nan.npy" 2 123 5 '\x00\x00\xc0\x7f'
report=$("${check[@]}" --out "$tmp/c_nan.npy" --mask "$tmp/c_mask.npz" --atol 1e9)
[[ $? -eq 1 && $report == *"1 failing row;"*"1 non-finite"*"first failing: batch 0, head 2, row 123 (column 5"* ]] \
  && ok || bad "check NaN: $report"
plant "$tmp/c_off.npy" 3 7 0 '\x00\x00\x80\x3f'  # 1.0 in place of a value of the output
report=$("${check[@]}" --out "$tmp/c_off.npy" --mask "$tmp/c_mask.npz")
[[ $? -eq 1 && $report == *"first failing: batch 0, head 3, row 7 (column 0"* ]] && ok || bad "check off value: $report"
expect_error "check without --out" check --q "$tmp/o.npy" --k "$tmp/o.npy" --v "$tmp/o.npy"
expect_error "check --out shape" check --q "$tmp/o.npy" --k "$tmp/o.npy" --v "$tmp/o.npy" --out "$tmp/small.npy"
expect_error "check --mask garbage" check --q "$tmp/o.npy" --k "$tmp/o.npy" --v "$tmp/o.npy" \
  --out "$tmp/c_out.npy" --mask "$tmp/garbage.npy"
expect_error "check --mask of other lengths" check --q "$tmp/small.npy" --k "$tmp/small.npy" --v "$tmp/small.npy" \
  --out "$tmp/small.npy" --mask "$tmp/tril.npy"
expect_error "check --causal with a non-causal mask" check --q "$tmp/o.npy" --k "$tmp/o.npy" --v "$tmp/o.npy" \
  --out "$tmp/c_out.npy" --mask "$tmp/fg.npz" --causal
expect_error "check --factor" check --q "$tmp/o.npy" --k "$tmp/o.npy" --v "$tmp/o.npy" --out "$tmp/c_out.npy" \
  --factor 0.5

echo "$passes passed, $failures failed"
[[ $failures -eq 0 ]]
