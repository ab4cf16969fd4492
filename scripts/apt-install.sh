#!/usr/bin/env bash
# Installs Debian packages for the tests: as root, or through sudo. Usage: apt-install.sh "<what for>" <package>...
set -euo pipefail
why="$1"
shift
sudo_cmd=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo_cmd="sudo"; else
    echo "The tests need $*: install them (apt-get install $*) or run as root." >&2
    exit 1
  fi
fi
echo "Installing $* from Debian's packages ($why)..." >&2
$sudo_cmd apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "$@" >/dev/null
