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
# Environment: CG_N (requests per phase, default 2000), CG_WARMUP (default 500), CG_PARALLEL
# (connections, default 8), CG_KEEP=1 keeps the temp dir with the callgrind dumps (cg.out.K-TT:
# dump K = 1 confirms, 2 replays; thread TT). Output: lines "confirm Ir/request: N (other threads: M)" and
# "replay Ir/request: ...". Exits non-zero when it could not measure.
set -u -o pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
FG=${1:-$ROOT/build/fakegate}
N=${CG_N:-2000}
WARM=${CG_WARMUP:-500}
PAR=${CG_PARALLEL:-8}

say() { printf 'callgrind: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
for v in N WARM PAR; do
    case "${!v}" in '' | *[!0-9]*) die "CG_$v must be a whole number, not '${!v}'" ;; esac
done
[ "$N" -gt 0 ] || die "CG_N must be at least 1"
[ -x "$FG" ] || die "no fakegate binary at $FG (run make first)"
for t in valgrind callgrind_control curl awk; do
    command -v $t >/dev/null || die "$t is missing (apt-get install valgrind curl)"
done

T=$(mktemp -d /tmp/fakegate-callgrind.XXXXXX)
VG_PID=0
cleanup() {
    if [ "$VG_PID" != 0 ] && kill -0 "$VG_PID" 2>/dev/null; then
        kill -TERM "$VG_PID" 2>/dev/null
        wait "$VG_PID" 2>/dev/null
    fi
    if [ "${CG_KEEP:-0}" = 1 ]; then say "kept $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo '{"name":"bench-zero","routes":{}}' >"$T/zero.json"
valgrind --tool=callgrind --separate-threads=yes --dump-instr=no --compress-strings=no \
    --callgrind-out-file="$T/cg.out" \
    "$FG" --port 0 --port-file "$T/port" --quiet --profile "$T/zero.json" --seed 7 \
    >"$T/fg.out" 2>"$T/fg.err" &
VG_PID=$!
for _ in $(seq 600); do
    [ -s "$T/port" ] && break
    kill -0 "$VG_PID" 2>/dev/null || break
    sleep 0.05
done
[ -s "$T/port" ] || die "fakegate did not start under valgrind: $(tail -5 "$T/fg.err")"
PORT=$(cat "$T/port")
URL="http://127.0.0.1:$PORT/v1/payments/confirm"

# A curl config of COUNT confirms: unique (fresh keys, prefix PREFIX) or replay (one body, one key).
requests() { # MODE PREFIX COUNT
    awk -v mode="$1" -v pre="$2" -v n="$3" -v url="$URL" 'BEGIN {
        for (i = 1; i <= n; i++) {
            id = (mode == "replay") ? "replay_" pre : pre "_" i
            printf "url = \"%s\"\noutput = \"/dev/null\"\nwrite-out = \"%%{http_code}\\n\"\n", url
            printf "user = \"test_sk_bench:\"\nheader = \"Content-Type: application/json\"\n"
            printf "header = \"Idempotency-Key: ik_%s\"\n", id
            printf "data = \"{\\\"paymentKey\\\":\\\"pk_%s\\\",\\\"orderId\\\":\\\"o_%s\\\",\\\"amount\\\":15000}\"\n", id, id
            if (i < n) print "next"
        }
    }' >"$T/$2.curl"
}
send() { # MODE PREFIX COUNT: send them, fail unless every answer is 200
    requests "$@"
    curl -s --no-progress-meter --parallel --parallel-max "$PAR" --parallel-immediate -K "$T/$2.curl" >"$T/$2.codes" ||
        die "curl failed ($2)"
    local ok
    ok=$(grep -c '^200$' "$T/$2.codes")
    [ "$ok" = "$3" ] || die "$2: $ok of $3 answers were 200 ($(sort "$T/$2.codes" | uniq -c | tr '\n' ' '))"
}
zero() { callgrind_control --zero "$VG_PID" >/dev/null 2>&1 || die "callgrind_control --zero failed"; }
dump() { callgrind_control --dump "$VG_PID" >/dev/null 2>&1 || die "callgrind_control --dump failed"; }
# Ir per request of dump number K over COUNT requests: "REQUEST_THREADS OTHER_THREADS".
per_request() { # K COUNT
    local f req=0 other=0 ir k
    k=$(printf '%d' "$1")
    for f in "$T"/cg.out."$k"-*; do
        [ -e "$f" ] || die "no callgrind dump $k in $T"
        ir=$(awk '$1 == "summary:" || $1 == "totals:" {print $2; exit}' "$f")
        if grep -q 'on_request' "$f"; then req=$((req + ir)); else other=$((other + ir)); fi
    done
    awk -v r="$req" -v o="$other" -v n="$2" 'BEGIN {printf "%.0f %.0f\n", r / n, o / n}'
}

send unique warm "$WARM"
send replay warmr 10
zero
send unique "run$$" "$N"
dump # the files cg.out.1-TT, one per thread TT
read -r c_req c_other < <(per_request 1 "$N")
send replay "rep$$" 1 # the record the replays are answered from
zero
send replay "rep$$" "$N"
dump # cg.out.2-TT
read -r r_req r_other < <(per_request 2 "$N")
printf 'confirm Ir/request: %s (other threads: %s)\n' "$c_req" "$c_other"
printf 'replay Ir/request: %s (other threads: %s)\n' "$r_req" "$r_other"
