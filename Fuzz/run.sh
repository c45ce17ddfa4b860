#!/usr/bin/env bash
# Builds the ActorKVProtocol libFuzzer target (Fuzz/ProtocolFuzzer/main.swift plus
# every Swift file under Sources/ActorKVProtocol) with -sanitize=fuzzer,address and runs it for a bounded time.
#
# Usage: Fuzz/run.sh [seconds]       (default 20; extra arguments go to libFuzzer)
# Output (corpus, crash artifacts, binary) goes to .build-fuzz/ at the package root, or to
# $ACTORKV_FUZZ_OUT if set.
# Exits non-zero if the build fails or the fuzzer finds a crash, a leak or a failed check.
set -euo pipefail

seconds="${1:-20}"
shift || true
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
out="${ACTORKV_FUZZ_OUT:-$root/.build-fuzz}"
mkdir -p "$out/corpus" "$out/artifacts"

echo "== building ProtocolFuzzer"
mapfile -t sources < <(find "$root/Sources/ActorKVProtocol" -name "*.swift" | sort)
swiftc -sanitize=fuzzer,address -parse-as-library -swift-version 6 -O -g -use-ld=lld \
  -module-name ProtocolFuzzer -package-name ActorKV \
  "$here/ProtocolFuzzer/main.swift" "${sources[@]}" \
  -o "$out/protocol-fuzzer"

# Seed corpus: the first byte is the control byte (limits and cut point), then the wire bytes.
seed() { printf "$2" > "$out/corpus/seed-$1"; }
seed multibulk '\x40*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n*1\r\n$4\r\nPING\r\n'
seed inline '\x21SET "a\\x41\\n" '"'"'b c'"'"'\r\nGET k\n\r\n'
seed empty '\x10*0\r\n*-1\r\n\r\n'
seed reply '\x31+OK\r\n-ERR x\r\n:5\r\n$3\r\nabc\r\n*2\r\n$-1\r\n*-1\r\n'

echo "== fuzzing for ${seconds}s"
# Let libFuzzer report crashes itself instead of Swift's (slow) backtracer.
export SWIFT_BACKTRACE=enable=no
"$out/protocol-fuzzer" "$out/corpus" -max_total_time="$seconds" -max_len=4096 \
  -artifact_prefix="$out/artifacts/" -print_final_stats=1 "$@"
