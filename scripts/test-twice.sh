#!/usr/bin/env bash
# Runs `make test` twice at the same time, each in a clean clone of the current HEAD, against
# the same Postgres, MariaDB and Redis: the check that two runs on one machine (two CI jobs, two
# developers) cannot disturb each other. Prints each run's wall time and exit status, keeps
# each run's output in its clone's test.log, and exits non-zero when either run failed.
# TEST_TWICE_TARGET runs another make target instead (e.g. TEST_TWICE_TARGET=lint).
set -euo pipefail
export PATH=$PATH:/usr/local/go/bin
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
target=${TEST_TWICE_TARGET:-test}
head=$(git -C "$repo" rev-parse --short HEAD)
if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then
	echo "note: uncommitted changes are not tested; the clones are of HEAD $head" >&2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/rushgate-test-twice.XXXXXX")
echo "make $target twice at once on HEAD $head, in $work/{a,b}"
for run in a b; do
	git clone --quiet --no-hardlinks "$repo" "$work/$run"
	git -C "$work/$run" checkout --quiet --detach "$head"
done

declare -A pid
for run in a b; do
	(
		cd "$work/$run"
		start=$(date +%s)
		status=0
		make "$target" >test.log 2>&1 || status=$?
		echo "$status $(($(date +%s) - start))" >result
	) &
	pid[$run]=$!
done
for run in a b; do wait "${pid[$run]}"; done

failed=0
for run in a b; do
	read -r status seconds <"$work/$run/result"
	printf 'run %s: make %s exited %d after %dm%02ds (log: %s)\n' \
		"$run" "$target" "$status" $((seconds / 60)) $((seconds % 60)) "$work/$run/test.log"
	if [ "$status" -ne 0 ]; then
		failed=1
		echo "--- run $run, failures:"
		grep -E '^(--- FAIL|FAIL|panic:)' "$work/$run/test.log" | head -40 || true
	fi
done
if [ "$failed" -eq 0 ]; then
	rm -rf "$work"
	echo "both runs passed"
fi
exit "$failed"
