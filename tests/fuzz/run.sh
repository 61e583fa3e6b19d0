#!/usr/bin/env bash
# Builds the libFuzzer harnesses (cmake --preset fuzz: clang, ASan + UBSan) and runs each for SECONDS
# (default 60), one after the other. Fails on the first crash, leak, sanitizer report, timeout (an input that
# runs > 10 s: a hang) or out-of-memory; the reproducer is left in build-fuzz/tests/fuzz/artifacts/<harness>/.
# The corpus grows in build-fuzz/tests/fuzz/corpus/<harness>/ across runs, seeded by fuzz_make_seeds.
#   tests/fuzz/run.sh 60           # CI: a minute per harness
#   tests/fuzz/run.sh 600          # the issue's 10 minutes per harness
#   HARNESSES="mask api" tests/fuzz/run.sh 300
set -euo pipefail
seconds=${1:-60}
cd "$(dirname "$0")/../.."
cmake --preset fuzz > /dev/null
cmake --build --preset fuzz -j "$(nproc)"
out=build-fuzz/tests/fuzz
"$out/fuzz_make_seeds" "$out/corpus"
for name in ${HARNESSES:-npy npz mask params api}; do
  mkdir -p "$out/corpus/$name" "$out/artifacts/$name"
  echo "== fuzz_$name: ${seconds} s"
  set +e
  "$out/fuzz_$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$out/artifacts/$name/" "$out/corpus/$name" > "$out/$name.log" 2>&1
  status=$?
  set -e
  grep -E '^#[0-9]+.*(DONE|pulse)|^stat::number_of_executed_units|^stat::peak_rss_mb' "$out/$name.log" | tail -3
  if [[ $status -ne 0 ]]; then
    grep -E 'ERROR|SUMMARY|runtime error|Test unit written|deadly signal|timeout' "$out/$name.log" | head -20
    echo "fuzz_$name FAILED (exit $status): see $out/$name.log"
    exit 1
  fi
done
echo "fuzzing: every harness ran ${seconds} s without a crash"
