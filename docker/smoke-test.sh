#!/usr/bin/env bash
# docker/smoke-test.sh [IMAGE] -- build IMAGE (docker/build.sh), start it, and check it:
#   1. it becomes healthy (bounded polling of GET /healthz)     5. healthcheck: `podman healthcheck
#   2. POST /v1/payments/confirm -> 200                            run` (docker: State.Health.Status)
#   3. the same with the same Idempotency-Key -> byte-identical  6. non-root, no curl in the image
#   4. PUT /__admin/profile {"name":"slow"} -> 200, GET shows it 7. SIGTERM -> exit code 0 within 2 s
# Any failed check exits non-zero (and prints the container's log). The container is removed
# by name at exit. SKIP_BUILD=1 tests an existing IMAGE.
set -euo pipefail
IMAGE=${1:-${IMAGE:-fakegate:latest}}
. "$(dirname "$0")/lib.sh"
cd "$REPO"

[ "${SKIP_BUILD:-0}" = 1 ] || "$REPO/docker/build.sh" "$IMAGE"
prepare_engine

NAME=fakegate-smoke-$$
tmp=$(mktemp -d)
ctr() { if [ "$ENGINE" = docker ]; then docker "$@"; else podman --log-level fatal "$@"; fi; }
cleanup() { ctr rm -f "$NAME" >/dev/null 2>&1 || true; }
trap 'cleanup; rm -rf "$tmp"' EXIT
fail() {
  log "FAIL: $*"
  log "container log:"; ctr logs "$NAME" >&2 || true
  exit 1
}
pass() { log "ok: $*"; }

# A TCP port no socket on this host uses (any state, from /proc/net/tcp*: no ss/netstat needed),
# below the ephemeral range so outgoing connections cannot take it meanwhile.
free_port() {
  local p i lo hi
  read -r lo hi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || lo=32768
  [ "$lo" -gt 21000 ] || lo=61000
  for i in $(seq 50); do
    p=$((20000 + RANDOM % (lo - 20000)))
    # local_address is the 2nd column, "ADDR:PORT" with the port in 4 hex digits
    grep -qs "^ *[0-9]*: [0-9A-F]*:$(printf '%04X' "$p") " /proc/net/tcp /proc/net/tcp6 || { echo "$p"; return 0; }
  done
  die "no free port found"
}

# Start the container; docker publishes 8080 on a free loopback port, podman shares the host
# network (no bridge, no firewall rules) and is told its port through FAKEGATE_PORT.
for attempt in 1 2 3; do
  if [ "$ENGINE" = docker ]; then
    t_run=$(now)
    docker run -d --name "$NAME" -p 127.0.0.1::8080 "$IMAGE" >/dev/null
    PORT=$(docker port "$NAME" 8080/tcp | head -n 1 | sed 's/.*://')
  else
    PORT=$(free_port)
    t_run=$(now)
    podman --log-level fatal run -d --name "$NAME" --network host -e FAKEGATE_PORT="$PORT" "$IMAGE" >/dev/null
  fi
  BASE=http://127.0.0.1:$PORT
  # 1. healthy: poll /healthz every 50 ms for at most 30 s; once a second, stop early if the
  #    container died (inspect is slow: not on every poll, or it would dominate the measurement)
  healthy=0
  for i in $(seq 600); do
    if curl -fsS -o /dev/null --max-time 1 "$BASE/healthz" 2>/dev/null; then healthy=1; break; fi
    if [ $((i % 20)) = 0 ] && [ "$(ctr inspect --format '{{.State.Running}}' "$NAME")" != true ]; then break; fi
    sleep 0.05
  done
  [ "$healthy" = 1 ] && break
  # Lost a race for the port (exit 1, "port in use")? Try another one.
  if [ "$ENGINE" = podman ] && [ "$(ctr inspect --format '{{.State.Running}}' "$NAME")" != true ] &&
     ctr logs "$NAME" 2>&1 | grep -qi 'in use'; then
    log "port $PORT taken ($(ctr logs "$NAME" 2>&1 | tail -n 1)), retrying"; cleanup; continue
  fi
  fail "not healthy within 30 s on $BASE"
done
[ "$healthy" = 1 ] || fail "could not start on a free port"
t_healthy=$(now)
pass "healthy on $BASE $(elapsed "$t_run" "$t_healthy") s after run"

# 2. confirm -> 200
auth="Authorization: Basic $(printf 'test_sk_x:' | base64)"
body='{"paymentKey":"pk_1","orderId":"order-0001","amount":1000}'
confirm() {
  curl -sS --max-time 10 -o "$1" -w '%{http_code}' -H "$auth" -H 'Content-Type: application/json' \
    -H 'Idempotency-Key: smoke-0001' -d "$body" "$BASE/v1/payments/confirm"
}
code=$(confirm "$tmp/first") || fail "confirm: curl failed"
[ "$code" = 200 ] || fail "confirm: status $code, body $(cat "$tmp/first")"
grep -q '"status": *"DONE"' "$tmp/first" || fail "confirm: no status DONE in $(cat "$tmp/first")"
pass "confirm -> 200 DONE"

# 3. the same request, the same Idempotency-Key -> the same bytes
code=$(confirm "$tmp/replay") || fail "replay: curl failed"
[ "$code" = 200 ] || fail "replay: status $code, body $(cat "$tmp/replay")"
cmp -s "$tmp/first" "$tmp/replay" || fail "replay differs from the first answer"
pass "replay -> 200, byte-identical ($(wc -c <"$tmp/first") bytes)"

# 4. profile switch through the admin API
code=$(curl -sS --max-time 10 -o "$tmp/put" -w '%{http_code}' -X PUT -H 'Content-Type: application/json' \
  -d '{"name":"slow"}' "$BASE/__admin/profile") || fail "PUT /__admin/profile: curl failed"
[ "$code" = 200 ] || fail "PUT /__admin/profile: status $code, body $(cat "$tmp/put")"
curl -fsS --max-time 10 -o "$tmp/get" "$BASE/__admin/profile" || fail "GET /__admin/profile failed"
grep -q '"name": *"slow"' "$tmp/get" || fail "GET /__admin/profile does not show slow: $(head -c 300 "$tmp/get")"
pass "PUT /__admin/profile slow -> 200, GET shows slow"

# 5. the image's own HEALTHCHECK (fakegate probe)
if [ "$ENGINE" = podman ]; then
  out=$(podman --log-level fatal healthcheck run "$NAME" 2>&1) || fail "podman healthcheck run: $out"
  st=$(podman inspect --format '{{.State.Health.Status}}' "$NAME" 2>/dev/null || echo "?")
  [ "$st" = healthy ] || fail "health status after healthcheck run: $st"
else
  for i in $(seq 60); do
    st=$(docker inspect --format '{{if .State.Health}}{{.State.Health.Status}}{{end}}' "$NAME")
    [ "$st" = starting ] || break; sleep 0.5
  done
  [ "$st" = healthy ] || fail "docker health status: '${st:-no HEALTHCHECK}'"
fi
pass "HEALTHCHECK -> healthy"

# 6. the image: not root, no curl
ctr exec "$NAME" sh -c 'test "$(id -u)" != 0 && ! command -v curl >/dev/null' ||
  fail "the container runs as root or ships curl"
pass "runs as uid $(ctr exec "$NAME" id -u), no curl in the image"

# 7. SIGTERM -> exit 0 within 2 s (stop falls back to SIGKILL after 5 s: exit 137)
t_stop=$(now)
ctr stop -t 5 "$NAME" >/dev/null || fail "stop failed"
t_stopped=$(now)
rc=$(ctr inspect --format '{{.State.ExitCode}}' "$NAME")
finished=$(ctr inspect --format '{{.State.FinishedAt}}' "$NAME")
t_fin=$(date -d "${finished% [A-Z]*}" +%s.%N 2>/dev/null || echo "$t_stopped")  # podman: "... +0000 UTC"
[ "$rc" = 0 ] || fail "exit code $rc after SIGTERM (want 0)"
took=$(elapsed "$t_stop" "$t_fin")
awk -v t="$took" 'BEGIN { exit !(t < 2.0) }' || fail "took $took s to exit after SIGTERM (want < 2 s)"
pass "SIGTERM -> exit 0 in $took s (stop returned after $(elapsed "$t_stop" "$t_stopped") s)"

size=$(ctr image inspect --format '{{.Size}}' "$IMAGE")
log "PASS: $IMAGE ($ENGINE), $(awk -v s="$size" 'BEGIN { printf "%.1f MB", s / 1e6 }'), healthy $(elapsed "$t_run" "$t_healthy") s after run"
