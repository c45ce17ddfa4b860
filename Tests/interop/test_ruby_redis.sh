#!/usr/bin/env bash
# ruby-redis (Debian's ruby-redis package) against actorkvd: issue #21's scenario set
# (clients/ruby_redis_scenarios.rb) with the client's default settings.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_tool ruby "ruby ruby-redis"
use_server

if ! ruby -e 'require "redis"' 2>/dev/null; then
    not_ok "ruby finds the redis gem (apt-get install ruby-redis)"
    finish
fi
# Through an etcd agent every request is a round trip to etcd: the scenarios took 41-55 s there.
relay "ruby-redis" "$([ -n "${ACTORKV_ETCD:-}" ] && echo 145 || echo 55)" ruby "$INTEROP_DIR/clients/ruby_redis_scenarios.rb" "$SOCK"
finish
