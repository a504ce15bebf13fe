#!/usr/bin/env bash
# The sanitizer suites, each in its own CPU-only build (CI runs both after the main tests):
#
#   address  build-asan, ASan + UBSan (-fno-sanitize-recover=all), leak checks on: the unit tests
#            of core, ps, worker and operator (api, controller, kube client) and the multi-process
#            tests that start the ASan builds of psflow-ps, psflow-worker, psflow and
#            psflow-operator (local runs, bad input, recovery, metrics with promtool, the operator
#            against the real API server). Not repeated under ASan: the long convergence and
#            example runs (label `long`) and the tests of test infrastructure (tests/kube's
#            in-memory API server, the dashboards' checks).
#   thread   build-tsan, TSan: the concurrent parts: the ps's state, coordinator and service
#            (ps_test, ps_grpc_test), the worker's client, background exchange, towers and trainer
#            (ps_client_test, worker_test's concurrent suites), the CPU thread pool, the
#            operator's work queue, reconciler and leader election, its REST client and
#            informer (kube_test), and the bulk channel's TLS and shared-memory streams (core_test).
#
# Any report fails the run. The only suppressions are in tests/sanitizers/tsan.supp and
# lsan.supp, each with the reason it is inside gRPC or cpprestsdk. Builds go through ccache when
# it is installed.
#
#   scripts/sanitize.sh [address] [thread]      (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/compiler_cache.sh
suites=("$@")
[[ ${#suites[@]} -gt 0 ]] || suites=(address thread)
jobs=$(nproc)

# -O1 with line tables only (-g1): what the sanitizers' reports need, and cheaper to compile than
# the main build's -O2 -g.
configure() {  # configure DIR SANITIZER
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPSFLOW_CUDA=OFF \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    -DPSFLOW_SANITIZE="$2" "${launcher_args[@]}" >/dev/null
}

# The wire conversions built for each x86-64 level (core/CMakeLists.txt), where there are such.
wire_conversion_tests() {
  [[ $(uname -m) == x86_64 ]] || return 0
  echo wire_conversion_x86_64_test wire_conversion_x86_64_v3_test wire_conversion_x86_64_v4_test
}

address() {
  configure build-asan address
  ninja -C build-asan core_test optimizer_test checkpoint_test ps_test steady_state_test \
    worker_test cpu_kernels_test ps_client_test ps_grpc_test operator_test controller_test \
    kube_test local_run_test bad_input_test recovery_test metrics_test command_line_test \
    operator_e2e_test $(wire_conversion_tests)
  # The tests of the binaries not built here are placeholders named <binary>_NOT_BUILT.
  # detect_leaks: the processes exit cleanly, so a leak is a bug; UBSan stops at the first report.
  ASAN_OPTIONS=detect_leaks=1:halt_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    LSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/lsan.supp" \
    ctest --test-dir build-asan --output-on-failure -j "$jobs" -L cc -LE long -E '_NOT_BUILT$'
}

thread() {
  configure build-tsan thread
  ninja -C build-tsan ps_test ps_grpc_test ps_client_test worker_test cpu_kernels_test \
    controller_test kube_test core_test
  export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/sanitizers/tsan.supp"
  local bin=build-tsan/bin
  local concurrent_worker='BackgroundExchange*:Trainer*:ReplayTrainable*:Prefetcher*:TowersTest*:TowersUpdate*:ModelPhases*'
  local run
  for run in "ps_test" "ps_grpc_test" "ps_client_test" \
      "worker_test --gtest_filter=$concurrent_worker" \
      "cpu_kernels_test --gtest_filter=ThreadPool*" \
      "controller_test --gtest_filter=WorkQueue*:LeaderElector*:ReconcilerTest*" \
      "kube_test" "core_test --gtest_filter=ShmStream*:BulkStreamTls*:MetricsEndpoint*:LateGauge*"; do
    echo "== TSan: $run"
    # shellcheck disable=SC2086
    $bin/$run --gtest_brief=1
  done
}

for suite in "${suites[@]}"; do
  case "$suite" in
    address|thread) "$suite" ;;
    *) echo "sanitize.sh: unknown suite '$suite' (address or thread)" >&2; exit 2 ;;
  esac
done
