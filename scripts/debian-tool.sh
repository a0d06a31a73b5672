#!/usr/bin/env bash
# Installs the Debian package that provides a command the tests need (chromium for the waiting
# page's browser test, jq for the README's quickstart), unless the command is already there.
# Usage: scripts/debian-tool.sh COMMAND (the package has the command's name). Safe to run
# repeatedly; prints the command's path.
set -euo pipefail

tool=${1:?usage: scripts/debian-tool.sh COMMAND}
need_root() { if [ "$(id -u)" -ne 0 ]; then echo "sudo"; fi; }
SUDO=$(need_root)

if ! command -v "$tool" >/dev/null; then
	echo "installing $tool" >&2
	$SUDO apt-get update -q >&2
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "$tool" >&2
fi
command -v "$tool"
