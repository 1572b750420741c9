#!/usr/bin/env bash
# A real single-host Kubernetes for the kubernetes driver's tests: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, a kubelet on containerd + runc with a CNI bridge,
# and kube-proxy, from Debian's packages and the Go module proxy alone (no registry).
#
# Usage: scripts/k8s-test-cluster.sh up|down|env|build|build-bg|run -- COMMAND...
#   up    installs what is missing (root, apt), builds the Kubernetes commands once (see
#         build), starts the cluster (about ten seconds when built) and prints the
#         environment the tests read (also written to $CLOUDDB_K8S_STATE/env).
#   build builds the Kubernetes commands if missing (~3.5 GB of Go module and build cache
#         while it runs, deleted after; the binaries are kept in $CLOUDDB_K8S_CACHE), or
#         waits for a build in progress. Needs no root and takes no cluster lock.
#   build-bg  starts that build in the background (nice 19, output to build.log in the
#         cache) and returns at once; a later build, up or run waits for it.
#   down  stops everything `up` started and undoes its changes to the host (pods, mounts,
#         iptables chains, the node address, sysctls). Callers `trap` it.
#   env   prints that environment again for a running cluster.
#   run   brings the cluster up, runs COMMAND with that environment and always brings it
#         down after (an EXIT trap, Ctrl-C included). One run at a time on a machine: a
#         second waits for the first (a lock), since they would share the node's address,
#         ports and state.
#
# Root is required: the kubelet, containerd and kube-proxy change the host's network and
# cgroups. Addresses used: 127.0.0.1, the node address on lo ($NODE_IP), the pod subnet on
# a bridge and the service range; all local to this host.
set -euo pipefail

K8S_VERSION=${CLOUDDB_K8S_VERSION:-1.33.13}
CACHE=${CLOUDDB_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clouddb-k8s}
STATE=${CLOUDDB_K8S_STATE:-${TMPDIR:-/tmp}/clouddb-k8s-state}
BIN=$CACHE/v$K8S_VERSION/bin
IMAGES=$CACHE/images
PIDS=$STATE/pids
LOGS=$STATE/logs
PKI=$STATE/pki
CTRD=$STATE/containerd
ETCD_PORT=${CLOUDDB_K8S_ETCD_PORT:-23790}
API_PORT=${CLOUDDB_K8S_API_PORT:-16443}
NODE_NAME=clouddb-node
# kubelet refuses a 127.x node address: this one is added to lo for the cluster's life.
NODE_IP=10.250.255.1
POD_SUBNET=10.250.0.0/24
SERVICE_CIDR=10.96.0.0/16
BRIDGE=clouddb0
# The in-tree hostPath provisioner (test-only, single node) writes under this fixed path.
HOSTPATH_PV=/tmp/hostpath_pv
ADMIN_TOKEN=clouddb-test-admin

t0=$(date +%s)
say() { echo "[k8s-test-cluster $(($(date +%s) - t0))s] $*" >&2; }
die() {
  echo "k8s-test-cluster: $*" >&2
  exit 1
}

redis_image() {
  local v
  v=$(redis-server --version | sed -n 's/.* v=\([0-9.]*\).*/\1/p')
  echo "localhost/clouddb-redis:${v:-unknown}"
}

# The newest PostgreSQL server of this machine (Debian's layout), which the PostgreSQL
# image is made of; empty when there is none.
postgres_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }

postgres_image() {
  local b
  b=$(postgres_bin)
  [ -n "$b" ] && [ -x "$b/postgres" ] && echo "localhost/clouddb-postgres:$(basename "$(dirname "$b")")"
}

print_env() {
  cat <<E
export CLOUDDB_K8S_KUBECONFIG=$STATE/admin.kubeconfig
export CLOUDDB_K8S_REDIS_IMAGE=$(redis_image)
export CLOUDDB_K8S_POSTGRES_IMAGE=$(postgres_image)
export CLOUDDB_K8S_CONTAINERD=$CTRD/containerd.sock
export CLOUDDB_K8S_NODE_IP=$NODE_IP
export CLOUDDB_K8S_STORAGE_CLASS=clouddb-hostpath
E
}

# ---- packages -------------------------------------------------------------------------
ensure_packages() {
  local need=() p
  for p in etcd-server containerd runc containernetworking-plugins iptables redis-server openssl curl; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
  done
  [ ${#need[@]} -eq 0 ] && return
  command -v apt-get >/dev/null || die "missing Debian packages: ${need[*]}"
  say "installing ${need[*]} with apt-get"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  # containerd's package may start a system-wide daemon; the cluster runs its own.
  command -v service >/dev/null && service containerd stop >/dev/null 2>&1 || true
  command -v service >/dev/null && service redis-server stop >/dev/null 2>&1 || true
}

# ---- Kubernetes commands, built once from the module proxy ------------------------------
# The commands the cluster runs, each a link to one binary (hyperkube) that runs the
# command its name says: linked once instead of five times. No kubectl: the script talks
# to the API with curl. A cache from before (one binary per command) still serves.
K8S_CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)
BUILD_LOG=$CACHE/build.log

built() {
  local c
  for c in "${K8S_CMDS[@]}"; do [ -x "$BIN/$c" ] || return 1; done
}

# build [--record]: the binaries, once. One build at a time per cache (a lock): another
# waits for it and uses its binaries. --record (the background build of build-bg) leaves
# a mark when it fails, for the next build to report with the log instead of starting over
# unseen. A subshell, so that the lock is not inherited by the daemons `up` starts.
build() (
  mkdir -p "$CACHE"
  exec 8>"$CACHE/build.lock"
  if ! flock -n 8; then
    say "waiting for the Kubernetes build in progress (build-bg logs to $BUILD_LOG)"
    flock 8
  fi
  if [ "${1:-}" = --record ]; then
    rm -f "$BUILD_LOG.failed"
  elif [ -f "$BUILD_LOG.failed" ]; then
    rm -f "$BUILD_LOG.failed"
    echo "---- the end of $BUILD_LOG:" >&2
    tail -n 25 "$BUILD_LOG" >&2
    die "the background build of Kubernetes failed (log above); the next run builds again"
  fi
  built && exit 0
  say "building Kubernetes v$K8S_VERSION from the Go module proxy (once: ~500 CPU seconds, 4 to 6 minutes on 2 cores)"
  work=$CACHE/build minor=${K8S_VERSION#1.} record=${1:-}
  # The throwaway module and build cache (several GB) go whatever the outcome. A failed
  # background build leaves its mark here, while the lock is held: a waiting build sees it.
  cleanup() {
    local st=$?
    rm -rf "$work"
    [ "$st" = 0 ] || [ "$record" != --record ] || : >"$BUILD_LOG.failed"
  }
  trap cleanup EXIT
  rm -rf "$work" && mkdir -p "$work/src"
  (
    # -modcacherw: a module cache that rm -rf can remove without root.
    export GOMODCACHE=$work/gomod GOCACHE=$work/gocache GOFLAGS="-mod=mod -modcacherw -buildvcs=false" CGO_ENABLED=0
    cd "$work/src"
    local dl up apps=() c
    # On failure the JSON says why (its "Error"): show it rather than exit without a word.
    dl=$(cd / && go mod download -json "k8s.io/kubernetes@v$K8S_VERSION") || {
      grep '"Error"' <<<"$dl" >&2
      die "cannot download k8s.io/kubernetes@v$K8S_VERSION"
    }
    up=$(sed -n 's/.*"GoMod": "\(.*\)",*/\1/p' <<<"$dl")
    {
      printf 'module k8sbuild\n\ngo 1.24\n\nrequire k8s.io/kubernetes v%s\n\nreplace (\n' "$K8S_VERSION"
      # k8s.io/kubernetes replaces its staging modules with ./staging/...: use their releases.
      for m in $(sed -n 's#^\t\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$up"); do
        case $m in k8s.io/sample-*) continue ;; esac
        printf '\t%s => %s v0.%s\n' "$m" "$m" "$minor"
      done
      # Not on the proxy and never imported by these commands: empty local modules.
      for m in sample-apiserver sample-cli-plugin sample-controller; do
        mkdir -p "stub/$m" && printf 'module k8s.io/%s\n\ngo 1.22\n' "$m" >"stub/$m/go.mod"
        printf '\tk8s.io/%s => ./stub/%s\n' "$m" "$m"
      done
      printf ')\n'
    } >go.mod
    # Each command's main.go, as in cmd/*/main.go, behind a switch on the name.
    cat >main.go <<'G'
package main

import (
	"fmt"
	"os"
	"path/filepath"
	_ "time/tzdata" // CronJob time zones

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	commands := map[string]func() *cobra.Command{
		"kube-apiserver":          apiserver.NewAPIServerCommand,
		"kube-controller-manager": controllermanager.NewControllerManagerCommand,
		"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
		"kubelet":                 kubelet.NewKubeletCommand,
		"kube-proxy":              proxy.NewProxyCommand,
	}
	name := filepath.Base(os.Args[0])
	if _, ok := commands[name]; !ok && len(os.Args) > 1 {
		name, os.Args = os.Args[1], os.Args[1:] // hyperkube COMMAND ARGS...
	}
	newCommand, ok := commands[name]
	if !ok {
		fmt.Fprintln(os.Stderr, "usage: hyperkube COMMAND [flags] (or a link named COMMAND): kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy")
		os.Exit(2)
	}
	os.Exit(cli.Run(newCommand()))
}
G
    for c in "${K8S_CMDS[@]}"; do apps+=("k8s.io/kubernetes/cmd/$c/app@v$K8S_VERSION"); done
    go get "${apps[@]}" >/dev/null
    local ld="-s -w -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1"
    ld+=" -X k8s.io/component-base/version.gitMinor=${minor%%.*} -X k8s.io/client-go/pkg/version.gitVersion=v$K8S_VERSION"
    ld+=" -X k8s.io/component-base/version.gitTreeState=clean"
    # -dwarf=false: the compiler's debug information, which -w drops at the link anyway.
    nice go build -trimpath -gcflags=all=-dwarf=false -ldflags "$ld" -o "$work/hyperkube" .
  )
  # A directory of this layout only: whatever an earlier or partial build left goes.
  rm -rf "$BIN" && mkdir -p "$BIN"
  mv "$work/hyperkube" "$BIN/"
  for c in "${K8S_CMDS[@]}"; do ln -s hyperkube "$BIN/$c"; done
  say "binaries in $BIN ($(du -sh "$BIN" | cut -f1))"
)

# build-bg: the build, started in the background at the lowest priority with its output
# in $BUILD_LOG; returns at once. `make test` starts it first, so that it overlaps vet,
# lint and the other packages' tests; `build` and `up` then wait for it. It goes on if
# the caller is interrupted, and the next run uses it.
build_bg() {
  built && return
  mkdir -p "$CACHE"
  setsid nice -n 19 "$0" build --record </dev/null >"$BUILD_LOG" 2>&1 &
  say "building Kubernetes in the background (log: $BUILD_LOG)"
}

# ---- images without a registry -----------------------------------------------------------
# mkimage ROOTFS REF OUT ENTRYPOINT: a one-layer `docker save` tar that `ctr images import` loads.
mkimage() {
  local w l c
  w=$(mktemp -d)
  tar --numeric-owner --owner=0 --group=0 -C "$1" -cf "$w/layer.tar" .
  l=$(sha256sum "$w/layer.tar" | cut -d' ' -f1)
  mkdir "$w/$l" && mv "$w/layer.tar" "$w/$l/"
  printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["%s"],"Env":["PATH=/usr/bin:/bin"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$4" "$l" >"$w/config.json"
  c=$(sha256sum "$w/config.json" | cut -d' ' -f1)
  mv "$w/config.json" "$w/$c.json"
  printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$c" "$2" "$l" >"$w/manifest.json"
  tar -C "$w" -cf "$3" manifest.json "$c.json" "$l"
  rm -rf "$w"
}

build_images() {
  mkdir -p "$IMAGES"
  if [ ! -f "$IMAGES/pause.tar" ]; then
    # The sandbox image: a static program that reaps children until told to stop.
    local w
    w=$(mktemp -d)
    mkdir -p "$w/src" "$w/root"
    cat >"$w/src/main.go" <<'G'
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 8)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range c {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			if p, _ := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); p <= 0 {
				break
			}
		}
	}
}
G
    printf 'module pause\n\ngo 1.22\n' >"$w/src/go.mod"
    (cd "$w/src" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -ldflags='-s -w' -o "$w/root/pause" .)
    mkimage "$w/root" registry.k8s.io/pause:3.10 "$IMAGES/pause.tar" /pause
    rm -rf "$w"
  fi
  local ref tar
  ref=$(redis_image)
  tar=$IMAGES/redis-${ref##*:}.tar
  if [ ! -f "$tar" ]; then
    # Debian's redis-server and redis-cli with the libraries they link: about 18 MB.
    local r b l
    r=$(mktemp -d)
    mkdir -p "$r/usr/bin" "$r/etc" "$r/tmp" "$r/data"
    chmod 1777 "$r/tmp"
    for b in /usr/bin/redis-server /usr/bin/redis-cli; do
      cp -L "$b" "$r/usr/bin/"
      for l in $(ldd "$b" | grep -oE '/[^ ]+'); do
        mkdir -p "$r$(dirname "$l")" && cp -L "$l" "$r$l"
      done
    done
    printf 'root:x:0:0::/root:/bin/false\n' >"$r/etc/passwd"
    printf 'root:x:0:\n' >"$r/etc/group"
    mkimage "$r" "$ref" "$tar" /usr/bin/redis-server
    rm -rf "$r"
  fi
  postgres_image_tar
}

# copy_with_libs ROOT FILE...: the files at the same paths under ROOT, with the libraries
# they link.
copy_with_libs() {
  local r=$1 f l
  shift
  for f in "$@"; do
    mkdir -p "$r$(dirname "$f")" && cp -L "$f" "$r$f"
    for l in $(ldd "$f" | grep -oE '/[^ ]+'); do
      [ -e "$r$l" ] || { mkdir -p "$r$(dirname "$l")" && cp -L "$l" "$r$l"; }
    done
  done
}

# postgres_entrypoint: the Go source of the PostgreSQL image's entrypoint.
postgres_entrypoint() {
  cat <<'G'
// The entrypoint of the test cluster's PostgreSQL image, as the official image's: on an
// empty PGDATA, initdb with POSTGRES_USER (default postgres) and POSTGRES_PASSWORD
// (required), password logins from anywhere (scram-sha-256), POSTGRES_DB (default the
// user) created; then postgres, as uid 999, listening on every address.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

const uid, gid = 999, 999

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func fail(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "postgres entrypoint: "+f+"\n", a...)
	os.Exit(1)
}

func run(stdin string, name string, args ...string) {
	cmd := exec.Command(name, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	if err := cmd.Run(); err != nil {
		fail("%s: %v", name, err)
	}
}

func main() {
	bin := filepath.Dir(os.Args[0])
	user, pw := env("POSTGRES_USER", "postgres"), os.Getenv("POSTGRES_PASSWORD")
	db, data := env("POSTGRES_DB", user), env("PGDATA", "/var/lib/postgresql/data")
	if pw == "" {
		fail("POSTGRES_PASSWORD is empty: set it")
	}
	for _, d := range []string{data, "/var/run/postgresql"} {
		// Its parents open to the server's user: the volume's mount point among them,
		// which a provisioner may have made root's alone.
		if err := os.MkdirAll(filepath.Dir(d), 0o755); err != nil {
			fail("%v", err)
		}
		if fi, err := os.Stat(filepath.Dir(d)); err != nil || os.Chmod(filepath.Dir(d), fi.Mode().Perm()|0o011) != nil {
			fail("cannot open %s to the server's user", filepath.Dir(d))
		}
		if err := os.Mkdir(d, 0o700); err != nil && !os.IsExist(err) {
			fail("%v", err)
		}
		if err := os.Chown(d, uid, gid); err != nil {
			fail("%v", err)
		}
	}
	if err := os.Chmod(data, 0o700); err != nil { // postgres refuses a PGDATA others can read
		fail("%v", err)
	}
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		pwfile := filepath.Join("/tmp", "pwfile")
		if err := os.WriteFile(pwfile, []byte(pw+"\n"), 0o600); err != nil {
			fail("%v", err)
		}
		if err := os.Chown(pwfile, uid, gid); err != nil {
			fail("%v", err)
		}
		run("", filepath.Join(bin, "initdb"), "-D", data, "-U", user, "--pwfile", pwfile, "-E", "UTF8", "--no-locale",
			"--auth-local", "trust", "--auth-host", "scram-sha-256")
		os.Remove(pwfile)
		hba, err := os.OpenFile(filepath.Join(data, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
		if err == nil {
			_, err = hba.WriteString("host all all all scram-sha-256\n")
			hba.Close()
		}
		if err != nil {
			fail("pg_hba.conf: %v", err)
		}
		if db != "postgres" {
			run(`CREATE DATABASE "`+strings.ReplaceAll(db, `"`, `""`)+`";`+"\n", filepath.Join(bin, "postgres"), "--single", "-D", data, "-j", "postgres")
		}
	}
	if err := syscall.Setgid(gid); err != nil {
		fail("%v", err)
	}
	if err := syscall.Setuid(uid); err != nil {
		fail("%v", err)
	}
	pg := filepath.Join(bin, "postgres")
	fail("%v", syscall.Exec(pg, []string{pg, "-D", data, "-c", "listen_addresses=*"}, os.Environ()))
}
G
}

# postgres_tar: the cached image of postgres_image, named by its version and its
# entrypoint's source, so that a changed entrypoint makes a new one.
postgres_tar() {
  local ref
  ref=$(postgres_image) || return 1
  echo "$IMAGES/postgres-${ref##*:}-$(postgres_entrypoint | sha256sum | cut -c1-12).tar"
}

# The PostgreSQL of deploy/kubernetes/clouddb.yaml (which names the official postgres:15)
# for TestDeploy: this machine's server, its extensions and data files, and an entrypoint
# that honours the official image's POSTGRES_PASSWORD, POSTGRES_USER, POSTGRES_DB and
# PGDATA. Skipped, with a notice, when the machine has no PostgreSQL server: TestDeploy
# then fails saying so.
postgres_image_tar() {
  local ref bin tar
  ref=$(postgres_image) || true
  if [ -z "$ref" ]; then
    say "no PostgreSQL server here (/usr/lib/postgresql/*/bin): no PostgreSQL image for TestDeploy"
    return
  fi
  bin=$(postgres_bin)
  tar=$(postgres_tar)
  [ -f "$tar" ] && return
  rm -f "$IMAGES"/postgres-*.tar # older entrypoints
  local w r base f
  w=$(mktemp -d)
  r=$w/root
  base=$(dirname "$bin")
  mkdir -p "$r/etc" "$r/tmp" "$r/var/run/postgresql" "$r/var/lib/postgresql" "$w/src"
  chmod 1777 "$r/tmp"
  # initdb runs postgres through popen, hence /bin/sh (dash, with /bin/sh's name).
  copy_with_libs "$r" "$bin/postgres" "$bin/initdb" /bin/sh
  # Extensions and conversions initdb loads (plpgsql, dict_snowball, ...); not the JIT,
  # which links LLVM (hundreds of MB) and is optional.
  for f in "$base"/lib/*.so; do
    case $(basename "$f") in llvmjit*) continue ;; esac
    copy_with_libs "$r" "$f"
  done
  mkdir -p "$r/usr/share/postgresql"
  cp -a "/usr/share/postgresql/$(basename "$base")" "$r/usr/share/postgresql/"
  cp -a /usr/share/zoneinfo "$r/usr/share/"
  printf 'root:x:0:0::/root:/bin/false\npostgres:x:999:999::/var/lib/postgresql:/bin/false\n' >"$r/etc/passwd"
  printf 'root:x:0:\npostgres:x:999:\n' >"$r/etc/group"
  postgres_entrypoint >"$w/src/main.go"
  printf 'module entrypoint\n\ngo 1.22\n' >"$w/src/go.mod"
  (cd "$w/src" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -ldflags='-s -w' -o "$r$bin/docker-entrypoint" .)
  mkimage "$r" "$ref" "$tar" "$bin/docker-entrypoint"
  rm -rf "$w"
  say "PostgreSQL image $ref: $(du -h "$tar" | cut -f1)"
}

# ---- running the daemons -------------------------------------------------------------------
start() { # name command... : the daemon itself is $! (no shell in between), for down's kill
  local n=$1
  shift
  # A session of its own: a Ctrl-C meant for the tests must not kill containerd before
  # down has stopped the containers through it (their shims would outlive it).
  nohup setsid "$@" >"$LOGS/$n.log" 2>&1 &
  echo $! >"$PIDS/$n.pid"
}

waitfor() { # what seconds command...
  local what=$1 limit=$2 s
  shift 2
  s=$(date +%s)
  until "$@" >/dev/null 2>&1; do
    [ $(($(date +%s) - s)) -lt "$limit" ] || {
      echo "k8s-test-cluster: timed out waiting for $what; logs in $LOGS" >&2
      return 1
    }
    sleep 0.2
  done
  say "$what"
}

running() { [ -f "$PIDS/kube-apiserver.pid" ] && kill -0 "$(cat "$PIDS/kube-apiserver.pid")" 2>/dev/null; }

# api PATH [CURL-ARGS...]: a request to the API as the tests' admin; fails on an error status.
# The API answers curl with indented JSON: the patterns read below allow either form.
api() {
  local p=$1
  shift
  curl -sf --max-time 10 --cacert "$PKI/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN" "$@" "https://127.0.0.1:$API_PORT$p"
}

# Ready and untainted: the scheduler places no pod while the not-ready taint, which goes
# a moment after Ready, is on. The API's pretty JSON has a condition's status on the line
# after its type.
node_ready() {
  local n
  n=$(api "/api/v1/nodes/$NODE_NAME?pretty=true") || return 1
  grep -A1 '"type": "Ready"' <<<"$n" | grep -q '"status": "True"' && ! grep -q '"taints"' <<<"$n"
}

no_pods() { api '/api/v1/pods?limit=1' | grep -q '"items": *\[\]'; }

kubeconfig() { # token
  cat <<K
apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: $PKI/ca.crt}}]
users: [{name: user, user: {token: $1}}]
contexts: [{name: test, context: {cluster: test, user: user}}]
current-context: test
K
}

pki() {
  [ -f "$PKI/ca.crt" ] && return
  mkdir -p "$PKI"
  (
    cd "$PKI"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 30 -subj /CN=clouddb-test-ca 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj /CN=kube-apiserver 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' >server.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out apiserver.crt -days 30 -extfile server.ext 2>/dev/null
    # The apiserver's client certificate for the kubelet (logs, exec, port-forward).
    openssl req -newkey rsa:2048 -nodes -keyout kubelet-client.key -out kubelet-client.csr -subj "/O=system:masters/CN=apiserver-kubelet-client" 2>/dev/null
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    openssl x509 -req -in kubelet-client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out kubelet-client.crt -days 30 -extfile client.ext 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    # Static tokens: the tests' admin, the controllers, the node.
    printf '%s\n' "$ADMIN_TOKEN,admin,1,\"system:masters\"" \
      'clouddb-test-controllers,system:kube-controller-manager,2,"system:masters"' \
      "clouddb-test-node,system:node:$NODE_NAME,3,\"system:nodes,system:masters\"" >tokens.csv
  )
  kubeconfig "$ADMIN_TOKEN" >"$STATE/admin.kubeconfig"
  kubeconfig clouddb-test-controllers >"$STATE/controllers.kubeconfig"
  kubeconfig clouddb-test-node >"$STATE/node.kubeconfig"
}

up() {
  [ "$(id -u)" = 0 ] || die "must run as root (the kubelet, containerd and kube-proxy change the host)"
  if running; then
    say "already up"
    print_env
    return
  fi
  ensure_packages
  build
  build_images
  say "packages, binaries and images ready"
  mkdir -p "$PIDS" "$LOGS"
  pki

  start etcd nice etcd --name test --data-dir "$STATE/etcd" --unsafe-no-fsync \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 10))" --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 10))" \
    --initial-cluster "test=http://127.0.0.1:$((ETCD_PORT + 10))" --listen-metrics-urls "http://127.0.0.1:$((ETCD_PORT + 20))"
  waitfor "etcd healthy" 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health"
  start kube-apiserver nice "$BIN/kube-apiserver" --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$API_PORT" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" --client-ca-file="$PKI/ca.crt" \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc --token-auth-file="$PKI/tokens.csv" \
    --authorization-mode=Node,RBAC --anonymous-auth=false \
    --kubelet-client-certificate="$PKI/kubelet-client.crt" --kubelet-client-key="$PKI/kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP --service-cluster-ip-range="$SERVICE_CIDR" \
    --allow-privileged=true --enable-priority-and-fairness=false --profiling=false
  waitfor "kube-apiserver ready" 60 curl -sf --cacert "$PKI/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN" "https://127.0.0.1:$API_PORT/readyz"
  # --enable-hostpath-provisioner: dynamic PersistentVolumes as host directories (a test-only,
  # single-node provisioner that ships in the controller-manager), deleted with their claim.
  start kube-controller-manager nice "$BIN/kube-controller-manager" --kubeconfig="$STATE/controllers.kubeconfig" \
    --authentication-kubeconfig="$STATE/controllers.kubeconfig" --authorization-kubeconfig="$STATE/controllers.kubeconfig" \
    --leader-elect=false --bind-address=127.0.0.1 --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    --use-service-account-credentials=true --enable-hostpath-provisioner=true --flex-volume-plugin-dir="$STATE/flexvolume" \
    --controllers='*,-csrsigning,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-route'
  start kube-scheduler nice "$BIN/kube-scheduler" --kubeconfig="$STATE/controllers.kubeconfig" \
    --authentication-kubeconfig="$STATE/controllers.kubeconfig" --authorization-kubeconfig="$STATE/controllers.kubeconfig" \
    --leader-elect=false --bind-address=127.0.0.1
  waitfor "controller-manager working (default service account)" 60 api /api/v1/namespaces/default/serviceaccounts/default

  # The node: containerd + runc + a CNI bridge, the kubelet, kube-proxy.
  sysctl -n vm.overcommit_memory kernel.panic kernel.panic_on_oops net.ipv4.ip_forward >"$STATE/sysctl.saved"
  ip addr show dev lo | grep -q " $NODE_IP/" || ip addr add "$NODE_IP/32" dev lo
  mkdir -p "$CTRD/cni"
  cat >"$CTRD/config.toml" <<T
version = 2
root = "$CTRD/root"
state = "$CTRD/state"
[grpc]
  address = "$CTRD/containerd.sock"
[ttrpc]
  address = "$CTRD/containerd.sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  # Some VMs drop CAP_SYS_RESOURCE even for root: a negative oom_score_adj (the sandbox's
  # -998) then fails every sandbox in runc ("can't get final child's PID from pipe").
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "$CTRD/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$CTRD/cni"
T
  cat >"$CTRD/cni/10-clouddb.conflist" <<T
{"cniVersion": "1.0.0", "name": "clouddb-test", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_SUBNET"}]], "dataDir": "$CTRD/ipam"}},
  {"type": "portmap", "capabilities": {"portMappings": true}, "snat": true},
  {"type": "loopback"}]}
T
  start containerd nice containerd --config "$CTRD/config.toml"
  waitfor "containerd up" 30 ctr -a "$CTRD/containerd.sock" version
  ctr -a "$CTRD/containerd.sock" -n k8s.io images import "$IMAGES/pause.tar" >/dev/null
  ctr -a "$CTRD/containerd.sock" -n k8s.io images import "$IMAGES/redis-$(redis_image | sed 's/.*://').tar" >/dev/null
  local pg
  pg=$(postgres_tar) || true
  [ -z "$pg" ] || ctr -a "$CTRD/containerd.sock" -n k8s.io images import "$pg" >/dev/null
  say "images imported"
  local kl=$STATE/kubelet
  mkdir -p "$kl"
  cat >"$kl/config.yaml" <<Y
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication: {anonymous: {enabled: false}, webhook: {enabled: false}, x509: {clientCAFile: $PKI/ca.crt}}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$CTRD/containerd.sock
failSwapOn: false
resolvConf: /etc/resolv.conf
podLogsDir: $kl/pod-logs
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
nodeStatusUpdateFrequency: 5s
Y
  start kubelet nice "$BIN/kubelet" --config="$kl/config.yaml" --kubeconfig="$STATE/node.kubeconfig" --root-dir="$kl/root" \
    --cert-dir="$kl/pki" --volume-plugin-dir="$kl/volume-plugins" --hostname-override="$NODE_NAME" --node-ip="$NODE_IP"
  cat >"$STATE/kube-proxy.yaml" <<Y
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $STATE/controllers.kubeconfig}
hostnameOverride: $NODE_NAME
mode: iptables
clusterCIDR: $POD_SUBNET
bindAddress: 127.0.0.1
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
nodePortAddresses: ["$NODE_IP/32"]
Y
  start kube-proxy nice "$BIN/kube-proxy" --config="$STATE/kube-proxy.yaml"
  # The tests' StorageClass: the hostPath provisioner, default so a claim without a class gets it.
  api /apis/storage.k8s.io/v1/storageclasses -X POST -H 'Content-Type: application/yaml' --data-binary @- >/dev/null <<Y
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: clouddb-hostpath
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: kubernetes.io/host-path
reclaimPolicy: Delete
volumeBindingMode: Immediate
Y
  waitfor "node $NODE_NAME Ready" 90 node_ready
  print_env >"$STATE/env"
  say "cluster up: . $STATE/env"
  print_env
}

stop() { # name: TERM, then KILL after 15 s
  local f=$PIDS/$1.pid p i
  [ -f "$f" ] || return 0
  p=$(cat "$f")
  if kill -0 "$p" 2>/dev/null; then
    kill "$p"
    for i in $(seq 75); do
      kill -0 "$p" 2>/dev/null || break
      sleep 0.2
    done
    kill -0 "$p" 2>/dev/null && kill -9 "$p"
  fi
  rm -f "$f"
}

down() {
  # Best effort to the end: a step that finds nothing to undo must not stop the others.
  set +e +o pipefail
  if ! [ -d "$STATE" ]; then
    say "not up"
    return
  fi
  # While the kubelet still runs, let it tear the pods down properly (CNI DEL, unmounts):
  # the workloads first, so that no controller makes their pods again.
  if [ -f "$PIDS/kubelet.pid" ] && api /readyz --max-time 2 >/dev/null 2>&1; then
    local ns r
    for ns in $(api /api/v1/namespaces | grep -o '"name": *"[^"]*"' | cut -d'"' -f4); do
      for r in statefulsets deployments replicasets daemonsets; do
        api "/apis/apps/v1/namespaces/$ns/$r?propagationPolicy=Background" -X DELETE >/dev/null 2>&1
      done
      api "/apis/batch/v1/namespaces/$ns/jobs?propagationPolicy=Background" -X DELETE >/dev/null 2>&1
      api "/api/v1/namespaces/$ns/pods?gracePeriodSeconds=1" -X DELETE >/dev/null 2>&1
    done
    waitfor "pods deleted" 60 no_pods
  fi
  stop kube-proxy
  [ -x "$BIN/kube-proxy" ] && "$BIN/kube-proxy" --cleanup --proxy-mode=iptables >/dev/null 2>&1 || true
  stop kube-controller-manager
  stop kube-scheduler
  stop kubelet
  if [ -S "$CTRD/containerd.sock" ]; then
    local ctr="ctr -a $CTRD/containerd.sock -n k8s.io" c
    for c in $($ctr tasks ls -q 2>/dev/null); do $ctr tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true; done
    sleep 0.5
    for c in $($ctr containers ls -q 2>/dev/null); do
      $ctr tasks delete "$c" >/dev/null 2>&1 || true
      $ctr containers rm "$c" >/dev/null 2>&1 || true
    done
  fi
  stop containerd
  # Shims (and their containers) that outlived containerd: a pod's processes must not
  # survive the cluster. They name this cluster's containerd socket.
  local shim kid
  for shim in $(pgrep -f -- "containerd-shim.* -address $CTRD/containerd.sock"); do
    for kid in $(pgrep -P "$shim"); do kill -9 "$kid"; done
    kill -9 "$shim"
  done
  stop kube-apiserver
  stop etcd
  # Mounts the kubelet and containerd left: volumes, overlay root filesystems, shm, netns.
  local m
  for m in $(awk '{print $2}' /proc/mounts | grep -E "^$STATE/|^/run/netns/cni-" | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m" || true
  done
  rm -f /run/netns/cni-* 2>/dev/null || true
  ip link del "$BRIDGE" 2>/dev/null || true
  ip addr del "$NODE_IP/32" dev lo 2>/dev/null || true
  # iptables rules and chains of the kubelet, kube-proxy and the CNI portmap plugin.
  local ipt t r ch
  for ipt in iptables ip6tables; do
    for t in filter nat mangle; do
      $ipt -t $t -S 2>/dev/null | grep -E '^-A (INPUT|OUTPUT|FORWARD|PREROUTING|POSTROUTING) .*-j (KUBE|CNI)-' | sed 's/^-A/-D/' |
        while read -r r; do eval "$ipt -t $t $r" || true; done
      for ch in $($ipt -t $t -S 2>/dev/null | awk '/^-N (KUBE|CNI)-/{print $2}'); do $ipt -t $t -F "$ch" || true; done
      for ch in $($ipt -t $t -S 2>/dev/null | awk '/^-N (KUBE|CNI)-/{print $2}'); do $ipt -t $t -X "$ch" || true; done
    done
  done
  # The pods' cgroups, which live outside this session's own.
  local h
  for h in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
    [ -d "${h}kubepods" ] && find "${h}kubepods" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  if [ -f "$STATE/sysctl.saved" ]; then
    local v
    mapfile -t v <"$STATE/sysctl.saved"
    sysctl -q -w vm.overcommit_memory="${v[0]}" kernel.panic="${v[1]}" kernel.panic_on_oops="${v[2]}" net.ipv4.ip_forward="${v[3]}" || true
  fi
  # Fixed paths the kubelet, libcni, the shims and the hostPath provisioner use whatever the flags.
  rm -rf /var/lib/kubelet/device-plugins /var/lib/kubelet/plugins_registry /var/lib/kubelet/plugins \
    /var/lib/kubelet/pod-resources /var/lib/cni/results "$HOSTPATH_PV" 2>/dev/null || true
  find /var/log/containers -maxdepth 1 -type l -delete 2>/dev/null || true
  rmdir /var/lib/kubelet /var/lib/cni /var/log/containers /run/containerd/s /run/containerd /run/netns 2>/dev/null || true
  rm -rf "$STATE"
  say "cluster down"
}

run() {
  [ "${1:-}" = -- ] && shift
  [ $# -gt 0 ] || die "usage: $0 run -- COMMAND..."
  exec 9>"${TMPDIR:-/tmp}/clouddb-k8s-test.lock"
  flock 9
  trap '"$0" down' EXIT
  trap 'exit 130' INT TERM
  local env
  env=$("$0" up)
  eval "$env"
  "$@"
}

case ${1:-} in
up) up ;;
build)
  shift
  build "$@"
  ;;
build-bg) build_bg ;;
run)
  shift
  run "$@"
  ;;
down) down ;;
env)
  running || die "not up (scripts/k8s-test-cluster.sh up)"
  print_env
  ;;
*) die "usage: $0 up|down|env|build|build-bg|run -- COMMAND..." ;;
esac
