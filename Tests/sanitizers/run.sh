#!/usr/bin/env bash
# Runs ActorKV's tests on builds instrumented by a sanitizer, and fails on any report.
#
#   Tests/sanitizers/run.sh address     (CI, from Tests/run-all.sh)
#   Tests/sanitizers/run.sh thread      (by hand; see below)
#
# address: AddressSanitizer (a read or write out of bounds, after free, a double free) on
#   - every Swift test (the engine in process, and the actorkvd and actorkv children the tests
#     start, built with it too: the tests find the binaries next to themselves), then
#   - the shell interop suite (socat, nc, redis-cli, redis-py, node-redis, ruby-redis, hostile and
#     concurrent clients), the Python client's tests and the namespace permission tests (clients
#     under other uids: as root) against an instrumented actorkvd (and actorkv), and cluster
#     mode's two-agent suite (Tests/Cluster/test_cluster.sh: the etcd client's HTTP and JSON code).
#   This is what checks the engine's unsafe code (the B+tree walk without retains, raw buffers,
#   prefetch hints) beyond what the tests' own checks see. The build goes to .build-asan.
#   LeakSanitizer checks those servers and CLI runs when they exit (a retain cycle
#   that kept a connection's objects would show there; lsan.supp says what is suppressed and
#   why), not the Swift tests, whose test runner keeps allocations of its own to the end.
#   Memory bounds are not checked under it (ServerProcess.residentMemoryIsMeaningful): the
#   shadow memory and the quarantine of freed blocks count in a process's resident memory.
#
# thread: ThreadSanitizer on every Swift test and the interop suite, in a clone of the committed
#   tree (under $TMPDIR) where each module's `Mutex` is a pthread mutex (TSanVisibleMutex.swift,
#   added to the clone only, with -DACTORKV_TSAN): Synchronization's Mutex takes a contended lock
#   in the kernel, which ThreadSanitizer does not see, so every contended lock would read as a
#   race. Reports are summarized by the source lines of the two accesses. Not in CI: a run takes
#   about 12 minutes here (on top of CI's 18), and a report whose two accesses are ordered only by
#   a continuation or a dispatch queue (Swift's concurrency runtime and libdispatch are not
#   instrumented on Linux) is not a race; read each one. RELIABILITY.md says what the last run
#   found.
#
# Needs what Tests/run-all.sh needs (see .ci/run).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
mode=${1:-}
case $mode in
address | thread) ;;
*) echo "usage: $0 address|thread" >&2; exit 2 ;;
esac
reports=$(mktemp -d "${TMPDIR:-/tmp}/actorkv-sanitizer.XXXXXX")

status=0
# Prints a step's heading with how long this script has run so far.
heading() { echo "== $* [at $((SECONDS / 60))m$((SECONDS % 60))s of this script]"; }
# Runs a step; a failure is noted and the steps after it still run, so that the reports are read.
step() { "$@" || status=1; }

# Prints the first reports any process wrote into $reports (files PREFIX.PID) and fails if
# there are any or a step failed; removes $reports when all is well.
finish() {
    local found
    found=$(find "$reports" -maxdepth 1 -type f -name "$1.*" | sort)
    if [ -n "$found" ]; then
        for f in $(echo "$found" | head -5); do echo "---- $f"; head -80 "$f"; done
        echo "$(echo "$found" | wc -l) files of sanitizer reports, the first five above (all kept in $reports)" >&2
        exit 1
    fi
    echo "no sanitizer reports"
    [ "$status" -eq 0 ] || { echo "a test step failed (see above)" >&2; exit 1; }
    rm -rf "$reports"
}

case $mode in
address)
    cd "$root"
    heading "building with -sanitize=address (.build-asan)"
    swift build --build-tests --sanitize=address --scratch-path .build-asan
    export ACTORKV_SANITIZER=address
    export ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=0"
    # Fewer rounds of the suites whose size is a count (kill -9 cycles, power-loss states): here
    # they look for memory errors in the code those rounds run, which a quarter of them runs
    # whole; the plain `swift test` before runs the full counts and Tests/soak.sh far more.
    # Under the full counts the power-loss suite alone took the last 2 minutes of this stage.
    export ACTORKV_CRASH_CYCLES=${ACTORKV_CRASH_CYCLES:-10} ACTORKV_STRESS_CYCLES=${ACTORKV_STRESS_CYCLES:-8}
    export ACTORKV_POWERLOSS_STATES=${ACTORKV_POWERLOSS_STATES:-200}
    heading "swift test, AddressSanitizer"
    step swift test --skip-build --sanitize=address --scratch-path .build-asan --experimental-maximum-parallelization-width 4
    heading "shell interop tests against an AddressSanitizer actorkvd and actorkv, leaks checked at their exit"
    export ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=1"
    export LSAN_OPTIONS="suppressions=$here/lsan.supp:print_suppressions=0"
    export ACTORKVD="$root/.build-asan/debug/actorkvd" ACTORKV_CLI="$root/.build-asan/debug/actorkv"
    step bash Tests/interop/run.sh
    heading "the Python client's tests and the namespace permission tests against AddressSanitizer servers"
    step python3 -m unittest discover -s Clients/python
    step python3 -m unittest discover -s Tests/acl
    heading "cluster mode's two-agent suite (a local etcd cluster) with AddressSanitizer agents"
    step bash Tests/Cluster/test_cluster.sh
    finish asan
    ;;
thread)
    clone="$reports/tree"
    git clone -q "$root" "$clone"
    for dir in Sources/ActorKVStore Sources/ActorKVServer Sources/ActorKVEtcd Clients/Swift/ActorKVClient \
               Tests/ActorKVTestSupport Tests/ActorKVStoreTests Tests/ActorKVServerTests Tests/ActorKVEtcdTests \
               Tests/ActorKVClientTests; do
        cp "$here/TSanVisibleMutex.swift" "$clone/$dir/TSanVisibleMutex.swift"
    done
    cd "$clone"
    heading "building with -sanitize=thread in $clone"
    swift build --build-tests --sanitize=thread -Xswiftc -DACTORKV_TSAN
    export ACTORKV_SANITIZER=thread
    # exitcode=0: a process with reports exits as it would have (not 66), so that a test that runs
    # the actorkv CLI fails only if the CLI did; the reports are read below. A test bound by wall
    # time can still fail under the slowdown (CLILockTests' 3-second counter window once did).
    export TSAN_OPTIONS="log_path=$reports/tsan:halt_on_error=0:exitcode=0:second_deadlock_stack=1"
    heading "swift test, ThreadSanitizer"
    step swift test --skip-build --sanitize=thread -Xswiftc -DACTORKV_TSAN --experimental-maximum-parallelization-width 4
    heading "shell interop tests against a ThreadSanitizer actorkvd and actorkv"
    export ACTORKVD="$clone/.build/debug/actorkvd" ACTORKV_CLI="$clone/.build/debug/actorkv" SCRIPT_LIMIT=600
    step bash "$root/Tests/interop/run.sh"  # the repository's, for its .build-venv (redis-py)
    python3 "$here/summarize_tsan.py" "$reports"
    finish tsan
    ;;
esac
