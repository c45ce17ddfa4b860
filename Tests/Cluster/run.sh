#!/usr/bin/env bash
# Cluster mode's tests on real local etcd clusters (Debian's etcd-server; .ci/run installs it):
# the two-agent suite (test_cluster.sh), then the interop suites whose behaviour is the same in
# both modes against an agent (nc, socat, redis-cli --pipe and redis-benchmark, actorkv lock,
# sharing between shell, Python and Swift clients). Exits non-zero if anything failed.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
status=0
bash "$HERE/test_cluster.sh" || status=1
WORK=$(mktemp -d /tmp/akvci.XXXXXX)
trap 'bash "$HERE/etcd-cluster.sh" stop "$WORK"; rm -rf "$WORK"' EXIT
if ENDPOINTS=$(bash "$HERE/etcd-cluster.sh" start "$WORK" 23990); then
    ACTORKV_ETCD=$ENDPOINTS bash "$HERE/../interop/run.sh" nc socat redis_tools lock sharing || status=1
else
    echo "not ok - a 3-member etcd cluster for the interop suites started"
    status=1
fi
exit $status
