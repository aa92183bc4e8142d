#!/usr/bin/env bash
# deferral-lag.sh: how much cancel lag the sweep's deferrals cost at steady
# rates. A sweep whose batch is not full leaves an order whose row, stock or
# points another transaction holds to a later sweep (sweep_due's deferred
# column); this script finds out which orders that was, and how late they
# were cancelled next to the others.
#
# It builds the benchmark from a temporary checkout of HEAD whose last
# migration also replaces sweep_due by the same function plus one RAISE LOG
# naming the orders it deferred (nothing else differs), runs the steady
# scenario once (ordertimeout only, the sidecar bin/ordertimeout built from
# HEAD, durable settings, a private server logging to a temporary
# directory), then joins the logged order ids with their CANCELLED events and
# prints, per number of times an order was deferred, how many orders and
# their lag (events.lateness) p50 and p99.
#
# Usage (from the repository root): tests/bench/deferral-lag.sh [bench flags]
#   e.g. tests/bench/deferral-lag.sh --steady-rate 1000 --steady-duration 30s
# Takes about 2 minutes.
set -euo pipefail
# shellcheck source=tests/lib/pg.sh
source "$(dirname "$0")/../lib/pg.sh"
cd "$ROOT"

if [[ -z "${DEFERRAL_INNER:-}" ]]; then
	work="$(mktemp -d -t deferral-lag.XXXXXX)"
	trap 'git worktree remove --force "$work/src" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
	git worktree add --quiet --detach "$work/src" HEAD
	last="$(find "$work/src/migrations" -name '*.up.sql' | sort | tail -1)"
	python3 - "$work/src/plpgsql/sweep_due.sql" "$last" <<'PY'
import sys
src, migration = sys.argv[1], sys.argv[2]
s = open(src).read()
body = s[s.index('CREATE FUNCTION'):s.index('COMMENT ON FUNCTION')]
marker = "    IF cardinality(v_deferred) > 0 THEN\n"
if marker not in body:
    sys.exit("deferral-lag.sh: sweep_due no longer has the deferral branch this script patches")
body = body.replace('CREATE FUNCTION', 'CREATE OR REPLACE FUNCTION', 1)
body = body.replace(marker, marker + "        RAISE LOG 'deferral-lag: %', array_to_string(v_deferred, ',');\n", 1)
open(migration, 'a').write('\n-- deferral-lag.sh: sweep_due logging the orders it defers\n' + body)
PY
	(cd "$work/src" && go build -o "$work/bench" ./tests/bench && go build -o "$work/ordertimeout" ./sidecar/cmd/ordertimeout)
	mkdir -p "$work/log"
	chmod 777 "$work" "$work/log"
	DEFERRAL_INNER=1 DEFERRAL_WORK="$work" \
		WITHPG_OPTS="-c fsync=on -c synchronous_commit=on -c full_page_writes=on -c logging_collector=on -c log_directory=$work/log" \
		env -u DATABASE_URL "$ROOT/tests/bin/withpg" "$0" "$@"
	exit
fi

# Inside withpg: DATABASE_URL is the private server.
work="$DEFERRAL_WORK"
PSQL=(/usr/lib/postgresql/15/bin/psql -X -q -v ON_ERROR_STOP=1)
"$work/bench" --scenarios steady --zset=false --steady-runs 1 --plot-dir '' --keep \
	--sidecar "$work/ordertimeout" "$@" >"$work/bench.jsonl" 2>"$work/bench.log" ||
	die "the benchmark failed: $(tail -5 "$work/bench.log")"
echo "## steady (one run)"
grep '"scenario":"steady"' "$work/bench.jsonl" | grep -o '"rate":[0-9]*\|"created_per_s":[0-9.]*\|"cancel_lag_ms":{[^}]*}' | tr '\n' ' '
echo
db="$("${PSQL[@]}" -At "$DATABASE_URL" -c "SELECT datname FROM pg_database WHERE datname LIKE 'bench\_%steady%' ORDER BY oid DESC LIMIT 1")"
[[ -n $db ]] || die "no steady database kept"
grep -ho 'deferral-lag: .*' "$work"/log/* | sed 's/deferral-lag: //' | tr ',' '\n' | sort | uniq -c |
	awk '{print $2 "," $1}' >"$work/deferred.csv"
echo "## orders by times deferred, and their cancel lag (ms)"
"${PSQL[@]}" "$(sed "s#/postgres?#/$db?#" <<<"$DATABASE_URL")" <<SQL
CREATE TEMP TABLE deferred (order_id text PRIMARY KEY, times integer NOT NULL);
\copy deferred FROM '$work/deferred.csv' WITH (FORMAT csv)
SELECT CASE WHEN grouping(coalesce(d.times, 0)) = 1 THEN 'all' ELSE coalesce(d.times, 0)::text END AS times_deferred,
       count(*) AS orders,
       round((percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM e.lateness)))::numeric * 1000, 1) AS lag_p50_ms,
       round((percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM e.lateness)))::numeric * 1000, 1) AS lag_p99_ms
FROM ordertimeout.events AS e
LEFT JOIN deferred AS d USING (order_id)
WHERE e.to_status = 'CANCELLED' AND e.cause IN ('timeout', 'sweep')
GROUP BY ROLLUP (coalesce(d.times, 0))
ORDER BY grouping(coalesce(d.times, 0)), coalesce(d.times, 0);
SQL
