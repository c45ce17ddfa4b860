#!/usr/bin/env bash
# Runs every ActorKV test: the Swift packages' tests, the Python client's tests, the namespace
# permission tests over the wire (clients under other uids: run as root, as CI does), the shell
# interop tests (socat, nc, redis-cli, redis-benchmark, the Redis client libraries redis-py,
# node-redis and ruby-redis, and random commands compared with a real redis-server's), both again under AddressSanitizer (Tests/sanitizers), cluster mode
# on local etcd clusters (Tests/Cluster), 20 s of libFuzzer on the protocol decoder and the
# benchmark script in its quick mode.
# Needs: swift, python3, socat, netcat-openbsd, redis-tools, redis-server, nodejs + node-redis,
# ruby + ruby-redis, etcd (etcd-server), and redis-py + hiredis in .build-venv (see .ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage's heading says how long the run has taken so far, so that a slow CI run shows where.
stage() { echo "== $* [at $((SECONDS / 60))m$((SECONDS % 60))s]"; }

stage "swift build"
swift build
stage "swift test"
# At most 4 tests at once: with Swift Testing's default (every test at once) a slow 2-core host
# starved the tests that wait for a timer on the shared pool (a 1-second compaction tick not run
# within 30 s, connect timeouts); 4 at a time passed there, and no slower (278 s against 303 s).
swift test --experimental-maximum-parallelization-width 4
export ACTORKVD="$PWD/.build/debug/actorkvd"
stage "python client tests"
python3 -m unittest discover -s Clients/python -v
stage "namespace permissions over the wire (clients under other uids)"
python3 -m unittest discover -s Tests/acl -v
stage "shell interop tests"
bash Tests/interop/run.sh
stage "AddressSanitizer: the Swift tests and the shell interop tests again, on instrumented builds (.build-asan)"
bash Tests/sanitizers/run.sh address
stage "cluster mode: a local 3-member etcd cluster, the Swift client's tests, the interop suites and the Python client's tests against an agent"
# The two-agent suite is left out here: the AddressSanitizer stage ran it, with instrumented agents.
bash Tests/Cluster/run.sh --without-two-agent-suite
stage "doc snippets: the runner's tests, then every code block of README.md and protocol.md"
python3 -m unittest discover -s Tests/docs; python3 Tests/docs/run_snippets.py README.md protocol.md
stage "libFuzzer on the protocol decoder (20 s)"
bash Fuzz/run.sh 20
stage "benchmark script, quick mode (no timings asserted)"
bash Benchmarks/run.sh --quick
stage "all suites passed"
