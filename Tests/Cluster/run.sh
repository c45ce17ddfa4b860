#!/usr/bin/env bash
# Cluster mode's tests on real local etcd clusters (Debian's etcd-server; .ci/run installs it):
# the two-agent suite (test_cluster.sh), then against agents of a second cluster the suites
# whose behaviour is the same in both modes: the Swift client's and the actorkv CLI's tests
# (ActorKVClientTests, built by `swift build --build-tests` before) and the argument fuzz
# (ArgumentFuzzTests) and MULTI/EXEC against the same commands one by one
# (TransactionEquivalenceTests), both through an etcd-backed processor, random ActorKV commands
# to such a processor and a local one, whose replies must agree (AgentEquivalenceTests), the interop suites (nc,
# socat, redis-cli and redis-benchmark, redis-py, node-redis, ruby-redis, the random commands
# compared with a real redis-server's replies, actorkv lock, sharing
# between shell, Python and Swift clients) and the Python client's tests. The client tests skip,
# saying why, what protocol.md lists as different in cluster mode; the Swift ones run first,
# before any suite compacts the cluster's history. That cluster runs with --max-txn-ops 1024, as an operator
# would set it for the Redis clients' HSET of 1,000 fields at once (etcd's default is 128).
# `--without-two-agent-suite` leaves test_cluster.sh out (Tests/run-all.sh: its AddressSanitizer
# stage has run it, on instrumented agents). Exits non-zero if anything failed.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Revokes every lease of the cluster at $1 (comma-separated endpoints), with Debian's etcdctl.
revoke_leftover_leases() {
    local leases lease out
    leases=$(ETCDCTL_API=3 etcdctl --endpoints="$1" lease list) || { echo "not ok - etcdctl lease list"; return 1; }
    for lease in $(printf '%s\n' "$leases" | tail -n +2); do
        # One that expires meanwhile is gone already: "lease not found".
        out=$(ETCDCTL_API=3 etcdctl --endpoints="$1" lease revoke "$lease" 2>&1) || case "$out" in
            *"not found"*) ;;
            *) echo "not ok - etcdctl lease revoke $lease: $out"; return 1 ;;
        esac
    done
    echo "# $(printf '%s\n' "$leases" | head -n 1) left by the suites before, revoked"
}
# Prints a step's heading with how long this script has run so far.
heading() { echo "# $* [at $((SECONDS / 60))m$((SECONDS % 60))s of this script]"; }
case "${1:-}" in
"" | --without-two-agent-suite) ;;
*) echo "usage: $0 [--without-two-agent-suite]" >&2; exit 2 ;;
esac
status=0
if [ "${1:-}" = --without-two-agent-suite ]; then
    echo "# the two-agent suite left out (--without-two-agent-suite)"
else
    heading "the two-agent suite"
    bash "$HERE/test_cluster.sh" || status=1
fi
WORK=$(mktemp -d /tmp/akvci.XXXXXX)
trap 'bash "$HERE/etcd-cluster.sh" stop "$WORK"; rm -rf "$WORK"' EXIT
if ENDPOINTS=$(bash "$HERE/etcd-cluster.sh" start "$WORK" 23990 --max-txn-ops 1024); then
    heading "the Swift client's and the CLI's tests against agents"
    (cd "$HERE/../.." && ACTORKV_ETCD=$ENDPOINTS swift test --skip-build --filter "ActorKVClientTests|ArgumentFuzzTests|TransactionEquivalenceTests|AgentEquivalenceTests") || status=1
    # Each request through an agent is an etcd round trip: redis-py's four modes (two now) took 180 s of
    # the default 180 s script limit on a loaded CI host (45 s each), and on a host loaded more a
    # transactions scenario (processes racing WATCH/MULTI/EXEC, retried) took 38.9 s of its 40 s
    # and node-redis's and ruby-redis's ran past it. So each scenario gets 120 s and each script
    # 600 s; the clients' relays allow for it (test_redispy.sh, test_node_redis.sh, test_ruby_redis.sh).
    ACTORKV_ETCD=$ENDPOINTS SCRIPT_LIMIT=600 SCENARIO_LIMIT=120 bash "$HERE/../interop/run.sh" nc socat redis_tools rediscli redispy node_redis ruby_redis \
        differential lock sharing || status=1
    # The suites before leave leases behind (keys given a deadline, each a lease of its own):
    # one expiring during the Python tests would delete its key there, and so take one of the
    # cluster's revisions, which are the sequences those tests count on. Revoked now, they take
    # theirs before the tests start.
    revoke_leftover_leases "$ENDPOINTS" || status=1
    heading "the Python client's tests against agents"
    ACTORKV_ETCD=$ENDPOINTS ACTORKV_REQUIRE_SERVER=1 python3 -m unittest discover -s "$HERE/../../Clients/python" || status=1
else
    echo "not ok - a 3-member etcd cluster for the interop suites started"
    status=1
fi
exit $status
