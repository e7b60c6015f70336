#!/usr/bin/env bash
# docker/fresh-test.sh -- the README's two commands on a fresh machine, for real:
#   1. a Debian root file system (bookworm, or DEBIAN=trixie) with nothing but make added (mmdebstrap --variant=minbase
#      --include=make, from this machine's own apt sources; the tarball is cached in
#      $FRESH_STATE/base.tar, default build/fresh, and unpacked anew on every run);
#   2. a clean `git archive` of HEAD in /src/fakegate (uncommitted changes are not in it);
#   3. in it, as root, in a private mount and PID namespace (chroot; the host's network):
#      `make run` in the background: its ready line within a bounded wait, then GET /healthz
#      -> 200 and one confirm -> 200 DONE; SIGTERM; then `make test`, which must pass.
# Both commands install their packages themselves (that is what is tested). Prints each step with
# its time; any failed step exits 1 (the root file system is kept for a look, its path printed).
# Needs root (mmdebstrap --mode=root, chroot) and port 8080 free on this host (`make run` listens
# there). Environment: DEBIAN=bookworm (default) or trixie, the release; FRESH_STATE=DIR
# (default build/fresh, build/fresh-trixie for trixie), FRESH_KEEP=1 keeps the root file system
# after a pass.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$REPO"

REL=${DEBIAN:-bookworm} # the Debian release: bookworm (libmicrohttpd 0.9.75) or trixie (1.0.1)
case "$REL" in bookworm | trixie) ;; *) die "DEBIAN must be bookworm or trixie (got '$REL')" ;; esac
if [ "$REL" = bookworm ]; then STATE=${FRESH_STATE:-$REPO/build/fresh}
else STATE=${FRESH_STATE:-$REPO/build/fresh-$REL}; fi
ROOT=$STATE/root
READY_S=900   # `make run` on a fresh machine: apt-get update and install, then the build
TEST_S=1500   # `make test`: its packages, the test build and the suites (~3 min here)

[ "$(id -u)" -eq 0 ] || die "needs root (mmdebstrap --mode=root, chroot); run it as root (sudo)"
git -C "$REPO" rev-parse --verify -q HEAD >/dev/null || die "not a git checkout: git archive needs HEAD"
[ -z "$(git -C "$REPO" status --porcelain --untracked-files=no)" ] ||
  log "note: uncommitted changes are not tested (git archive of HEAD $(git -C "$REPO" rev-parse --short HEAD))"

# `make run` binds 127.0.0.1:8080 of this host (no network namespace: apt needs the network).
port_in_use() {
  grep -qs "^ *[0-9]*: [0-9A-F]*:$(printf '%04X' "$1") " /proc/net/tcp /proc/net/tcp6
}
port_in_use 8080 && die "port 8080 is in use on this host; \`make run\` listens there"

if ! command -v mmdebstrap >/dev/null 2>&1; then
  log "installing mmdebstrap"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
fi

t_all=$(now)
mkdir -p "$STATE"
# 1. the base tarball, once; a new root file system from it every run
if [ ! -s "$STATE/base.tar" ]; then
  srcs=$(apt_sources)
  mirror=$(awk '$2 !~ /-security$|\/updates$/ { print $1; exit }' <<<"$srcs")
  security=$(awk '$2 ~ /-security$|\/updates$/ { print $1; exit }' <<<"$srcs")
  [ -n "$mirror" ] || die "no Debian mirror found in /etc/apt/sources.list{,.d/*} (URIs: lines)"
  lists=("deb $mirror $REL main" "deb $mirror $REL-updates main")
  [ -n "$security" ] && lists+=("deb $security $REL-security main")
  include="make"
  case "$mirror $security" in *https:*) include=make,ca-certificates;; esac
  log "base: mmdebstrap minbase $REL + $include from $mirror${security:+ and $security}"
  t0=$(now)
  mmdebstrap --quiet --variant=minbase --mode=root --format=tar --include="$include" \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    "$REL" "$STATE/base.tmp.tar" "${lists[@]}" >"$STATE/mmdebstrap.log" 2>&1 ||
    { cat "$STATE/mmdebstrap.log" >&2; die "mmdebstrap failed"; }
  mv "$STATE/base.tmp.tar" "$STATE/base.tar"
  log "base made in $(elapsed "$t0" "$(now)") s ($(du -h "$STATE/base.tar" | cut -f1)): cold run"
else
  log "base: cached $STATE/base.tar ($(date -r "$STATE/base.tar" '+%F %T')): warm run"
fi
t0=$(now)
rm -rf "$ROOT"
mkdir -p "$ROOT"
tar --numeric-owner -C "$ROOT" -xf "$STATE/base.tar"
rm -f "$ROOT/etc/resolv.conf"
cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf" # the host's resolver, as a container runtime does
# The certificate authorities this host's administrator added (an egress proxy's, say), as a
# machine on this network would have them too: for the system store, should ca-certificates be
# installed inside, and for Node's own store (`npm ci` of the live page's test), which does not
# read the system's.
extra_ca=""
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
  mkdir -p "$ROOT/usr/local/share/ca-certificates"
  cp -L /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/"
  cat /usr/local/share/ca-certificates/*.crt >"$ROOT/etc/fresh-extra-ca.pem"
  extra_ca=/etc/fresh-extra-ca.pem
fi
chroot "$ROOT" sh -c '! command -v cc && ! command -v pkg-config' >/dev/null ||
  die "the base root file system already has a compiler or pkg-config: not a fresh machine"

# 2. the source, as a release would have it
mkdir -p "$ROOT/src/fakegate"
git -C "$REPO" archive --format=tar HEAD | tar -C "$ROOT/src/fakegate" -x
log "root file system ready in $(elapsed "$t0" "$(now)") s: $ROOT, HEAD $(git -C "$REPO" rev-parse --short HEAD)"

# 3. what runs inside: the README's commands, exactly, in its directory
cat >"$ROOT/fresh-steps.sh" <<EOF
#!/bin/bash
set -u
cd /src/fakegate
now() { date +%s.%N; }
el() { awk -v a="\$1" -v b="\$(now)" 'BEGIN { printf "%.1f", b - a }'; }
say() { printf 'fresh-test (inside): %s\n' "\$*"; }

# One HTTP/1.1 exchange on 127.0.0.1:8080 over bash's /dev/tcp (there is no curl here):
# http METHOD PATH [BODY [HEADER...]] -> the whole response on stdout.
http() {
  local m=\$1 p=\$2 b=\${3-} h
  exec 3<>/dev/tcp/127.0.0.1/8080 || return 1
  { printf '%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n' "\$m" "\$p"
    shift 3 2>/dev/null || shift \$#
    for h in "\$@"; do printf '%s\r\n' "\$h"; done
    [ -n "\$b" ] && printf 'Content-Type: application/json\r\nContent-Length: %d\r\n' "\${#b}"
    printf '\r\n%s' "\$b"; } >&3
  timeout 10 cat <&3
  exec 3>&-
}

t=\$(now)
say "\$ make run   (in the background)"
setsid make run >/tmp/make-run.log 2>&1 &
run=\$!
ready=0
for _ in \$(seq $((READY_S * 5))); do
  grep -q '^fakegate listening on http://127.0.0.1:8080 ' /tmp/make-run.log && { ready=1; break; }
  kill -0 \$run 2>/dev/null || break
  sleep 0.2   # polling the log for the ready line, bounded
done
if [ \$ready != 1 ]; then
  say "FAIL: no ready line from make run within $READY_S s; its output:"; cat /tmp/make-run.log
  kill -TERM -- -\$run 2>/dev/null; exit 1
fi
grep '^install-deps: \(missing\|installed\)' /tmp/make-run.log
say "ok: make run printed its ready line after \$(el "\$t") s: \$(grep '^fakegate listening' /tmp/make-run.log)"

out=\$(http GET /healthz) || { say "FAIL: GET /healthz: no connection"; exit 1; }
case "\$out" in "HTTP/1.1 200 "*) ;; *) say "FAIL: GET /healthz: \$out"; exit 1;; esac
say "ok: GET /healthz -> 200"
auth="Authorization: Basic \$(printf 'test_sk_fresh:' | base64)"
body='{"paymentKey":"pk_fresh_1","orderId":"order-fresh-1","amount":15000}'
out=\$(http POST /v1/payments/confirm "\$body" "\$auth" "Idempotency-Key: fresh-1") ||
  { say "FAIL: confirm: no connection"; exit 1; }
case "\$out" in "HTTP/1.1 200 "*'"status":"DONE"'*) ;; *) say "FAIL: confirm: \$out"; exit 1;; esac
say "ok: POST /v1/payments/confirm -> 200 DONE"
kill -TERM -- -\$run
wait \$run
for _ in \$(seq 50); do
  (exec 3<>/dev/tcp/127.0.0.1/8080) 2>/dev/null || break
  sleep 0.1   # polling until the port is closed, bounded (SIGTERM: exit within 2 s)
done
(exec 3<>/dev/tcp/127.0.0.1/8080) 2>/dev/null && { say "FAIL: still listening after SIGTERM"; exit 1; }
say "ok: SIGTERM stopped it"

t=\$(now)
say "\$ make test"
timeout $TEST_S make test; rc=\$?
[ \$rc = 0 ] || { say "FAIL: make test exited \$rc after \$(el "\$t") s"; exit 1; }
say "ok: make test passed in \$(el "\$t") s"
EOF
chmod +x "$ROOT/fresh-steps.sh"

# A private mount and PID namespace: the mounts and every process started inside end with it.
t0=$(now)
set +e
unshare --mount --pid --fork --propagation private \
  env -i ROOT="$ROOT" EXTRA_CA="$extra_ca" PATH=/usr/sbin:/usr/bin:/sbin:/bin bash -c '
  set -e
  mount -t proc proc "$ROOT/proc"
  mount -t sysfs sysfs "$ROOT/sys"
  mount --rbind /dev "$ROOT/dev"
  mount -t tmpfs -o mode=1777 tmpfs "$ROOT/tmp"
  exec chroot "$ROOT" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    ${EXTRA_CA:+NODE_EXTRA_CA_CERTS=$EXTRA_CA} \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /fresh-steps.sh'
rc=$?
set -e
if [ "$rc" != 0 ]; then
  log "FAIL after $(elapsed "$t_all" "$(now)") s (inside: exit $rc); the root file system is kept in $ROOT"
  exit 1
fi
[ "${FRESH_KEEP:-0}" = 1 ] || rm -rf "$ROOT"
log "PASS: make run and make test on a fresh $REL in $(elapsed "$t0" "$(now)") s; total $(elapsed "$t_all" "$(now)") s"
