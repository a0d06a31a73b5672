#!/usr/bin/env bash
# make load: for each database in LOAD_DBS (default "postgres mysql") and each instance count in
# LOAD_INSTANCES (default "1 2"), start that many rushgate servers (different RUSHGATE_ADDR and
# RUSHGATE_INSTANCE_ID, same fresh database, same Redis), run every scenario in LOAD_SCENARIOS
# (default: every one rushgate-load registers, as `rushgate-load -list` prints them) against all
# of them (requests round-robin), stop the servers and drop the database; then print a summary
# table of every run.
#
#   LOAD_FLAGS     extra flags for rushgate-load, e.g. LOAD_FLAGS="--users 5000 --concurrency 128";
#                  --users-per-instance N sizes each instance count alike: queue-push's big runs
#                  (18,000 streams on one broker, 36,000 on two) are
#                  LOAD_DBS=postgres LOAD_SCENARIOS=queue-push LOAD_FLAGS="--users-per-instance 18000"
#   LOAD_ADDR      first server's address (default 127.0.0.1:18080); a port in use is skipped,
#                  and each further instance takes the next free port
#   RUSHGATE_BIN   server binary to run instead of building ./cmd/rushgate, e.g. a build of
#                  another commit made in a git worktree
#   LOAD_PG_ADDR   the Postgres to create the database on, host:port with trust auth for user
#                  postgres (default 127.0.0.1:5432)
#   LOAD_PG_REPLICAS  streaming replicas of LOAD_PG_ADDR, host:port comma-separated (default
#                  none): the servers read from them (RUSHGATE_DATABASE_REPLICA_URLS, the same
#                  database on each); scripts/pg-replica.sh starts a primary with one
#   GOMAXPROCS     each server's (default: its share of the machine's cores, at least 1, so two
#                  instances on two cores get one each, as a container's CPU limit would give
#                  them; see docs/operations.md)
#
# Exits 1 when any run failed its invariant or saw a 5xx or a transport error, or could not run.
# A missed performance target (MISS) does not change the exit status.
set -euo pipefail
cd "$(dirname "$0")/.."

LOAD_DBS=${LOAD_DBS:-postgres mysql}
LOAD_INSTANCES=${LOAD_INSTANCES:-1 2}
LOAD_FLAGS=${LOAD_FLAGS:-}
ADDR=${LOAD_ADDR:-127.0.0.1:18080}
PG_ADDR=${LOAD_PG_ADDR:-127.0.0.1:5432}
PG_REPLICAS=${LOAD_PG_REPLICAS:-}
host=${ADDR%:*}
port=${ADDR##*:}
export RUSHGATE_JWT_SECRET=${RUSHGATE_JWT_SECRET:-load-secret-load-secret-load-secret-0}
export RUSHGATE_REDIS_URL=${RUSHGATE_REDIS_URL:-redis://127.0.0.1:6379/0}
# One line per request would make the server's logging the bottleneck being measured.
export RUSHGATE_LOG_LEVEL=warn
# queue-pull's crowd waits longer than the default idle timeout before its turn comes; at 2m the
# tail of 100,000 users would be dropped as abandoned, by design.
export RUSHGATE_QUEUE_IDLE_TIMEOUT=${RUSHGATE_QUEUE_IDLE_TIMEOUT:-30m}
# queue-push's and prequeue-open-push's clients leave once admitted; with the default grace their
# slots would come back 10 s later, which measures the grace, not the broker.
export RUSHGATE_RECONNECT_GRACE=${RUSHGATE_RECONNECT_GRACE:-0}

mkdir -p bin
if [ -n "${RUSHGATE_BIN:-}" ]; then
	go build -o bin/ ./cmd/rushgate-load
else
	go build -o bin/ ./cmd/rushgate ./cmd/rushgate-load
	RUSHGATE_BIN=bin/rushgate
fi
echo "server: $RUSHGATE_BIN"
LOAD_SCENARIOS=${LOAD_SCENARIOS:-$(bin/rushgate-load -list)}

work=$(mktemp -d /tmp/rushgate-load.XXXXXX)
summary=$work/summary.tsv
db=rg_load_$$
servers=()
status=0

stop_servers() {
	local pid
	for pid in "${servers[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${servers[@]}"; do wait "$pid" 2>/dev/null || true; done
	servers=()
}
drop_database() {
	psql -q -h "${PG_ADDR%:*}" -p "${PG_ADDR##*:}" -U postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" 2>/dev/null || true
	mariadb -uroot -h127.0.0.1 -e "DROP DATABASE IF EXISTS $db" 2>/dev/null || true
}
cleanup() {
	stop_servers
	drop_database
}
trap cleanup EXIT

# free_port p: p, or the first port above it that nothing listens on (another make load may be
# running on this machine; its servers must not get this run's requests).
free_port() {
	local p=$1
	while (exec 3<>"/dev/tcp/$host/$p") 2>/dev/null; do p=$((p + 1)); done
	echo "$p"
}

# start_server k: instance k (1-based) on the next free port; only the first applies
# migrations, so two instances never race to migrate the same database.
start_server() {
	local k=$1 log="$work/server-$dialect-$n-$1.log" migrate=false pid addr
	next_port=$(free_port "$next_port")
	addr="$host:$next_port"
	next_port=$((next_port + 1))
	[ "$k" = 1 ] && migrate=true
	GOMAXPROCS=$procs RUSHGATE_ADDR=$addr RUSHGATE_INSTANCE_ID=load-$k RUSHGATE_MIGRATE=$migrate \
		"$RUSHGATE_BIN" serve >"$log" 2>&1 &
	pid=$!
	servers+=("$pid")
	for _ in $(seq 1 100); do
		curl -fs "http://$addr/readyz" >/dev/null 2>&1 && break
		sleep 0.1
	done
	# Alive too: a server that lost its port to someone else exits, and readyz is then theirs.
	if ! curl -fs "http://$addr/readyz" >/dev/null || ! kill -0 "$pid" 2>/dev/null; then
		echo "instance $k at $addr did not become ready:" >&2
		cat "$log" >&2
		exit 1
	fi
	urls+=("--url" "http://$addr")
}

for dialect in $LOAD_DBS; do
	for n in $LOAD_INSTANCES; do
		case $dialect in
		postgres)
			psql -q -h "${PG_ADDR%:*}" -p "${PG_ADDR##*:}" -U postgres -c "CREATE DATABASE $db"
			export RUSHGATE_DATABASE_URL="postgres://postgres@$PG_ADDR/$db?sslmode=disable"
			replicas=()
			for replica in ${PG_REPLICAS//,/ }; do
				replicas+=("postgres://postgres@$replica/$db?sslmode=disable")
			done
			RUSHGATE_DATABASE_REPLICA_URLS=$(IFS=,; echo "${replicas[*]}")
			export RUSHGATE_DATABASE_REPLICA_URLS ;;
		mysql)
			mariadb -uroot -h127.0.0.1 -e "CREATE DATABASE $db"
			export RUSHGATE_DATABASE_URL="mysql://root@127.0.0.1:3306/$db"
			export RUSHGATE_DATABASE_REPLICA_URLS= ;;
		*) echo "unknown database $dialect (want postgres or mysql)" >&2; exit 2 ;;
		esac

		urls=()
		next_port=$port
		procs=${GOMAXPROCS:-$(( $(nproc) / n > 1 ? $(nproc) / n : 1 ))}
		echo "$n instance(s), GOMAXPROCS=$procs each"
		for k in $(seq 1 "$n"); do start_server "$k"; done

		for scenario in $LOAD_SCENARIOS; do
			# shellcheck disable=SC2086
			bin/rushgate-load "${urls[@]}" --summary "$summary" $LOAD_FLAGS "$scenario" || status=1
			echo
		done

		stop_servers
		drop_database
	done
done

echo "summary (server logs in $work):"
if [ -s "$summary" ]; then
	column -t -s $'\t' "$summary" 2>/dev/null || cat "$summary"
fi
exit $status
