#!/usr/bin/env bash
# Installs Debian's prometheus when promtool is missing: the metrics tests check the /metrics pages with
# `promtool check metrics` (only the tool is used; installing it in a container starts no server).
set -euo pipefail
command -v promtool >/dev/null 2>&1 && exit 0
"$(dirname "$0")/apt-install.sh" "promtool checks the /metrics pages" prometheus
