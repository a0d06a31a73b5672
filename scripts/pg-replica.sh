#!/usr/bin/env bash
# A private Postgres primary and its streaming read replica, for trying and testing
# RUSHGATE_DATABASE_REPLICA_URLS without touching the machine's own Postgres (whose pg_hba.conf
# has no replication entry). Uses the newest server binaries under /usr/lib/postgresql/*/bin.
#
#   scripts/pg-replica.sh start DIR [PRIMARY_PORT [REPLICA_PORT]]
#       initdb a primary in DIR/primary (trust auth, replication allowed from 127.0.0.1), start
#       it, clone it with pg_basebackup -R into DIR/replica (a standby that follows it) and start
#       that. A port not given is chosen at random below the kernel's ephemeral ports, just before
#       its server binds it, and again should another process take it first; either way a server
#       counts as started only when the one answering on its port serves its data directory.
#       Both count their statements in pg_stat_statements (database postgres). Prints two lines
#       to source:
#         PG_PRIMARY_URL=postgres://postgres@127.0.0.1:P/postgres?sslmode=disable
#         PG_REPLICA_URL=postgres://postgres@127.0.0.1:R/postgres?sslmode=disable
#   scripts/pg-replica.sh stop DIR [primary|replica]
#       stop both servers (or one of them), fast: nothing in them is meant to last.
#
# DIR must be empty or absent. Run as root, the servers run as the postgres user.
set -euo pipefail

usage() {
	sed -n '2,18p' "$0" >&2
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

answers() { # port: whether anything accepts connections on it
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# free_port is a port nothing listens on, from a random one of 20000-31999 upwards: below the
# kernel's ephemeral ports (32768 up by default), which outgoing connections take, and spread so
# that two runs at once, or a run just after a server stopped, seldom try the same one.
free_port() {
	local p=$((20000 + RANDOM % 12000))
	while answers "$p"; do p=$((p + 1)); done
	echo "$p"
}

# serves reports whether the server answering on the port is the one of the data directory.
serves() { # data directory, port
	local served
	served=$(as_owner "$bin/psql" -h 127.0.0.1 -p "$2" -U postgres -d postgres -XtAc "SHOW data_directory" 2>/dev/null) &&
		[ "$(realpath -m -- "$served")" = "$(realpath -m -- "$1")" ]
}

# start_server starts the server of a data directory on the port given, or with none on one
# chosen only now: initdb and pg_basebackup take seconds, in which another process (another
# run's test) can take a port chosen before them. The server then cannot bind it and exits, while
# a client of the port would reach the other process; so the server counts as started only when
# the one answering serves this data directory. A chosen port another process took first is
# chosen again. Sets port.
start_server() { # data directory, [port]
	local attempt
	for attempt in 1 2 3 4 5; do
		port=${2:-$(free_port)}
		if as_owner "$bin/pg_ctl" -D "$1" -l "$1.log" -w -t 60 start \
			-o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off" >/dev/null && serves "$1" "$port"; then
			return 0
		fi
		if [ -n "${2:-}" ] || [ -f "$1/postmaster.pid" ] || ! answers "$port"; then
			break
		fi
		echo "pg-replica: another process took port $port first (attempt $attempt), choosing another" >&2
	done
	if [ ! -f "$1/postmaster.pid" ] && answers "$port"; then
		echo "pg-replica: port $port is held by another process" >&2
	fi
	echo "pg-replica: the server of $1 is not up on port $port; its log:" >&2
	cat "$1.log" >&2
	exit 1
}

stop_server() { # data directory
	if [ -f "$1/postmaster.pid" ]; then
		as_owner "$bin/pg_ctl" -D "$1" -m immediate -w stop >/dev/null
	fi
}

case $command in
start)
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
	start_server "$dir/primary" "${3:-}"
	primary_port=$port
	as_owner "$bin/psql" -q -h 127.0.0.1 -p "$primary_port" -U postgres -d postgres \
		-c "CREATE EXTENSION pg_stat_statements"
	as_owner "$bin/pg_basebackup" -h 127.0.0.1 -p "$primary_port" -U postgres \
		-D "$dir/replica" -R -X stream --checkpoint=fast --no-sync
	start_server "$dir/replica" "${4:-}"
	replica_port=$port
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
