#!/usr/bin/env bash
# node-redis (Debian's node-redis package, with nodejs) against actorkvd: issue #21's scenario set
# (clients/node_redis_scenarios.js) with the client's default settings.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_tool node "nodejs node-redis"
use_server

# Debian's nodejs searches /usr/share/nodejs by itself; other builds of node (NodeSource's) do not.
export NODE_PATH=${NODE_PATH:+$NODE_PATH:}/usr/share/nodejs
if ! node -e 'require("redis")' 2>/dev/null; then
    not_ok "node finds the redis module (apt-get install node-redis)"
    finish
fi
# Through an etcd agent every request is a round trip to etcd: the scenarios took 41-55 s there.
relay "node-redis" "$([ -n "${ACTORKV_ETCD:-}" ] && echo 145 || echo 55)" node "$INTEROP_DIR/clients/node_redis_scenarios.js" "$SOCK"
finish
