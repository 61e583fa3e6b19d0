# The shared start of the scripts in scripts/gpu/, sourced first by each (never run on its own):
#   source "$(dirname "$0")/prelude.sh"
# It moves to the repository root (the scripts' paths are relative to it, so they run from any directory; a DIR
# argument is still relative to where the script was called: see carried_dir) and defines:
#   gpu_session DIR   on the GPU machine: DIR (the carried binaries and the Debian libraries they link) first on
#                     LD_LIBRARY_PATH, `dir` its absolute path, `out` the log folder ($OUT, default /tmp), and the GPU's
#                     name, driver and clocks printed.
#   gpu_tests NAME LINES
#                     runs the doctest binary $dir/NAME with its output in $out (NAME without "spattn_", .log:
#                     gpu_tests.log, kokkos_gpu_tests.log), prints "== NAME exit status: N" and the last LINES lines of its
#                     summary (MESSAGE lines, errors, counts); returns N.
spattn_caller_dir=$PWD
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

# DIR as given on the command line (relative to the caller's directory), as an absolute path.
carried_dir() {
  (cd "$spattn_caller_dir" && realpath "${1:?carried_dir: no DIR}")
}

gpu_session() {
  dir=$(carried_dir "$1")
  out=${OUT:-/tmp}
  export LD_LIBRARY_PATH=$dir:${LD_LIBRARY_PATH:-}
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
}

gpu_tests() {
  local name=$1 lines=$2 log rc=0
  log=$out/${name#spattn_}.log
  "$dir/$name" > "$log" 2>&1 || rc=$?
  echo "== $name exit status: $rc"
  grep -E "MESSAGE|ERROR|test cases|assertions|Status" "$log" | sed 's/^.*MESSAGE: //' | tail -"$lines" || true
  return $rc
}
