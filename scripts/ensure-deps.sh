#!/usr/bin/env bash
# Makes sure what clouddb needs at run and test time is on this machine: Go and
# redis-server. As root on Debian/Ubuntu it installs what is missing; otherwise it says
# exactly what to install and fails.
set -euo pipefail

missing=()
command -v go >/dev/null 2>&1 || missing+=("go")
command -v redis-server >/dev/null 2>&1 || missing+=("redis-server")
[ ${#missing[@]} -eq 0 ] && exit 0

if [[ " ${missing[*]} " == *" go "* ]]; then
  echo "Go 1.26 or newer is required: see https://go.dev/doc/install" >&2
  exit 1
fi

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing redis-server with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq redis-server >/dev/null
  # The package may start a system-wide server on 6379; clouddb runs its own servers and
  # does not need it.
  if command -v service >/dev/null 2>&1; then service redis-server stop >/dev/null 2>&1 || true; fi
  command -v redis-server >/dev/null 2>&1 && exit 0
fi

echo "redis-server is required. Install it with:" >&2
echo "  sudo apt-get install -y redis-server      (Debian/Ubuntu)" >&2
echo "  brew install redis                         (macOS)" >&2
exit 1
