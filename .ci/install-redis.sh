#!/usr/bin/env bash
# Makes sure redis-server, redis-cli, redis-sentinel, wrk and promtool are
# installed before the tests run.
#
# The integration tests start their own throwaway Redis servers (see
# internal/redistest), Sentinels included, and need the real binaries; the
# load test can use wrk; the alert rules' tests (deploy/) run promtool, from
# Debian's prometheus package. A fresh machine has none of them. Where we can install them (root with apt-get) we do. Where we
# cannot, we say so and carry on: the tests then skip on a developer's
# machine, and fail under CI=true, where skipping them would hide a gap.
#
# Debian's package may start a redis-server service on port 6379 when it is
# installed. That is harmless: the tests never use that port. The prometheus
# package may start a Prometheus server on port 9090; only promtool is
# needed, so that service is stopped and disabled.
set -euo pipefail

have_all() {
	for bin in redis-server redis-cli redis-sentinel wrk promtool; do
		command -v "$bin" >/dev/null 2>&1 || return 1
	done
}
if have_all; then
	exit 0
fi

under_ci() { [[ "${CI:-}" == "true" ]]; }

if [[ "$(id -u)" != "0" ]] || ! command -v apt-get >/dev/null 2>&1; then
	echo "note: redis-server, redis-sentinel, wrk or promtool is not installed and cannot be installed here (needs root and apt-get)." >&2
	echo "note: install Debian's redis-server, redis-sentinel, wrk and prometheus packages to run the real-Redis and alert rule tests; without them they skip (and fail under CI=true)." >&2
	exit 0
fi

export DEBIAN_FRONTEND=noninteractive
install_redis() { apt-get install -y -q --no-install-recommends redis-server redis-sentinel wrk prometheus; }

echo "installing redis-server, redis-sentinel, wrk and prometheus (for promtool) with apt-get" >&2
# The package lists may be missing or stale on a fresh machine; only refresh
# them when the first try fails, since an update is slow.
if ! install_redis; then
	echo "apt-get install failed; refreshing the package lists and retrying" >&2
	if ! { apt-get update -q && install_redis; }; then
		if under_ci; then
			echo "error: could not install redis-server, redis-sentinel, wrk and prometheus, which CI requires" >&2
			exit 1
		fi
		echo "warning: could not install redis-server, redis-sentinel, wrk and prometheus; the real-Redis and alert rule tests will skip" >&2
		exit 0
	fi
fi

# Where systemd runs, the package has started Prometheus; nothing here uses it.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
	systemctl disable --now prometheus >&2 || echo "warning: could not stop the prometheus service" >&2
fi

redis-server --version
promtool --version 2>&1 | head -n 1
