#!/usr/bin/env bash
# redis-py (latest from PyPI, in the virtual environment .build-venv that .ci/run creates)
# against actorkvd: issue #21's scenario set (clients/redispy_scenarios.py), four ways: the
# defaults (RESP3 via HELLO 3, hiredis's parser since hiredis is installed), protocol=2, and both
# again with redis-py's pure-Python parser forced; redis.Redis throughout, redis.asyncio in one
# scenario. Through an etcd agent (ACTORKV_ETCD), two of the four: the defaults and protocol=2
# with the pure-Python parser. The parser is the client's own and each reads both protocols
# locally; what the agent answers differs by protocol only, and each mode there took 45-66 s.
#   REDISPY_VENV   the virtual environment (default: <repo root>/.build-venv)
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
use_server

VENV=${REDISPY_VENV:-$ROOT/.build-venv}
PY=$VENV/bin/python
if [ ! -x "$PY" ] || ! "$PY" -c 'import redis, hiredis' 2>/dev/null; then
    not_ok "redis-py and hiredis are installed in $VENV (create it from the repository root:" \
        "python3 -m venv .build-venv && .build-venv/bin/pip install -q redis hiredis)"
    finish
fi
note "$("$PY" -c 'import redis, hiredis, sys; print("python", sys.version.split()[0], "redis-py", redis.__version__, "hiredis", hiredis.__version__)')"

modes="resp3-hiredis resp2-hiredis resp3-python resp2-python"
[ -n "${ACTORKV_ETCD:-}" ] && modes="resp3-hiredis resp2-python"
for mode in $modes; do
    # Through an etcd agent every request is a round trip to etcd: a mode took 45-66 s there.
    relay "redis-py $mode" "$([ -n "${ACTORKV_ETCD:-}" ] && echo 145 || echo 50)" "$PY" "$INTEROP_DIR/clients/redispy_scenarios.py" "$SOCK" "$mode"
done
finish
