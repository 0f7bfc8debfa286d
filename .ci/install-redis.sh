#!/usr/bin/env bash
# Makes sure redis-server and redis-cli are installed before the tests run.
#
# The integration tests start their own throwaway Redis servers (see
# internal/redistest) and need the real binaries; a fresh machine does not
# have them. Where we can install them (root with apt-get) we do. Where we
# cannot, we say so and carry on: the tests then skip on a developer's
# machine, and fail under CI=true, where skipping them would hide a gap.
#
# Debian's package may start a redis-server service on port 6379 when it is
# installed. That is harmless: the tests never use that port.
set -euo pipefail

if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; then
	exit 0
fi

under_ci() { [[ "${CI:-}" == "true" ]]; }

if [[ "$(id -u)" != "0" ]] || ! command -v apt-get >/dev/null 2>&1; then
	echo "note: redis-server is not installed and cannot be installed here (needs root and apt-get)." >&2
	echo "note: install Debian's redis-server package to run the real-Redis tests; without it they skip (and fail under CI=true)." >&2
	exit 0
fi

export DEBIAN_FRONTEND=noninteractive
install_redis() { apt-get install -y -q --no-install-recommends redis-server; }

echo "installing redis-server with apt-get" >&2
# The package lists may be missing or stale on a fresh machine; only refresh
# them when the first try fails, since an update is slow.
if ! install_redis; then
	echo "apt-get install failed; refreshing the package lists and retrying" >&2
	if ! { apt-get update -q && install_redis; }; then
		if under_ci; then
			echo "error: could not install redis-server, which CI requires" >&2
			exit 1
		fi
		echo "warning: could not install redis-server; the real-Redis tests will skip" >&2
		exit 0
	fi
fi

redis-server --version
