#!/usr/bin/env bash
# Installs Debian's prometheus package for its promtool (the alert rules' tests in
# deploy/prometheus run `promtool check rules` and `promtool test rules`), unless promtool is
# already there. Safe to run repeatedly; waits up to 5 minutes for another apt run's lock;
# prints the binary's path.
set -euo pipefail

need_root() { if [ "$(id -u)" -ne 0 ]; then echo "sudo"; fi; }
SUDO=$(need_root)

if ! command -v promtool >/dev/null; then
	echo "installing prometheus (for promtool)" >&2
	$SUDO apt-get -o DPkg::Lock::Timeout=300 update -q >&2
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends prometheus >&2
fi
command -v promtool
