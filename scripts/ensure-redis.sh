#!/usr/bin/env bash
# Installs redis-server, redis-sentinel and redis-cli from Debian's packages when any is missing.
set -euo pipefail
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
command -v redis-sentinel >/dev/null 2>&1 || need+=(redis-sentinel)
[ ${#need[@]} -eq 0 ] && exit 0
"$(dirname "$0")/apt-install.sh" "the tests start their own servers" "${need[@]}"
# The packages start a system-wide server; the tests do not use it, so stop it where we can.
sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
if command -v service >/dev/null 2>&1; then $sudo_cmd service redis-server stop >/dev/null 2>&1 || true; fi
