#!/usr/bin/env bash
# Installs the Debian package that provides a command the tests need (chromium for the waiting
# page's browser test, jq for the README's quickstart, promtool from prometheus for the alert
# rules), unless the command is already there.
# Usage: scripts/debian-tool.sh COMMAND [PACKAGE] (PACKAGE defaults to COMMAND). Safe to run
# repeatedly, and beside another run of it or another apt (it waits up to 10 minutes); prints
# the command's path.
set -euo pipefail

tool=${1:?usage: scripts/debian-tool.sh COMMAND [PACKAGE]}
package=${2:-$tool}
need_root() { if [ "$(id -u)" -ne 0 ]; then echo "sudo"; fi; }
SUDO=$(need_root)

# update refreshes the package lists. apt-get update has no wait for the lists' lock (the dpkg
# lock's timeout does not cover it), so while another apt holds it, it is tried again.
update() {
	local out
	for _ in $(seq 1 60); do
		if out=$($SUDO apt-get -o DPkg::Lock::Timeout=300 update -q 2>&1); then
			echo "$out" >&2
			return 0
		fi
		echo "$out" >&2
		grep -q "lock" <<<"$out" || return 1
		sleep 5
	done
	return 1
}

if ! command -v "$tool" >/dev/null; then
	# Two test runs on one machine (two clones, CI beside a developer) need the same tools at
	# once: one installs, the other waits for it and then finds the command there.
	exec 9>"${TMPDIR:-/tmp}/rushgate-debian-tool.lock"
	flock -w 600 9
	if ! command -v "$tool" >/dev/null; then
		echo "installing $package (for $tool)" >&2
		update
		DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=300 install -y -q \
			--no-install-recommends "$package" >&2
	fi
fi
command -v "$tool"
