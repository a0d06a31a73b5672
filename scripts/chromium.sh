#!/usr/bin/env bash
# Installs Debian's chromium for the waiting page's browser test (test/e2e/browser_test.go),
# unless it is already there. Safe to run repeatedly; prints the binary's path.
set -euo pipefail

need_root() { if [ "$(id -u)" -ne 0 ]; then echo "sudo"; fi; }
SUDO=$(need_root)

if ! command -v chromium >/dev/null; then
	echo "installing chromium" >&2
	$SUDO apt-get update -q -o DPkg::Lock::Timeout=300 >&2
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q -o DPkg::Lock::Timeout=300 chromium >&2
fi
command -v chromium
