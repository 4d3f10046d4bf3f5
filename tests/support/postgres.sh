#!/usr/bin/env bash
# A private PostgreSQL cluster for tests and development: initdb into a temporary directory and start it on
# 127.0.0.1:${PGPORT:-54329} (unix socket in that directory, fsync off: a throwaway cluster). Prints the URL to use as
# GATEWAY_TEST_POSTGRES_URL. Does nothing but print the URL when something already listens on the port.
# Run as root, the cluster belongs to the ``postgres`` user (PostgreSQL refuses to run as root).
#
#   eval "$(tests/support/postgres.sh)"     # exports GATEWAY_TEST_POSTGRES_URL
#   tests/support/postgres.sh stop          # stops the cluster this script started (its directory is kept in
#                                           # ${PGTEST_DIR:-/tmp/gateway-pgtest-$PORT})
set -euo pipefail
PORT="${PGPORT:-54329}"
DIR="${PGTEST_DIR:-${TMPDIR:-/tmp}/gateway-pgtest-$PORT}"
BIN="${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}"
URL="postgresql://gateway:gateway@127.0.0.1:$PORT/postgres"
AS=()
if [ "$(id -u)" = 0 ]; then AS=(runuser -u postgres --); fi

if [ "${1:-start}" = stop ]; then
  [ -f "$DIR/data/postmaster.pid" ] && "${AS[@]}" "$BIN/pg_ctl" -D "$DIR/data" -m fast -w stop >/dev/null
  exit 0
fi
if ! (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
  if [ -z "$BIN" ] || [ ! -x "$BIN/initdb" ]; then
    echo "postgres.sh: PostgreSQL is not installed (apt-get install postgresql)" >&2
    exit 1
  fi
  mkdir -p "$DIR"
  if [ "$(id -u)" = 0 ]; then chown postgres "$DIR"; fi
  if [ ! -f "$DIR/data/PG_VERSION" ]; then
    echo gateway > "$DIR/pw"
    if [ "$(id -u)" = 0 ]; then chown postgres "$DIR/pw"; fi
    "${AS[@]}" "$BIN/initdb" -D "$DIR/data" -U gateway --pwfile="$DIR/pw" -A scram-sha-256 >/dev/null
  fi
  "${AS[@]}" "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/log" -w -o \
    "-p $PORT -c listen_addresses=127.0.0.1 -c unix_socket_directories=$DIR -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" \
    start >/dev/null
fi
echo "export GATEWAY_TEST_POSTGRES_URL=$URL"
