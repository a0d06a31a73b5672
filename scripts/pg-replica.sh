#!/usr/bin/env bash
# A private Postgres primary and its streaming read replica, for trying and testing
# RUSHGATE_DATABASE_REPLICA_URLS without touching the machine's own Postgres (whose pg_hba.conf
# has no replication entry). Uses the newest server binaries under /usr/lib/postgresql/*/bin.
#
#   scripts/pg-replica.sh start DIR [PRIMARY_PORT [REPLICA_PORT]]
#       initdb a primary in DIR/primary (trust auth, replication allowed from 127.0.0.1), start
#       it, clone it with pg_basebackup -R into DIR/replica (a standby that follows it) and start
#       that; ports default to the first free ones from 15432. Both count their statements in
#       pg_stat_statements (database postgres). Prints two lines to source:
#         PG_PRIMARY_URL=postgres://postgres@127.0.0.1:P/postgres?sslmode=disable
#         PG_REPLICA_URL=postgres://postgres@127.0.0.1:R/postgres?sslmode=disable
#   scripts/pg-replica.sh stop DIR [primary|replica]
#       stop both servers (or one of them), fast: nothing in them is meant to last.
#
# DIR must be empty or absent. Run as root, the servers run as the postgres user.
set -euo pipefail

usage() {
	sed -n '2,16p' "$0" >&2
	exit 2
}
[ $# -ge 2 ] || usage
command=$1
dir=$2

bin=$(find /usr/lib/postgresql/*/bin -maxdepth 0 2>/dev/null | sort -V | tail -1)
if [ -z "$bin" ] || [ ! -x "$bin/pg_ctl" ]; then
	echo "pg-replica: no Postgres server binaries under /usr/lib/postgresql/*/bin" >&2
	exit 1
fi

# as_owner runs a server binary as the owner of the data (postgres refuses to run as root).
as_owner() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

free_port() {
	local p=$1
	while (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; do p=$((p + 1)); done
	echo "$p"
}

start_server() { # data directory, port
	as_owner "$bin/pg_ctl" -D "$1" -l "$1.log" -w -t 60 start \
		-o "-p $2 -k $dir -c listen_addresses=127.0.0.1 -c fsync=off" >/dev/null
}

stop_server() { # data directory
	if [ -f "$1/postmaster.pid" ]; then
		as_owner "$bin/pg_ctl" -D "$1" -m immediate -w stop >/dev/null
	fi
}

case $command in
start)
	primary_port=${3:-$(free_port 15432)}
	replica_port=${4:-$(free_port $((primary_port + 1)))}
	mkdir -p "$dir"
	[ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
	as_owner "$bin/initdb" -D "$dir/primary" -U postgres --auth=trust -E UTF8 --no-sync >/dev/null
	# initdb's trust pg_hba.conf already admits replication connections from 127.0.0.1, and the
	# defaults (wal_level=replica, max_wal_senders=10) allow a streaming standby; this only makes
	# the replica answer reads while it replays and tell the primary what it still needs.
	# pg_stat_statements counts what each server ran, which shows what the replica served.
	cat >>"$dir/primary/postgresql.conf" <<-EOF
		hot_standby = on
		hot_standby_feedback = on
		shared_preload_libraries = 'pg_stat_statements'
	EOF
	start_server "$dir/primary" "$primary_port"
	as_owner "$bin/psql" -q -h 127.0.0.1 -p "$primary_port" -U postgres -d postgres \
		-c "CREATE EXTENSION pg_stat_statements"
	as_owner "$bin/pg_basebackup" -h 127.0.0.1 -p "$primary_port" -U postgres \
		-D "$dir/replica" -R -X stream --checkpoint=fast --no-sync
	start_server "$dir/replica" "$replica_port"
	echo "PG_PRIMARY_URL=postgres://postgres@127.0.0.1:$primary_port/postgres?sslmode=disable"
	echo "PG_REPLICA_URL=postgres://postgres@127.0.0.1:$replica_port/postgres?sslmode=disable"
	;;
stop)
	case ${3:-both} in
	primary) stop_server "$dir/primary" ;;
	replica) stop_server "$dir/replica" ;;
	both)
		stop_server "$dir/replica"
		stop_server "$dir/primary"
		;;
	*) usage ;;
	esac
	;;
*) usage ;;
esac
