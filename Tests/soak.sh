#!/usr/bin/env bash
# The long reliability run (not part of CI): 500 kill -9 cycles, millions of decoder fuzz inputs,
# tens of thousands of hostile live connections. Prints the figures RELIABILITY.md quotes.
set -euo pipefail
cd "$(dirname "$0")/.."
export ACTORKV_CRASH_CYCLES="${ACTORKV_CRASH_CYCLES:-500}"
export ACTORKV_FUZZ_ITERATIONS="${ACTORKV_FUZZ_ITERATIONS:-2000000}"
export ACTORKV_LIVE_FUZZ_INPUTS="${ACTORKV_LIVE_FUZZ_INPUTS:-50000}"
export ACTORKV_STRESS_CYCLES="${ACTORKV_STRESS_CYCLES:-200}"
swift build
swift test --filter 'ServerCrashLoopTests|LiveFuzzTests|Fuzz|Crash' 2>&1 | tee /tmp/actorkv-soak.log | grep -E 'crash loop|fuzz|cycles|inputs|Test run'
