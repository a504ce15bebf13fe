#!/usr/bin/env bash
# Fuzzes psflow's parsers of outside input with libFuzzer (ASan + UBSan): every target of
# tests/fuzz (<name>_fuzzer.cc), or the ones named, for N seconds each. docs/fuzzing.md lists the
# targets and how to add a regression input.
#
#   scripts/fuzz.sh [--seconds N] [--build-dir DIR] [TARGET...]   (defaults: 60, build/fuzz)
#   scripts/fuzz.sh --check      exits 0 when clang++ can build libFuzzer binaries, else says why
#
# DIR is a clang build folder configured with -DPSFLOW_FUZZ=ON (made on first use, through ccache
# when installed); only the fuzz targets are built in it. The default, fuzz/ in scripts/build.sh's
# folder ($BUILD_DIR, else build), is the one ctest's bounded run uses: one clang build serves
# both. Each target starts from its checked-in
# corpus, tests/fuzz/corpus/<name>/, and keeps what it finds in DIR/fuzz-corpus/<name>/ (the
# checked-in one is never written). An input that crashes, trips a sanitizer, runs over 10 s or
# needs over 2 GB is saved as DIR/fuzz-artifacts/<name>/crash-... (or timeout-, oom-, leak-),
# with the log in DIR/fuzz-logs/<name>.log. Prints executions per target; exits non-zero when any
# target found something.
set -euo pipefail
cd "$(dirname "$0")/.."

# Longest input per target: a few records or objects, enough to reach every branch.
declare -A max_len=(
  [frame]=4096 [checkpoint]=4096 [tf_config]=2048 [prometheus_text]=4096 [training_job]=4096
  [kubeconfig]=4096 [watch_stream]=8192 [kube_object]=4096 [mnist]=4096 [cifar10]=9300
  [ptb]=4096 [sealed_records]=8192
)

check_libfuzzer() {
  if ! command -v clang++ >/dev/null; then
    echo "clang++ not found (scripts/setup.sh installs clang and libclang-rt-14-dev)" >&2
    return 1
  fi
  local probe
  probe="$(mktemp -d)"
  printf '%s\n' '#include <cstddef>' '#include <cstdint>' \
    'extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }' \
    >"$probe/probe.cc"
  if ! clang++ -fsanitize=fuzzer,address,undefined "$probe/probe.cc" -o "$probe/probe" \
    >"$probe/log" 2>&1; then
    echo "clang++ cannot link a libFuzzer binary (install libclang-rt-14-dev): $(head -c 300 "$probe/log")" >&2
    rm -rf "$probe"
    return 1
  fi
  rm -rf "$probe"
}

seconds=60
build_dir="${BUILD_DIR:-build}/fuzz"
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --check) check_libfuzzer; exit ;;
    --seconds) seconds="$2"; shift 2 ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [[ ${#targets[@]} -eq 0 ]]; then
  for source in tests/fuzz/*_fuzzer.cc; do
    name="$(basename "$source" _fuzzer.cc)"
    targets+=("$name")
  done
fi
binaries=()
for name in "${targets[@]}"; do
  if [[ ! -f "tests/fuzz/${name}_fuzzer.cc" ]]; then
    echo "fuzz.sh: no target $name (tests/fuzz/${name}_fuzzer.cc)" >&2
    exit 2
  fi
  binaries+=("${name}_fuzzer")
done
check_libfuzzer || exit 2

# Through ccache with paths relative to the checkout (CCACHE_BASEDIR, exported for the build
# too), so that a fresh clone's fuzz folder, as ctest makes one in CI, reuses another's objects.
source scripts/compiler_cache.sh
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cmake -S . -B "$build_dir" -G Ninja -DPSFLOW_FUZZ=ON -DPSFLOW_CUDA=OFF \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ "${launcher_args[@]}" >/dev/null
fi
build_start=$SECONDS
if ! ninja -C "$build_dir" "${binaries[@]}" >"$build_dir/fuzz-build.log" 2>&1; then
  tail -40 "$build_dir/fuzz-build.log" >&2
  echo "fuzz.sh: building the fuzz targets failed (log: $build_dir/fuzz-build.log)" >&2
  exit 2
fi
echo "fuzz.sh: built ${#binaries[@]} target(s) in $((SECONDS - build_start)) s"

status=0
printf '%-16s %12s %8s %10s %8s  %s\n' target executions seconds "execs/s" corpus result
for name in "${targets[@]}"; do
  corpus="$build_dir/fuzz-corpus/$name"
  artifacts="$build_dir/fuzz-artifacts/$name"
  log="$build_dir/fuzz-logs/$name.log"
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  start=$(date +%s.%N)
  result=0
  "$build_dir/bin/${name}_fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len="${max_len[$name]:-4096}" -artifact_prefix="$artifacts/" -print_final_stats=1 \
    "$corpus" "tests/fuzz/corpus/$name" </dev/null >"$log" 2>&1 || result=$?
  elapsed=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  units=$(find "$corpus" -type f | wc -l)
  verdict=ok
  if [[ $result -ne 0 ]]; then
    verdict="FOUND (exit $result): $(ls -t "$artifacts" | head -1 | sed "s|^|$artifacts/|")"
    status=1
  fi
  printf '%-16s %12s %8.1f %10.0f %8s  %s\n' "$name" "${execs:-?}" "$elapsed" \
    "$(awk -v n="${execs:-0}" -v t="$elapsed" 'BEGIN { print n / t }')" "$units" "$verdict"
  if [[ $result -ne 0 ]]; then
    grep -E "ERROR|runtime error|invariant violated|SUMMARY" "$log" | head -5 >&2 || true
  fi
done
if [[ $status -ne 0 ]]; then
  echo "fuzz.sh: a target found a problem: see $build_dir/fuzz-logs/; replay an input with" \
    "$build_dir/bin/<name>_fuzzer <input>" >&2
fi
exit "$status"
