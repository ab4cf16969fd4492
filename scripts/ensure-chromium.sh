#!/usr/bin/env bash
# Installs Debian's chromium when /usr/bin/chromium is missing: the dashboard's tests drive it with playwright-core.
set -euo pipefail
[ -x /usr/bin/chromium ] && exit 0
sudo_cmd=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo_cmd="sudo"; else
    echo "The dashboard tests need chromium: install it (apt-get install chromium) or run as root." >&2
    exit 1
  fi
fi
echo "Installing chromium from Debian's packages (the dashboard tests run it headless)..." >&2
$sudo_cmd apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends chromium >/dev/null
