#!/usr/bin/env bash
# Many clients at once against one server, every reply checked against an exact model
# (clients/concurrent_model.py): random pipelines written in random fragments, some half-closed,
# some abandoned unread; then every key as last acknowledged and a shared INCR counter that adds
# up. Catches replies lost, doubled, reordered or given to the wrong connection, as a change to
# how the event loop reads, peeks or batches would.
#   CONCURRENT_SECONDS (default 6), CONCURRENT_WORKERS (default 8), CONCURRENT_SEED (default:
#   the time; printed, so a failing run can be repeated).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_tool python3 python3
use_server

relay "concurrent clients" 120 python3 "$INTEROP_DIR/clients/concurrent_model.py" "$SOCK" \
    --seconds "${CONCURRENT_SECONDS:-6}" --workers "${CONCURRENT_WORKERS:-8}" ${CONCURRENT_SEED:+--seed "$CONCURRENT_SEED"}
finish
