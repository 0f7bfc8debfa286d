#!/usr/bin/env bash
# Makes sure redis-server, redis-cli, redis-sentinel and wrk are installed
# before the tests run.
#
# The integration tests start their own throwaway Redis servers (see
# internal/redistest), Sentinels included, and need the real binaries; the
# load test can use wrk. A fresh machine has none of them. Where we can install them (root with apt-get) we do. Where we
# cannot, we say so and carry on: the tests then skip on a developer's
# machine, and fail under CI=true, where skipping them would hide a gap.
#
# Debian's package may start a redis-server service on port 6379 when it is
# installed. That is harmless: the tests never use that port.
set -euo pipefail

have_all() {
	for bin in redis-server redis-cli redis-sentinel wrk; do
		command -v "$bin" >/dev/null 2>&1 || return 1
	done
}
if have_all; then
	exit 0
fi

under_ci() { [[ "${CI:-}" == "true" ]]; }

if [[ "$(id -u)" != "0" ]] || ! command -v apt-get >/dev/null 2>&1; then
	echo "note: redis-server, redis-sentinel or wrk is not installed and cannot be installed here (needs root and apt-get)." >&2
	echo "note: install Debian's redis-server, redis-sentinel and wrk packages to run the real-Redis tests; without them they skip (and fail under CI=true)." >&2
	exit 0
fi

export DEBIAN_FRONTEND=noninteractive
install_redis() { apt-get install -y -q --no-install-recommends redis-server redis-sentinel wrk; }

echo "installing redis-server, redis-sentinel and wrk with apt-get" >&2
# The package lists may be missing or stale on a fresh machine; only refresh
# them when the first try fails, since an update is slow.
if ! install_redis; then
	echo "apt-get install failed; refreshing the package lists and retrying" >&2
	if ! { apt-get update -q && install_redis; }; then
		if under_ci; then
			echo "error: could not install redis-server, redis-sentinel and wrk, which CI requires" >&2
			exit 1
		fi
		echo "warning: could not install redis-server, redis-sentinel and wrk; the real-Redis tests will skip" >&2
		exit 0
	fi
fi

redis-server --version
