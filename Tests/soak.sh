#!/usr/bin/env bash
# The long reliability run (not part of CI): 500 kill -9 cycles, millions of decoder fuzz inputs,
# tens of thousands of hostile live connections, over 200,000 simulated power-loss crash states,
# 400,000 commands compared with a real redis-server's replies. Prints the figures RELIABILITY.md quotes.
#
# It builds release binaries with testing enabled (in .build-soak): the crash loop re-verifies
# every key it ever wrote after each restart, and debug builds slow that to minutes per cycle
# once the namespace holds a few hundred thousand keys.
set -euo pipefail
cd "$(dirname "$0")/.."
export ACTORKV_CRASH_CYCLES="${ACTORKV_CRASH_CYCLES:-500}"
export ACTORKV_FUZZ_ITERATIONS="${ACTORKV_FUZZ_ITERATIONS:-2000000}"
export ACTORKV_LIVE_FUZZ_INPUTS="${ACTORKV_LIVE_FUZZ_INPUTS:-50000}"
export ACTORKV_ARGUMENT_FUZZ_INPUTS="${ACTORKV_ARGUMENT_FUZZ_INPUTS:-1000000}"
export ACTORKV_STRESS_CYCLES="${ACTORKV_STRESS_CYCLES:-200}"
# Per fsync policy (three of them), plus a quarter of it with garbage sectors: 225,000 in all.
export ACTORKV_POWERLOSS_STATES="${ACTORKV_POWERLOSS_STATES:-67000}"
BUILD=(-c release --build-path .build-soak -Xswiftc -enable-testing)
swift build "${BUILD[@]}" --build-tests
# ACTORKV_SOAK_FILTER picks some of them (e.g. PowerLoss, to rerun only the power-loss states).
swift test "${BUILD[@]}" --skip-build --filter "${ACTORKV_SOAK_FILTER:-ServerCrashLoopTests|LiveFuzzTests|Fuzz|Crash|PowerLoss}" 2>&1 |
    tee /tmp/actorkv-soak.log | grep -E 'crash loop|fuzz|cycles|inputs|kill -9|power loss|Test run|✘'
# Then the differential test against a real redis-server (Tests/interop/test_differential.sh)
# against the release server, 100,000 commands a round (DIFF_COMMANDS), unless a filter was given.
if [ -z "${ACTORKV_SOAK_FILTER:-}" ]; then
    ACTORKVD="$PWD/.build-soak/release/actorkvd" DIFF_COMMANDS="${DIFF_COMMANDS:-100000}" SCRIPT_LIMIT=3600 \
        bash Tests/interop/run.sh differential | grep -E '^(not )?ok|seed|passed'
fi
