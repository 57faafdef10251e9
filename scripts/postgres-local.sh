#!/usr/bin/env bash
# Starts and stops a throw-away PostgreSQL server on this machine (no system service), for the history store's
# tests (`tests/it/history_pg.rs`) and for users who want to try a team store (`--store postgres://...`).
#
#   scripts/postgres-local.sh start   install Debian's postgresql package when missing (root only), create a
#                                     cluster and start it on 127.0.0.1:$TRAINBENCH_PG_PORT; prints its URL
#   scripts/postgres-local.sh stop    stop that server (immediate shutdown), nothing else
#
# Everything lives in $TRAINBENCH_PG_DIR (default /tmp/trainbench-postgres): the data folder, the socket, the
# logs. PostgreSQL refuses to run as root: as root the server runs as `nobody`, which owns the folder. The
# cluster trusts local connections (user `trainbench`, database `postgres`): for tests and trials only.
# Exit status: 0 started / stopped; 1 it could not be started (the reason on stderr).
set -euo pipefail

DIR="${TRAINBENCH_PG_DIR:-/tmp/trainbench-postgres}"
PORT="${TRAINBENCH_PG_PORT:-55432}"

die() { echo "postgres-local: $*" >&2; exit 1; }

bindir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }

as_owner() {
	if [ "$(id -u)" -eq 0 ]; then (cd "$DIR" && runuser -u nobody -- "$@"); else (cd "$DIR" && "$@"); fi
}

case "${1:-}" in
start)
	if [ -z "$(bindir)" ] || [ ! -x "$(bindir)/initdb" ]; then
		[ "$(id -u)" -eq 0 ] || die "no PostgreSQL server under /usr/lib/postgresql/*/bin; install Debian's postgresql package (scripts/system-deps.sh)"
		command -v apt-get >/dev/null 2>&1 || die "no PostgreSQL server and no apt-get to install it with"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null ||
			{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null; } ||
			die "apt-get install postgresql failed"
	fi
	BIN="$(bindir)"
	mkdir -p "$DIR"
	[ "$(id -u)" -eq 0 ] && chown nobody:nogroup "$DIR"
	chmod 700 "$DIR"
	as_owner "$BIN/initdb" -D "$DIR/data" -U trainbench --auth=trust --no-locale -E UTF8 >"$DIR/initdb.log" 2>&1 ||
		die "initdb failed: $(tail -n 5 "$DIR/initdb.log")"
	as_owner "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 60 \
		-o "-p $PORT -k $DIR -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50" start >/dev/null 2>&1 ||
		die "the server did not start: $(tail -n 5 "$DIR/server.log" 2>/dev/null)"
	echo "postgres://trainbench@127.0.0.1:$PORT/postgres"
	;;
stop)
	BIN="$(bindir)"
	[ -n "$BIN" ] && [ -d "$DIR/data" ] || exit 0
	as_owner "$BIN/pg_ctl" -D "$DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
	;;
*)
	die "usage: postgres-local.sh start|stop"
	;;
esac
