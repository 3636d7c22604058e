#!/usr/bin/env bash
# Install Debian/Ubuntu packages with apt-get, quietly and without questions, as root.
#
# Usage: bash apt-install.sh PACKAGE...
# The one place hpcflow runs apt-get: scripts/install.sh and `hpcflow local-cluster up` call it.
# Exit 0 when every package is installed; 1 with a message on stderr when apt-get is missing,
# this is not root, or apt-get failed.
set -euo pipefail

die() { printf 'apt-install: error: %s\n' "$*" >&2; exit 1; }

(($#)) || die "no package named; usage: apt-install.sh PACKAGE..."
command -v apt-get >/dev/null || die "missing $* and no apt-get: install them by hand"
[[ "$(id -u)" == 0 ]] || die "missing $*: run as root to install them"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "$@" >/dev/null
