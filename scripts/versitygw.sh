#!/usr/bin/env bash
# Prints the path of the versitygw binary the tests run as their S3-compatible server, building
# it once with `go install` (about 75 s) into a cache shared by every checkout:
# ${RUSHGATE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rushgate}/versitygw-$VERSION/versitygw.
# Safe to run concurrently: the build goes to a temporary directory, renamed into place.
set -euo pipefail
export PATH=$PATH:/usr/local/go/bin

VERSION=v1.8.0
CACHE=${RUSHGATE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rushgate}
DIR=$CACHE/versitygw-$VERSION
BIN=$DIR/versitygw

if [ ! -x "$BIN" ]; then
	mkdir -p "$CACHE"
	tmp=$(mktemp -d "$CACHE/.versitygw-build.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	echo "building versitygw $VERSION into $DIR (about 75 s, once)" >&2
	GOBIN=$tmp GOFLAGS=-buildvcs=false go install "github.com/versity/versitygw/cmd/versitygw@$VERSION" >&2
	mkdir -p "$DIR"
	mv -f "$tmp/versitygw" "$BIN"
fi
echo "$BIN"
