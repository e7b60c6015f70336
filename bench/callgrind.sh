#!/usr/bin/env bash
# bench/callgrind.sh -- instructions per confirm, counted by valgrind's callgrind: a figure that
# does not move with the machine's load, for judging a change to the request path.
#
#   bench/callgrind.sh [FAKEGATE_BINARY]     (default build/fakegate; `make callgrind` passes it)
#
# Starts the binary under `valgrind --tool=callgrind --separate-threads=yes` with the bench's
# zero profile ({"name":"bench-zero","routes":{}}, --quiet --seed 7, as bench/run.sh), waits for
# its port file, warms it up with CG_WARMUP unique confirms, zeroes the counters
# (callgrind_control --zero), sends exactly CG_N confirms, each with a fresh paymentKey, orderId
# and Idempotency-Key (bench/confirm.lua's unique_idem mode; curl --parallel, CG_PARALLEL
# keep-alive connections), dumps the counters (callgrind_control --dump), and then, on the same
# server, zeroes again, sends CG_N replays (one fixed body and key, answered from the record) and
# dumps again. Every answer must be 200, or it fails.
#
# It prints, for each phase, the user-space instructions (Ir) per request summed over the
# request threads (the libmicrohttpd workers: the threads whose dump shows the server's request
# handler), and beside it the other threads' Ir per request (the timer, webhook and main
# threads, idle here). Zeroing after the warm-up leaves out start-up and the first requests'
# one-time costs (tables allocated, code paged in); what remains is the steady cost of CG_N
# requests, divided by CG_N. Hash-table growth that falls inside the window is counted (it is
# part of the steady cost), so compare figures taken with the same CG_WARMUP and CG_N. Runs of
# one binary agree within about 1 % (confirm) and 2 % (replay). With the default warm-up the
# journal's ring (--journal-size, 10 000) is still filling in the window, so each confirm also
# pays its slot's first string buffers (4 reallocs, ~300 Ir); CG_WARMUP=10500 measures past it.
#
# Ir is not time. libmicrohttpd clears a connection's memory pool (10 KiB here, http.c's
# CONNECTION_POOL_BYTES) after each request with memset, whose `rep stosb` callgrind counts once
# per byte: about 15 000 of a confirm's Ir, for well under a microsecond of CPU. The figure
# judges changes to fakegate's own code; it does not compare fakegate with other servers.
#
# The same run then measures what three features cost a confirm and what a held confirm costs,
# each on a fresh server, beside the first (issue 25: their cost per confirm and per held
# request). CG_VARIANTS picks them (default all, in this order):
#   base      the figures above (line "confirm ..." and "replay ...");
#   receiver  --webhook-url at a loopback receiver (python3's http.server, HTTP/1.1, every POST
#             answered 200): each confirm's PAYMENT_STATUS_CHANGED event made, filed and
#             delivered. The count waits until the receiver has all of the window's deliveries,
#             so the delivery thread's whole share is in "other threads";
#   hanging   --webhook-url at a listener that accepts and never answers (scenario 7's): every
#             delivery stays pending, at most 64 attempts on the wire, the rest waiting;
#   tenants   the confirms' secret keys taken in turn over CG_TENANTS keys (default 1000; each
#             tenant made in the warm-up): the tenant lookup and CG_TENANTS ledgers' locality;
#   report1   --report-max-identities 1: no identity finds room in the report, so confirm minus
#             report1 is what the report's per-identity state costs a confirm;
#   held      a confirm held 20 ms by the profile (latency fixed 20 ms) before its answer: the
#             suspend, the timer and the resume ("other threads" has the timer thread's share).
#
# Environment: CG_N (requests per phase, default 2000), CG_WARMUP (default 500; the tenants
# variant warms up with at least CG_TENANTS), CG_PARALLEL (connections, default 8), CG_VARIANTS
# (names separated by spaces or commas), CG_KEEP=1 keeps the temp dir with the callgrind dumps
# (NAME.out.K-TT: dump K = 1 confirms, 2 replays; thread TT). Output: a line per variant,
# "NAME Ir/request: N (other threads: M)", NAME confirm for base, with "replay Ir/request: ..."
# after it. Exits non-zero when it could not measure. About 60 s for all six.
set -u -o pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
FG=${1:-$ROOT/build/fakegate}
N=${CG_N:-2000}
WARM=${CG_WARMUP:-500}
PAR=${CG_PARALLEL:-8}
TENANTS=${CG_TENANTS:-1000}
VARIANTS=$(printf '%s' "${CG_VARIANTS:-base receiver hanging tenants report1 held}" | tr ',' ' ')

say() { printf 'callgrind: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
for v in N WARM PAR TENANTS; do
    case "${!v}" in '' | *[!0-9]*) die "CG_$v must be a whole number, not '${!v}'" ;; esac
done
[ "$N" -gt 0 ] || die "CG_N must be at least 1"
[ "$TENANTS" -gt 1 ] || die "CG_TENANTS must be at least 2"
[ -x "$FG" ] || die "no fakegate binary at $FG (run make first)"
for t in valgrind callgrind_control curl awk; do
    command -v $t >/dev/null || die "$t is missing (apt-get install valgrind curl)"
done

T=$(mktemp -d /tmp/fakegate-callgrind.XXXXXX)
VG_PID=0
RX_PID=0
HANG_PID=0
stop_server() {
    if [ "$VG_PID" != 0 ] && kill -0 "$VG_PID" 2>/dev/null; then
        kill -TERM "$VG_PID" 2>/dev/null
        wait "$VG_PID" 2>/dev/null
    fi
    VG_PID=0
}
cleanup() {
    stop_server
    for pid in "$RX_PID" "$HANG_PID"; do
        if [ "$pid" != 0 ] && kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
        fi
    done
    if [ "${CG_KEEP:-0}" = 1 ]; then say "kept $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo '{"name":"bench-zero","routes":{}}' >"$T/zero.json"
echo '{"name":"bench-held","routes":{"confirm":{"latency":{"dist":"fixed","ms":20}}}}' >"$T/held.json"

# start_server NAME PROFILE [FLAG...]: fakegate under callgrind, its dumps $T/NAME.out.K-TT.
start_server() {
    local name=$1 profile=$2
    shift 2
    rm -f "$T/port"
    valgrind --tool=callgrind --separate-threads=yes --dump-instr=no --compress-strings=no \
        --callgrind-out-file="$T/$name.out" \
        "$FG" --port 0 --port-file "$T/port" --quiet --profile "$T/$profile.json" --seed 7 "$@" \
        >"$T/$name.fg.out" 2>"$T/$name.fg.err" &
    VG_PID=$!
    for _ in $(seq 600); do
        [ -s "$T/port" ] && break
        kill -0 "$VG_PID" 2>/dev/null || break
        sleep 0.05
    done
    [ -s "$T/port" ] || die "fakegate did not start under valgrind: $(tail -5 "$T/$name.fg.err")"
    URL="http://127.0.0.1:$(cat "$T/port")/v1/payments/confirm"
}

# A curl config of COUNT confirms: unique (fresh keys, prefix PREFIX) or replay (one body, one
# key); KEYS secret keys taken in turn (1: test_sk_bench; N: test_sk_bench_0000 ... N-1).
requests() { # MODE PREFIX COUNT [KEYS]
    awk -v mode="$1" -v pre="$2" -v n="$3" -v keys="${4:-1}" -v url="$URL" 'BEGIN {
        for (i = 1; i <= n; i++) {
            id = (mode == "replay") ? "replay_" pre : pre "_" i
            user = (keys == 1) ? "test_sk_bench" : sprintf("test_sk_bench_%04d", i % keys)
            printf "url = \"%s\"\noutput = \"/dev/null\"\nwrite-out = \"%%{http_code}\\n\"\n", url
            printf "user = \"%s:\"\nheader = \"Content-Type: application/json\"\n", user
            printf "header = \"Idempotency-Key: ik_%s\"\n", id
            printf "data = \"{\\\"paymentKey\\\":\\\"pk_%s\\\",\\\"orderId\\\":\\\"o_%s\\\",\\\"amount\\\":15000}\"\n", id, id
            if (i < n) print "next"
        }
    }' >"$T/$2.curl"
}
send() { # MODE PREFIX COUNT [KEYS]: send them, fail unless every answer is 200
    requests "$@"
    curl -s --no-progress-meter --parallel --parallel-max "$PAR" --parallel-immediate -K "$T/$2.curl" >"$T/$2.codes" ||
        die "curl failed ($2)"
    local ok
    ok=$(grep -c '^200$' "$T/$2.codes")
    [ "$ok" = "$3" ] || die "$2: $ok of $3 answers were 200 ($(sort "$T/$2.codes" | uniq -c | tr '\n' ' '))"
}
zero() { callgrind_control --zero "$VG_PID" >/dev/null 2>&1 || die "callgrind_control --zero failed"; }
dump() { callgrind_control --dump "$VG_PID" >/dev/null 2>&1 || die "callgrind_control --dump failed"; }
# Ir per request of dump number K of server NAME over COUNT requests: "REQUEST_THREADS OTHER_THREADS".
per_request() { # NAME K COUNT
    local f req=0 other=0 ir k
    k=$(printf '%d' "$2")
    for f in "$T/$1".out."$k"-*; do
        [ -e "$f" ] || die "no callgrind dump $k of $1 in $T"
        ir=$(awk '$1 == "summary:" || $1 == "totals:" {print $2; exit}' "$f")
        if grep -q 'on_request' "$f"; then req=$((req + ir)); else other=$((other + ir)); fi
    done
    awk -v r="$req" -v o="$other" -v n="$3" 'BEGIN {printf "%.0f %.0f\n", r / n, o / n}'
}

# The receiver for the "receiver" variant: python3's http.server on a free port, HTTP/1.1
# keep-alive, answering every POST 200 with an empty body and counting them into $T/rx.count.
start_receiver() {
    command -v python3 >/dev/null || die "python3 is missing (the receiver variant needs it)"
    python3 - "$T" <<'PY' &
import http.server, os, sys, threading
d = sys.argv[1]
n = 0
lock = threading.Lock()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        global n
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
        with lock:
            n += 1
            with open(d + "/rx.tmp", "w") as f:
                f.write(str(n))
            os.replace(d + "/rx.tmp", d + "/rx.count")
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
with open(d + "/rx.tmp", "w") as f:
    f.write(str(s.server_address[1]))
os.replace(d + "/rx.tmp", d + "/rx.port")
s.serve_forever()
PY
    RX_PID=$!
    for _ in $(seq 200); do
        [ -s "$T/rx.port" ] && break
        sleep 0.05
    done
    [ -s "$T/rx.port" ] || die "the receiver did not start"
}
# The receiver for the "hanging" variant (bench/run.sh's scenario 7's): a loopback listener
# that accepts every connection and never reads or answers, so every delivery stays pending.
start_hanging() {
    python3 - "$T" <<'PY' &
import os, socket, sys, threading
d = sys.argv[1]
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(1024)
with open(d + "/hang.tmp", "w") as f:
    f.write(str(s.getsockname()[1]))
os.replace(d + "/hang.tmp", d + "/hang.port")
held = []
while True:
    held.append(s.accept()[0])
PY
    HANG_PID=$!
    for _ in $(seq 200); do
        [ -s "$T/hang.port" ] && break
        sleep 0.05
    done
    [ -s "$T/hang.port" ] || die "the hanging receiver did not start"
}
rx_count() { cat "$T/rx.count" 2>/dev/null || echo 0; }
# Wait (up to 120 s) until the receiver has counted WANT deliveries.
rx_wait() { # WANT
    for _ in $(seq 2400); do
        [ "$(rx_count)" -ge "$1" ] && return 0
        sleep 0.05
    done
    die "the receiver counted $(rx_count) deliveries, not $1"
}

# One variant: a server NAME started with PROFILE and FLAGS, warmed up with WARM confirms over
# KEYS secret keys, then N counted. Prints "NAME Ir/request: REQ (other threads: OTHER)".
measure() { # NAME PROFILE KEYS [FLAG...]
    local name=$1 profile=$2 keys=$3 c_req c_other per=0 base=0 warm=$WARM
    shift 3
    [ "$keys" -gt "$warm" ] && warm=$keys # every tenant made before the count
    start_server "$name" "$profile" "$@"
    send unique warm "$warm" "$keys"
    if [ "$name" = receiver ]; then
        # Deliveries per confirm, from the warm-up: every one of them delivered before the count.
        for _ in $(seq 2400); do
            base=$(rx_count)
            sleep 0.5
            [ "$(rx_count)" = "$base" ] && [ "$base" -gt 0 ] && break
        done
        per=$((base / WARM))
        [ "$per" -ge 1 ] && [ $((per * WARM)) = "$base" ] ||
            die "the warm-up's $WARM confirms made $base deliveries, not a whole number per confirm"
    fi
    zero
    send unique "run$$" "$N" "$keys"
    [ "$name" = receiver ] && rx_wait $((base + per * N))
    dump
    read -r c_req c_other < <(per_request "$name" 1 "$N")
    printf '%s Ir/request: %s (other threads: %s)\n' "$name" "$c_req" "$c_other"
    if [ "$name" = confirm ]; then # replays, on the same server
        send replay "rep$$" 1 # the record the replays are answered from
        zero
        send replay "rep$$" "$N"
        dump
        read -r c_req c_other < <(per_request "$name" 2 "$N")
        printf 'replay Ir/request: %s (other threads: %s)\n' "$c_req" "$c_other"
    fi
    stop_server
}

for v in $VARIANTS; do
    case "$v" in
    base) measure confirm zero 1 ;;
    receiver)
        [ "$RX_PID" != 0 ] || start_receiver
        measure receiver zero 1 --webhook-url "http://127.0.0.1:$(cat "$T/rx.port")/hook" ;;
    hanging)
        [ "$HANG_PID" != 0 ] || start_hanging
        measure hanging zero 1 --webhook-url "http://127.0.0.1:$(cat "$T/hang.port")/hook" ;;
    tenants) measure tenants zero "$TENANTS" ;;
    report1) measure report1 zero 1 --report-max-identities 1 ;;
    held) measure held held 1 ;;
    *) die "CG_VARIANTS: no variant '$v' (base receiver hanging tenants report1 held)" ;;
    esac
done
