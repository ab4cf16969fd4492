#!/usr/bin/env bash
# Installs Debian's chromium when /usr/bin/chromium is missing: the dashboard's tests drive it with playwright-core.
set -euo pipefail
[ -x /usr/bin/chromium ] && exit 0
"$(dirname "$0")/apt-install.sh" "the dashboard tests run it headless" chromium
