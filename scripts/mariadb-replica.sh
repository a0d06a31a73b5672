#!/usr/bin/env bash
# A private MariaDB primary and its binlog replica, for trying and testing
# RUSHGATE_DATABASE_REPLICA_URLS on MySQL without touching the machine's own MariaDB.
#
#   scripts/mariadb-replica.sh start DIR [PRIMARY_PORT [REPLICA_PORT]]
#       install two fresh servers in DIR, start the primary with a row-based binary log and the
#       replica read-only, replicating it by GTID from the start, and create the database app;
#       ports default to the first free ones from 13306. Prints two lines to source:
#         MARIADB_PRIMARY_URL=mysql://root@127.0.0.1:P/app
#         MARIADB_REPLICA_URL=mysql://root@127.0.0.1:R/app
#   scripts/mariadb-replica.sh stop DIR [primary|replica]
#       stop both servers (or one of them), fast: nothing in them is meant to last.
#
# DIR must be empty or absent.
set -euo pipefail

usage() {
	sed -n '2,13p' "$0" >&2
	exit 2
}
[ $# -ge 2 ] || usage
command=$1
dir=$2

as_root=()
[ "$(id -u)" -eq 0 ] && as_root=(--user=root)

free_port() {
	local p=$1
	while (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; do p=$((p + 1)); done
	echo "$p"
}

client() { # port, statement
	mariadb --no-defaults -uroot -h127.0.0.1 -P"$1" -e "$2"
}

start_server() { # name, port, server options…
	local name=$1 port=$2
	shift 2
	mkdir -p "$dir/$name.tmp"
	mariadb-install-db --no-defaults --datadir="$dir/$name" --tmpdir="$dir/$name.tmp" \
		--auth-root-authentication-method=normal --skip-test-db "${as_root[@]}" >"$dir/$name.log" 2>&1
	nohup mariadbd --no-defaults --datadir="$dir/$name" --tmpdir="$dir/$name.tmp" \
		--socket="$dir/$name.sock" --pid-file="$dir/$name.pid" --port="$port" --bind-address=127.0.0.1 \
		--innodb-buffer-pool-size=32M --innodb-flush-log-at-trx-commit=2 "${as_root[@]}" "$@" \
		>>"$dir/$name.log" 2>&1 &
	for _ in $(seq 1 300); do
		client "$port" "SELECT 1" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "mariadb-replica: the $name did not start; its log:" >&2
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
	primary_port=${3:-$(free_port 13306)}
	replica_port=${4:-$(free_port $((primary_port + 1)))}
	mkdir -p "$dir"
	start_server primary "$primary_port" --server-id=1 --log-bin="$dir/primary/binlog" --binlog-format=ROW
	start_server replica "$replica_port" --server-id=2 --skip-log-bin --read-only
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
