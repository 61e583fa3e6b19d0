#!/usr/bin/env bash
# The quality table on the GPU machine, from nothing: builds the Python module (CUDA, sm_90a) while the two models
# train, then runs quality.py. The work runs detached in STATE (default /root/spattn-quality, kept while the machine
# is held), so a device call may end before it does; each call of this script starts the pipeline if it is not
# running or done, waits up to WAIT seconds (default 540), prints the log's tail and copies the results to $OUT.
#   bash scripts/gpu/quality.sh            (SPATTN_SYSROOT as in scripts/gpu/python.sh)
# Environment: MODELS (default "lm dit"; "dit" or "lm" trains and measures one model: a session's device time holds
# one model's full sweep and timings more surely than both), LM_MINUTES (default 4 at 8K, then LM32_MINUTES 1.5 at
# 32K), DIT_MINUTES (3 at 8 frames, then DIT32_MINUTES 1 at 32 frames), QUALITY_MINUTES (default 21: no quality row
# starts later than that after the pipeline's start, so the whole run stays inside one session's device time),
# QUALITY_FLAGS (default "--time --calibrate --captures STATE/captures.npz"), QUALITY_ARGS (extra arguments of
# quality.py). Comes back in $OUT: quality.json and its log, the pipeline and build logs, captures.npz (the demo's
# Q/K/V captures) and extra.tgz (the training logs and the calibrated parameter files).
set -uo pipefail
source "$(dirname "$0")/prelude.sh"
STATE=${STATE:-/root/spattn-quality}
WAIT=${WAIT:-540}
mkdir -p "$STATE"
if [[ ! -e $STATE/started ]]; then
  touch "$STATE/started"
  # The pipeline runs on a private copy: a later call's fresh working tree cannot change it mid-run.
  mkdir -p "$STATE/src" && cp -a . "$STATE/src/"
  cat > "$STATE/pipeline.sh" <<PIPE
cd $STATE/src
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
deadline=\$(( \$(date +%s) + ${QUALITY_MINUTES:-21} * 60 ))
(SPATTN_BUILD_ONLY=1 bash scripts/gpu/python.sh > $STATE/build.log 2>&1; echo "build rc \$?" >> $STATE/build.log) &
build=\$!
models="${MODELS:-lm dit}"
args=""
if [[ \$models == *lm* ]]; then
  python3 bench/quality/train.py lm --seqlen 8192 --minutes ${LM_MINUTES:-4} --out $STATE/lm8k &&
  python3 bench/quality/train.py lm --seqlen 32768 --minutes ${LM32_MINUTES:-1.5} --init $STATE/lm8k --out $STATE/lm &&
  args="\$args --lm $STATE/lm"
fi
if [[ \$models == *dit* ]]; then
  python3 bench/quality/train.py dit --frames 8 --minutes ${DIT_MINUTES:-3} --out $STATE/dit8 &&
  python3 bench/quality/train.py dit --frames 32 --minutes ${DIT32_MINUTES:-1} --init $STATE/dit8 --out $STATE/dit &&
  args="\$args --dit $STATE/dit"
fi
echo "trained: \$args"
wait \$build
tail -3 $STATE/build.log
PYTHONPATH=$STATE/src/build-python-cuda/python python3 bench/quality/quality.py \$args \
  --out $STATE/quality.json ${QUALITY_FLAGS:---time --calibrate --captures $STATE/captures.npz} --deadline \$deadline ${QUALITY_ARGS:-}
echo "quality rc \$?"
touch $STATE/done
PIPE
  setsid bash "$STATE/pipeline.sh" > "$STATE/pipeline.log" 2>&1 < /dev/null &
fi
end=$(( $(date +%s) + WAIT ))
while [[ ! -e $STATE/done && $(date +%s) -lt $end ]]; do sleep 10; done
[[ -e $STATE/done ]] && echo "pipeline: done" || echo "pipeline: still running"
if [[ -n ${OUT:-} ]]; then
  for f in quality.json quality.json.log pipeline.log build.log captures.npz; do
    [[ -e $STATE/$f ]] && cp "$STATE/$f" "$OUT/"
  done
  (cd "$STATE" && tar czf "$OUT/extra.tgz" --ignore-failed-read */log.json calibrated 2>/dev/null)
fi
grep -v "^+ " "$STATE/pipeline.log" | tail -60
