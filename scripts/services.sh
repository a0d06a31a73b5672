#!/usr/bin/env bash
# Starts the services rushgate's tests use — Postgres, MariaDB, Redis — if they are down, and
# installs them with apt-get where they are missing. Safe to run repeatedly.
set -euo pipefail

need_root() { if [ "$(id -u)" -ne 0 ]; then echo "sudo"; fi; }
SUDO=$(need_root)

install_missing() {
	local missing=()
	command -v pg_ctlcluster >/dev/null || missing+=(postgresql)
	command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server)
	command -v redis-server >/dev/null || missing+=(redis-server)
	if [ ${#missing[@]} -gt 0 ]; then
		echo "installing ${missing[*]}"
		$SUDO apt-get update -q
		DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
	fi
}

wait_for() { # name, command
	for _ in $(seq 1 50); do
		if eval "$2" >/dev/null 2>&1; then echo "$1 up"; return 0; fi
		sleep 0.2
	done
	echo "$1 did not come up" >&2
	return 1
}

install_missing

if ! pg_isready -h 127.0.0.1 -p 5432 -q; then
	$SUDO pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start
fi
wait_for postgres "pg_isready -h 127.0.0.1 -p 5432 -q"

if ! mariadb-admin -uroot -h127.0.0.1 ping >/dev/null 2>&1; then
	$SUDO start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
fi
wait_for mariadb "mariadb-admin -uroot -h127.0.0.1 ping"
mariadb -uroot -h127.0.0.1 -e "CREATE DATABASE IF NOT EXISTS test"

if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
	mkdir -p /var/lib/redis /var/log/redis
	$SUDO redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
		--dir /var/lib/redis --logfile /var/log/redis/ci.log
fi
wait_for redis "redis-cli -h 127.0.0.1 -p 6379 ping"
