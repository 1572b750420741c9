#!/usr/bin/env bash
# Makes sure what clouddb needs at run and test time is on this machine. As root on
# Debian/Ubuntu it installs what is missing; otherwise it says exactly what to install and
# fails.
#   run:  go, redis-server
#   test: also vsftpd (FTP backups/imports), node + npm and azurite (Azure blob storage),
#         and PostgreSQL's initdb/pg_ctl (the Postgres store's tests start a throwaway
#         cluster; TEST_DATABASE_URL names a server to use instead), golangci-lint
#         at GOLANGCI_LINT_VERSION (built from the Go module proxy into $(go env GOPATH)/bin),
#         and for the browser UI test Debian's chromium and playwright-core (npm ci into
#         internal/uitest/node_modules, which git ignores, at the version its
#         package-lock.json pins), and jq and curl for the README's examples
# Usage: scripts/ensure-deps.sh [run|test]   (default: test)
set -euo pipefail
want=${1:-test}

if ! command -v go >/dev/null 2>&1; then
  echo "Go 1.26 or newer is required: see https://go.dev/doc/install" >&2
  exit 1
fi

apt_pkgs=()
command -v redis-server >/dev/null 2>&1 || apt_pkgs+=(redis-server)
if [ "$want" = test ]; then
  command -v vsftpd >/dev/null 2>&1 || [ -x /usr/sbin/vsftpd ] || apt_pkgs+=(vsftpd)
  { command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; } || apt_pkgs+=(nodejs npm)
  [ -x /usr/bin/chromium ] || apt_pkgs+=(chromium)
  # The README's examples, which a test runs as written.
  command -v jq >/dev/null 2>&1 || apt_pkgs+=(jq)
  command -v curl >/dev/null 2>&1 || apt_pkgs+=(curl)
  if [ -z "${TEST_DATABASE_URL:-}" ] && ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    apt_pkgs+=(postgresql)
  fi
fi

if [ ${#apt_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing ${apt_pkgs[*]} with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${apt_pkgs[@]}" >/dev/null
    # The packages may start system-wide servers; clouddb and its tests run their own.
    if command -v service >/dev/null 2>&1; then
      service redis-server stop >/dev/null 2>&1 || true
      service vsftpd stop >/dev/null 2>&1 || true
      service postgresql stop >/dev/null 2>&1 || true
    fi
  else
    echo "missing: ${apt_pkgs[*]}. Install them with:" >&2
    echo "  sudo apt-get install -y ${apt_pkgs[*]}      (Debian/Ubuntu)" >&2
    exit 1
  fi
fi

if [ "$want" = test ] && ! command -v azurite >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing azurite with npm" >&2
    npm install -g --silent --no-audit --no-fund azurite >/dev/null
  else
    echo "missing: azurite (the Azure storage emulator the tests use). Install it with:" >&2
    echo "  sudo npm install -g azurite" >&2
    exit 1
  fi
fi

# playwright-core drives /usr/bin/chromium in the UI test (its own browser download is
# never used); npm ci installs exactly the locked version, once.
if [ "$want" = test ]; then
  uitest="$(cd "$(dirname "$0")/.." && pwd)/internal/uitest"
  if ! [ -f "$uitest/node_modules/playwright-core/package.json" ] ||
    ! cmp -s "$uitest/package-lock.json" "$uitest/node_modules/.package-lock.json.installed"; then
    echo "installing playwright-core with npm ci in internal/uitest" >&2
    (cd "$uitest" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --silent --no-audit --no-fund >/dev/null)
    cp "$uitest/package-lock.json" "$uitest/node_modules/.package-lock.json.installed"
  fi
fi

# golangci-lint is built with go install at the pinned version (the Makefile sets it),
# unless that version is already there.
if [ "$want" = test ] && [ -n "${GOLANGCI_LINT_VERSION:-}" ]; then
  lint="$(go env GOPATH)/bin/golangci-lint"
  if ! [ -x "$lint" ] || ! "$lint" version 2>/dev/null | grep -q "version ${GOLANGCI_LINT_VERSION#v} "; then
    echo "installing golangci-lint ${GOLANGCI_LINT_VERSION} with go install (a minute or two)" >&2
    go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@${GOLANGCI_LINT_VERSION}"
  fi
fi
