#!/usr/bin/env bash
# Unpacks Valkey 8.0.1 (valkey-server, valkey-sentinel, valkey-cli) from Debian 12's bookworm-backports
# into a private folder and prints that folder's bin directory, for `SLUICE_TEST_SERVER=valkey`.
#
# Why a private folder rather than `apt-get install valkey-server`: the packages would start a
# system-wide valkey service on port 6379 (the tests start their own servers and need none), and
# installing them beside Debian's redis packages is more than a test run should change on a machine.
# So the script runs `apt-get download` and `dpkg-deb -x`: nothing is installed, no service starts,
# and the folder can be deleted at any time. It adds the bookworm-backports source to apt when it
# is missing (Debian 12's default sources have no Valkey), and installs the shared libraries Valkey
# links against (libjemalloc2, liblzf1, ...) when any is missing: they start nothing.
#
# Folder: $SLUICE_VALKEY_DIR, default ~/.cache/sluice/valkey-8.0.1. Run again, it only checks.
set -euo pipefail
version="8.0.1"
dir="${SLUICE_VALKEY_DIR:-${HOME:-/root}/.cache/sluice/valkey-${version}}"
bin="$dir/usr/bin"

works() {
  [ -x "$bin/valkey-server" ] && [ -x "$bin/valkey-cli" ] && [ -e "$bin/valkey-sentinel" ] &&
    "$bin/valkey-server" --version 2>/dev/null | grep -q "v=${version}"
}

if works; then
  echo "$bin"
  exit 0
fi

sudo_cmd=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo_cmd="sudo"; else
    echo "Valkey ${version} for the tests needs apt (run as root, or with sudo available)." >&2
    exit 1
  fi
fi

packages=(valkey-tools valkey-server valkey-sentinel)
pin="${version}+dfsg1-1~bpo12+1"
if ! apt-cache show "valkey-tools=${pin}" >/dev/null 2>&1; then
  if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
    echo "Adding Debian's bookworm-backports source to apt (Valkey ${version} is there)..." >&2
    printf '%s\n' 'Types: deb' 'URIs: http://deb.debian.org/debian' 'Suites: bookworm-backports' \
      'Components: main' 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' |
      $sudo_cmd tee /etc/apt/sources.list.d/bookworm-backports.sources >/dev/null
  fi
  $sudo_cmd apt-get update -qq
fi

echo "Unpacking Valkey ${version} from bookworm-backports into ${dir} (no service is installed)..." >&2
download="$(mktemp -d)"
trap 'rm -rf "$download"' EXIT
# apt's sandbox user must be able to write where it downloads.
chmod 777 "$download"
(cd "$download" && $sudo_cmd apt-get download -qq "${packages[@]/%/=${pin}}" >/dev/null)
rm -rf "$dir"
mkdir -p "$dir"
for deb in "$download"/*.deb; do dpkg-deb -x "$deb" "$dir"; done

# The shared libraries valkey-tools depends on (apt's own list, versions dropped), when missing.
if ! "$bin/valkey-server" --version >/dev/null 2>&1; then
  libraries=$(dpkg-deb -f "$download"/valkey-tools_*.deb Depends | tr ',' '\n' | sed -E 's/\(.*\)//; s/ //g' |
    grep '^lib')
  echo "Installing the libraries Valkey links against: $(echo $libraries)..." >&2
  # shellcheck disable=SC2086 # one package name per word
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends $libraries >/dev/null
fi

if ! works; then
  echo "Valkey ${version} did not run from ${bin}." >&2
  exit 1
fi
echo "$bin"
