#!/usr/bin/env bash
# campaign.sh: a fuzzing campaign on the host backend. Runs each fuzz target
# of the root package for a while, one after the other, and reports how
# fast each ran and what it found.
#
#   tools/fuzz/campaign.sh                     # every target, 15 minutes each
#   FUZZTIME=2m tools/fuzz/campaign.sh         # shorter
#   tools/fuzz/campaign.sh FuzzDifferential    # some targets only
#
# Environment:
#   FUZZTIME  how long each target runs (go test's -fuzztime; default 15m)
#   PARALLEL  fuzzing workers (go test's -parallel; default: GOMAXPROCS)
#   OUT       where the logs and summary.md go (default .fuzz/<UTC time>)
#
# For each target the log is OUT/<target>.log (go test's own output) and the
# summary (OUT/summary.md, also printed) has one row: executions, the mean
# rate (executions / elapsed time), the slowest and fastest 3-second rates
# go test printed, the longest run of lines with no new executions (a stall:
# usually the fuzzer minimizing an input), new interesting inputs, and the
# result. A failing input is written by go test under testdata/fuzz/<target>/
# and named in the row; the exit status is then 1.
set -uo pipefail
cd "$(dirname "$0")/../.."

fuzztime=${FUZZTIME:-15m}
out=${OUT:-.fuzz/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
	mapfile -t targets < <(grep -ho '^func Fuzz[A-Za-z0-9_]*' ./*_test.go | sed 's/^func //' | sort -u)
fi
if [ ${#targets[@]} -eq 0 ]; then
	echo "campaign.sh: no fuzz targets in the root package" >&2
	exit 2
fi

par=()
[ -n "${PARALLEL:-}" ] && par=(-parallel "$PARALLEL")

summary=$out/summary.md
{
	echo "# Fuzzing campaign, $(date -u '+%Y-%m-%d %H:%M') UTC"
	echo
	echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo ' (uncommitted changes)'), $(go version | cut -d' ' -f3-), $(nproc) cores, ${PARALLEL:-GOMAXPROCS} workers, -fuzztime $fuzztime each"
	echo
	echo "| target | elapsed | executions | execs/s (mean) | 3-s rate min–max | longest stall | new interesting | result |"
	echo "|---|--:|--:|--:|--:|--:|--:|---|"
} >"$summary"

failed=0
for t in "${targets[@]}"; do
	log=$out/$t.log
	echo "== $t: go test -run '^\$' -fuzz '^$t\$' -fuzztime $fuzztime ${par[*]} ." >&2
	go test -run '^$' -fuzz "^$t\$" -fuzztime "$fuzztime" "${par[@]}" . >"$log" 2>&1
	rc=$?
	result=ok
	if [ $rc -ne 0 ]; then
		failed=1
		result="FAIL (exit $rc)"
		if f=$(grep -o 'testdata/fuzz/[^ ]*' "$log" | head -1) && [ -n "$f" ]; then
			result="FAIL: $f"
		fi
	fi
	# go test prints, every 3 s:
	#   fuzz: elapsed: 33s, execs: 181204 (5996/sec), new interesting: 12 (total: 40)
	# the rate being that of the last interval.
	awk -v t="$t" -v result="$result" '
		function secs(s,   n, v, u) { # "1m3s" -> 63
			n = 0
			while (match(s, /^[0-9.]+[hms]/)) {
				v = substr(s, 1, RLENGTH - 1); u = substr(s, RLENGTH, 1)
				n += v * (u == "h" ? 3600 : u == "m" ? 60 : 1)
				s = substr(s, RLENGTH + 1)
			}
			return n
		}
		/fuzz: elapsed: .*execs: / {
			line = $0
			match(line, /elapsed: [0-9hms.]+/); el = secs(substr(line, RSTART + 9, RLENGTH - 9))
			match(line, /execs: [0-9]+/); ex = substr(line, RSTART + 7, RLENGTH - 7) + 0
			match(line, /\([0-9]+\/sec\)/); r = substr(line, RSTART + 1, RLENGTH - 6) + 0
			if (match(line, /new interesting: [0-9]+/)) ni = substr(line, RSTART + 17, RLENGTH - 17) + 0
			if (el > 0 && ex > 0) { # the first lines, gathering baseline coverage, run nothing yet
				if (n == 0 || r < rmin) rmin = r
				if (r > rmax) rmax = r
				if (ex == lastex) { stall += el - lastel; if (stall > maxstall) maxstall = stall } else stall = 0
				n++
			}
			lastex = ex; lastel = el; elapsed = el; execs = ex
		}
		END {
			mean = elapsed > 0 ? execs / elapsed : 0
			printf "| %s | %ds | %d | %.0f | %d–%d | %ds | %d | %s |\n", t, elapsed, execs, mean, rmin, rmax, maxstall, ni, result
		}' "$log" >>"$summary"
	tail -1 "$summary" >&2
done

{
	echo
	echo "Logs: $out/<target>.log. New corpus entries stay in go's fuzz cache ($(go env GOCACHE)/fuzz)."
} >>"$summary"
cat "$summary"
exit $failed
