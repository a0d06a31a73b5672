#!/usr/bin/env bash
# make load: for each database in LOAD_DBS (default "postgres mysql"), start rushgate on a fresh
# database + Redis, run the crew-herd and crew-spread scenarios (each also measures the raw
# database ceiling), stop the server and drop the database. Extra flags for rushgate-load go in
# LOAD_FLAGS, e.g. LOAD_FLAGS="--users 5000 --concurrency 128".
set -euo pipefail
cd "$(dirname "$0")/.."

LOAD_DBS=${LOAD_DBS:-postgres mysql}
LOAD_FLAGS=${LOAD_FLAGS:-}
ADDR=${LOAD_ADDR:-127.0.0.1:18080}
export RUSHGATE_JWT_SECRET=${RUSHGATE_JWT_SECRET:-load-secret-load-secret-load-secret-0}
export RUSHGATE_REDIS_URL=${RUSHGATE_REDIS_URL:-redis://127.0.0.1:6379/0}
export RUSHGATE_ADDR=$ADDR
# One line per request would make the server's logging the bottleneck being measured.
export RUSHGATE_LOG_LEVEL=warn

mkdir -p bin
go build -o bin/ ./cmd/rushgate ./cmd/rushgate-load

db=rg_load_$$
server=
status=0
cleanup() {
	if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
	psql -q -h 127.0.0.1 -U postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" 2>/dev/null || true
	mariadb -uroot -h127.0.0.1 -e "DROP DATABASE IF EXISTS $db" 2>/dev/null || true
}
trap cleanup EXIT

for dialect in $LOAD_DBS; do
	case $dialect in
	postgres)
		psql -q -h 127.0.0.1 -U postgres -c "CREATE DATABASE $db"
		export RUSHGATE_DATABASE_URL="postgres://postgres@127.0.0.1:5432/$db?sslmode=disable" ;;
	mysql)
		mariadb -uroot -h127.0.0.1 -e "CREATE DATABASE $db"
		export RUSHGATE_DATABASE_URL="mysql://root@127.0.0.1:3306/$db" ;;
	*) echo "unknown database $dialect (want postgres or mysql)" >&2; exit 2 ;;
	esac

	bin/rushgate serve >"/tmp/rushgate-load-server-$dialect.log" 2>&1 &
	server=$!
	for _ in $(seq 1 100); do
		curl -fs "http://$ADDR/readyz" >/dev/null 2>&1 && break
		sleep 0.1
	done
	curl -fs "http://$ADDR/readyz" >/dev/null || { cat "/tmp/rushgate-load-server-$dialect.log"; exit 1; }

	for scenario in crew-herd crew-spread; do
		# shellcheck disable=SC2086
		bin/rushgate-load --url "http://$ADDR" $LOAD_FLAGS "$scenario" || status=1
		echo
	done

	kill "$server"; wait "$server" 2>/dev/null || true; server=
	cleanup
done
exit $status
