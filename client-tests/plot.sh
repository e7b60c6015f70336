#!/usr/bin/env bash
# plot.sh -- the experiments' figures, drawn from results.json with jq and gnuplot as SVG:
#   e1.svg  E1's final failure rate, grouped by condition, one bar per policy
#   e2.svg  E2's share of 5xx'd (throttled) payments that a retry saved, one bar per policy
#   e3.svg  E3's gateway arrivals per second (fakegate's count), one line per policy
# `make experiments` runs it after the runner; RESULTS.md shows the three. Each SVG is written
# whole (a temporary file renamed into place) with a title and a <title>/<desc> text alternative
# that gives the figures it plots. A figure whose rows results.json lacks is not drawn (said on
# stderr, exit 0), so an old file stays as it was.
#
#   client-tests/plot.sh [RESULTS_JSON [OUT_DIR]]   (default: results.json beside it, its folder)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
results=${1:-$here/results.json}
out_dir=${2:-$here}

say() { echo "plot.sh: $*" >&2; }
for tool in jq gnuplot; do
  command -v "$tool" >/dev/null 2>&1 ||
    { say "$tool is missing (scripts/install-deps installs it)"; exit 1; }
done
[ -r "$results" ] || { say "cannot read $results"; exit 1; }
jq -e 'type == "array"' "$results" >/dev/null || { say "$results: not an array of rows"; exit 1; }
mkdir -p "$out_dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Okabe-Ito colours (told apart with any colour vision), the same policy order in every figure.
preamble() { # output-file title
  cat <<EOF
set terminal svg size 720,360 dynamic enhanced font 'sans,11'
set output '$1'
set title '$2'
set linetype 1 lc rgb '#0072B2' lw 2
set linetype 2 lc rgb '#E69F00' lw 2
set linetype 3 lc rgb '#009E73' lw 2
set linetype 4 lc rgb '#CC79A7' lw 2
set border 3
set xtics nomirror noenhanced
set ytics nomirror
set grid ytics lc rgb '#dddddd'
set key noenhanced
EOF
}

xml_escape() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' <<<"$1"; }

# gnuplot's SVG names itself in <title> and <desc>: put the figure's own there, and drop the
# placeholder names of untitled plots (the value labels), then move the file into place.
finish() { # tmp-svg name title desc
  local t d
  t=$(xml_escape "$3")
  d=$(xml_escape "$4")
  awk -v t="$t" -v d="$d" '
    !done_t && /^<title>/ { print "<title>" t "</title>"; done_t = 1; next }
    !done_d && /^<desc>/  { print "<desc>" d "</desc>"; done_d = 1; next }
    { sub(/<title>gnuplot_plot_[0-9]+<\/title>/, ""); print }' "$1" >"$1.named"
  grep -q '<svg' "$1.named" || { say "$2: gnuplot wrote no SVG"; exit 1; }
  mv "$1.named" "$out_dir/$2"
  drawn+=("$2")
}

# The distinct values of `key` among experiment `e`'s rows, in the order they first appear.
distinct() { # experiment key
  jq -r --arg e "$1" --arg k "$2" \
    '[.[] | select(.experiment == $e) | .[$k]]
     | reduce .[] as $v ([]; if index([$v]) then . else . + [$v] end) | .[]' "$results"
}

drawn=()

# ---- E1: failure rate (%), conditions on x, a bar per policy --------------------------------
plot_e1() {
  local title='E1: failure rate by policy and condition'
  local pols conds c
  mapfile -t pols < <(distinct E1 policy)
  mapfile -t conds < <(distinct E1 condition)
  if [ "${#pols[@]}" -eq 0 ]; then say "no E1 rows in $results: e1.svg not drawn"; return; fi
  : >"$tmp/e1.dat"
  for c in "${conds[@]}"; do
    # a policy the condition did not run is NaN: no bar
    jq -r --arg c "$c" --args '[.[] | select(.experiment == "E1" and .condition == $c)] as $r
      | [$c] + [$ARGS.positional[] as $q
                | [$r[] | select(.policy == $q) | .failure_rate * 100] | first // "NaN"]
      | @tsv' "${pols[@]}" <"$results" >>"$tmp/e1.dat"
  done
  local desc
  desc=$(jq -r '[.[] | select(.experiment == "E1")] as $r
    | "Grouped bars: the share of payments that finally failed (after the reconciler), for each"
      + " gateway condition (x) and client policy (a bar each), \($r[0].requests) payments per"
      + " run, time scale \($r[0].scale), seed \($r[0].seed). "
      + ([$r | group_by(.condition)[] | "\(.[0].condition): "
           + ([.[] | "\(.policy) \(.failure_rate * 1000 | round / 10) %"] | join(", "))]
         | join("; ")) + "."' "$results")
  local n=${#pols[@]} requests
  requests=$(jq '[.[] | select(.experiment == "E1")][0].requests' "$results")
  # the data file's header row names the policies (columnhead)
  { printf 'condition'; printf '\t%s' "${pols[@]}"; echo; cat "$tmp/e1.dat"; } >"$tmp/e1.tsv"
  { preamble "$tmp/e1.svg" "$title"
    cat <<EOF
set datafile separator '\t'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.9 border rgb '#333333'
set boxwidth 0.9 relative
set xlabel 'gateway condition (shipped profile), $requests payments per run'
set ylabel 'payments failed (% of requests)'
set yrange [0:*]
set xrange [-0.6:$(wc -l <"$tmp/e1.dat") - 0.4]
set offsets 0, 0, graph 0.12, 0
set key top left
n = $n
plot for [i=2:n+1] '$tmp/e1.tsv' using i:xtic(1) title columnhead(i) lt (i-1), \\
     for [i=2:n+1] '$tmp/e1.dat' using (\$0 + (i - 2 - (n - 1) / 2.0) / (n + 1.0)):(column(i)):\\
       (sprintf('%.1f %%', column(i))) with labels offset 0,0.7 font 'sans,10' notitle
EOF
  } | gnuplot
  finish "$tmp/e1.svg" e1.svg "$title" "$desc"
}

# ---- E2: retry_success_rate (%), a bar per policy -------------------------------------------
plot_e2() {
  local title='E2: share of throttled payments a retry saved'
  jq -r '.[] | select(.experiment == "E2" and .retry_success_rate != null)
    | [.policy, .retry_success_rate * 100, .saved_by_retry, .requests_with_5xx] | @tsv' \
    "$results" >"$tmp/e2.dat"
  if [ ! -s "$tmp/e2.dat" ]; then say "no E2 rows in $results: e2.svg not drawn"; return; fi
  local desc condition
  condition=$(jq -r '[.[] | select(.experiment == "E2")][0].condition' "$results")
  desc=$(jq -r '[.[] | select(.experiment == "E2" and .retry_success_rate != null)] as $r
    | "Bars per client policy: of the payments that got a 5xx (503, no Retry-After) from the "
      + "\($r[0].condition) profile, the share that still succeeded through a retry; "
      + "\($r[0].requests) payments per run, time scale \($r[0].scale), seed \($r[0].seed). "
      + ([$r[] | "\(.policy): \(.saved_by_retry) of \(.requests_with_5xx) saved "
                 + "(\(.retry_success_rate * 1000 | round / 10) %)"] | join("; ")) + "."' \
    "$results")
  { preamble "$tmp/e2.svg" "$title"
    cat <<EOF
set datafile separator '\t'
set style fill solid 0.9 border rgb '#333333'
set boxwidth 0.6
set xlabel 'client retry policy'
set ylabel "5xx'd payments saved by a retry (%)"
set yrange [0:100]
set xrange [-0.7:$(wc -l <"$tmp/e2.dat") - 0.3]
set key top left
plot '$tmp/e2.dat' using 0:2:xtic(1) with boxes lt 1 \\
       title '$condition: 503 for 0.6 s of every 1 s, no Retry-After', \\
     '' using 0:2:(sprintf('%.1f %% (%d of %d)', \$2, \$3, \$4)) \\
       with labels offset 0,0.8 font 'sans,10' notitle
EOF
  } | gnuplot
  finish "$tmp/e2.svg" e2.svg "$title" "$desc"
}

# ---- E3: gateway arrivals in each model second, a line per policy ---------------------------
plot_e3() {
  local title='E3: gateway arrivals per second through the outage'
  local pols i plot="" sep=""
  mapfile -t pols < <(jq -r '.[] | select(.experiment == "E3" and (.arrivals_per_s | length) > 0)
                             | .policy' "$results")
  if [ "${#pols[@]}" -eq 0 ]; then
    say "no E3 rows with arrivals_per_s in $results (make experiments ONLY=E3 records them):" \
        "e3.svg not drawn"
    return
  fi
  for i in "${!pols[@]}"; do
    # steps: second k drawn from k to k + 1 at its count; a last point closes the last second
    jq -r --arg p "${pols[$i]}" '.[] | select(.experiment == "E3" and .policy == $p)
      | .arrivals_per_s | (to_entries[] | [.key, .value]), [length, .[-1]] | @tsv' \
      "$results" >"$tmp/e3_$i.dat"
    # where the lines coincide (healthy seconds) the first, drawn widest, shows under the next
    plot+="$sep'$tmp/e3_$i.dat' using 1:2 with steps lt $((i + 1)) lw $((i < 2 ? 4 - 2 * i : 1))"
    plot+=" title '${pols[$i]}'"
    sep=", "
  done
  local outage scale xlabel desc seconds
  seconds=$(jq '[.[] | select(.experiment == "E3") | .arrivals_per_s | length] | max' "$results")
  outage=$(jq -r '[.[] | select(.experiment == "E3")][0].phases as $ph
    | ($ph | map(.phase) | index("outage")) as $k
    | if $k == null or $k + 1 >= ($ph | length) then ""
      else "\($ph[$k].start_s) \($ph[$k + 1].start_s)" end' "$results")
  scale=$(jq -r '[.[] | select(.experiment == "E3")][0].scale' "$results")
  xlabel="time since the run's start (s)"
  [ "$scale" = 1 ] || xlabel="time since the run's start (model s; time scale $scale)"
  desc=$(jq -r '[.[] | select(.experiment == "E3" and (.arrivals_per_s | length) > 0)] as $r
    | "Lines per client policy: confirm requests that reached the gateway in each second "
      + "(as fakegate counted them, GET /metrics), \($r[0].rate_per_s) new payments a second for "
      + "\($r[0].duration_s) s; the gateway is down (profile outage) from "
      + "\($r[0].phases[1].start_s) s to \($r[0].phases[2].start_s) s. "
      + ([$r[] | "\(.policy): \(.phases[1].gateway_arrivals) arrivals during the outage, "
                 + "at most \(.arrivals_per_s | max) in a second, \(.gateway_arrivals) in all"]
         | join("; ")) + "."' "$results")
  { preamble "$tmp/e3.svg" "$title"
    cat <<EOF
set datafile separator '\t'
set xlabel "$xlabel"
set ylabel 'confirms reaching the gateway (per s)'
set yrange [0:*]
set xrange [0:$seconds]
set offsets 0, 0, graph 0.12, 0
set key top right
EOF
    [ "$seconds" -lt 90 ] || echo "set xtics 0, 15"
    if [ -n "$outage" ]; then
      read -r os oe <<<"$outage"
      echo "set object 1 rect from $os, graph 0 to $oe, graph 1 behind" \
           "fc rgb '#f6e0e0' fs solid 1.0 noborder"
      echo "set label 1 'outage' at ($os + $oe) / 2.0, graph 0.95 center"
    fi
    echo "plot $plot"
  } | gnuplot
  finish "$tmp/e3.svg" e3.svg "$title" "$desc"
}

plot_e1
plot_e2
plot_e3
[ "${#drawn[@]}" -eq 0 ] || printf 'plot.sh: wrote %s\n' "${drawn[@]/#/$out_dir/}"
