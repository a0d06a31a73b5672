#!/usr/bin/env bash
# A private MariaDB primary and its binlog replica, for trying and testing
# RUSHGATE_DATABASE_REPLICA_URLS on MySQL without touching the machine's own MariaDB.
#
#   scripts/mariadb-replica.sh start DIR [PRIMARY_PORT [REPLICA_PORT]]
#       install two fresh servers in DIR, start the primary with a row-based binary log and the
#       replica read-only, replicating it by GTID from the start, and create the database app.
#       A port not given is chosen at random below the kernel's ephemeral ports, just before its
#       server binds it, and again should another process take it first; either way a server
#       counts as started only when the one answering on its port serves its data directory.
#       Prints two lines to source:
#         MARIADB_PRIMARY_URL=mysql://root@127.0.0.1:P/app
#         MARIADB_REPLICA_URL=mysql://root@127.0.0.1:R/app
#   scripts/mariadb-replica.sh stop DIR [primary|replica]
#       stop both servers (or one of them), fast: nothing in them is meant to last.
#
# DIR must be empty or absent.
set -euo pipefail

usage() {
	sed -n '2,16p' "$0" >&2
	exit 2
}
[ $# -ge 2 ] || usage
command=$1
dir=$2

as_root=()
[ "$(id -u)" -eq 0 ] && as_root=(--user=root)

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

client() { # port, statement, client options…
	mariadb --no-defaults -uroot -h127.0.0.1 -P"$1" -e "$2" "${@:3}"
}

# serves reports whether the server answering on the port is the one of the data directory.
serves() { # data directory, port
	local served
	served=$(client "$2" "SELECT @@datadir" --skip-column-names --connect-timeout=1 2>/dev/null) &&
		[ "$(realpath -m -- "$served")" = "$(realpath -m -- "$1")" ]
}

# start_server installs a server and starts it on the port given, or with none on one chosen only
# now: mariadb-install-db takes seconds, in which another process (another run's test) can take
# a port chosen before it. The server then cannot bind it and exits, while a client of the port
# would reach the other process; so the server counts as started only when the one answering
# serves this data directory. A chosen port another process took first is chosen again. Sets
# port.
start_server() { # name, [port], server options…
	local name=$1 given=$2 attempt pid
	shift 2
	mkdir -p "$dir/$name.tmp"
	mariadb-install-db --no-defaults --datadir="$dir/$name" --tmpdir="$dir/$name.tmp" \
		--auth-root-authentication-method=normal --skip-test-db "${as_root[@]}" >"$dir/$name.log" 2>&1
	for attempt in 1 2 3 4 5; do
		port=${given:-$(free_port)}
		nohup mariadbd --no-defaults --datadir="$dir/$name" --tmpdir="$dir/$name.tmp" \
			--socket="$dir/$name.sock" --pid-file="$dir/$name.pid" --port="$port" --bind-address=127.0.0.1 \
			--innodb-buffer-pool-size=32M --innodb-flush-log-at-trx-commit=2 "${as_root[@]}" "$@" \
			>>"$dir/$name.log" 2>&1 &
		pid=$!
		for _ in $(seq 1 300); do
			serves "$dir/$name" "$port" && return 0
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if [ -n "$given" ] || kill -0 "$pid" 2>/dev/null || ! answers "$port"; then
			break
		fi
		echo "mariadb-replica: another process took port $port first (attempt $attempt), choosing another" >&2
	done
	if ! kill -0 "$pid" 2>/dev/null && answers "$port"; then
		echo "mariadb-replica: port $port is held by another process" >&2
	fi
	echo "mariadb-replica: the $name is not up on port $port; its log:" >&2
	cat "$dir/$name.log" >&2
	exit 1
}

stop_server() { # name
	local pid
	[ -f "$dir/$1.pid" ] || return 0
	pid=$(cat "$dir/$1.pid")
	kill -9 "$pid" 2>/dev/null || true
	while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
	rm -f "$dir/$1.pid"
}

case $command in
start)
	mkdir -p "$dir"
	start_server primary "${3:-}" --server-id=1 --log-bin="$dir/primary/binlog" --binlog-format=ROW
	primary_port=$port
	start_server replica "${4:-}" --server-id=2 --skip-log-bin --read-only
	replica_port=$port
	client "$replica_port" "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=$primary_port,
		MASTER_USER='root', MASTER_USE_GTID=slave_pos; START SLAVE"
	client "$primary_port" "CREATE DATABASE app"
	echo "MARIADB_PRIMARY_URL=mysql://root@127.0.0.1:$primary_port/app"
	echo "MARIADB_REPLICA_URL=mysql://root@127.0.0.1:$replica_port/app"
	;;
stop)
	case ${3:-both} in
	primary) stop_server primary ;;
	replica) stop_server replica ;;
	both)
		stop_server replica
		stop_server primary
		;;
	*) usage ;;
	esac
	;;
*) usage ;;
esac
