#!/usr/bin/env bash
# Regenerates bench/results/accuracy-frontier.md's numbers and plots (run from the repository root after
# `cmake --preset default && cmake --build --preset default`). About 25 minutes on 2 cores.
set -euo pipefail
bin=${SPATTN:-./build/tools/spattn}
out=${OUT:-bench/results/accuracy-frontier}
mkdir -p "$out"
run() {
  local name=$1
  shift
  echo "== $name: $*" >&2
  /usr/bin/time -f "$name: %e s wall, %U s user" "$bin" frontier --no-progress "$@" \
    --plot "$out/$name.png" --json "$out/$name.json" --csv "$out/$name.csv" > "$out/$name.txt"
}
run llm-8k    --workload llm    --seq 8192  --heads 4 --kv-heads 1
run video-8k  --workload video  --seq 8192  --heads 2 --kv-heads 2
run random-8k --workload random --seq 8192  --heads 2 --kv-heads 2
run llm-32k   --workload llm    --seq 32768 --heads 4 --kv-heads 1 --interpolate-points --tolerance 0.02
run video-32k --workload video  --seq 32768 --heads 1 --kv-heads 1 --interpolate-points --tolerance 0.02
# The plots, drawn again from the JSON files (the same points; the plot code of the commit that runs this).
for name in llm-8k video-8k random-8k llm-32k video-32k; do
  "$bin" frontier --replot "$out/$name.json" --plot "$out/$name.png"
done
