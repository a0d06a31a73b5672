#!/usr/bin/env bash
# Installs the Debian package that provides a command the tests need (chromium for the waiting
# page's browser test, jq for the README's quickstart, promtool from prometheus for the alert
# rules), unless the command is already there.
# Usage: scripts/debian-tool.sh COMMAND [PACKAGE] (PACKAGE defaults to COMMAND). Safe to run
# repeatedly, also beside another apt run (it waits up to 5 minutes for the package lock);
# prints the command's path.
set -euo pipefail

tool=${1:?usage: scripts/debian-tool.sh COMMAND [PACKAGE]}
package=${2:-$tool}
need_root() { if [ "$(id -u)" -ne 0 ]; then echo "sudo"; fi; }
SUDO=$(need_root)

if ! command -v "$tool" >/dev/null; then
	echo "installing $package (for $tool)" >&2
	$SUDO apt-get -o DPkg::Lock::Timeout=300 update -q >&2
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=300 install -y -q \
		--no-install-recommends "$package" >&2
fi
command -v "$tool"
