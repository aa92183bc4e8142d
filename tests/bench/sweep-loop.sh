#!/usr/bin/env bash
# sweep-loop.sh: what one sweep_due call costs at steady-state batch sizes
# and in a drain, on the last migration against an earlier one, in one
# server, alternating, so that the machine's speed (which changes by up to
# 2x over a day on the benchmark's virtual machine) is the same for both.
#
# Steady: 3,000 orders (2 items each, 100 SKUs) whose deadlines (cancel_at
# and the timer rows) come 3 ms apart; sweep_due(1000) is called every 9 ms
# (a pacing sleep, not a synchronization), so a call finds 2 to 4 due
# orders, as the sidecar's do at a few hundred orders per second. Drain:
# 20,000 orders all due, then VACUUM ANALYZE and CHECKPOINT (as make bench's
# drain does); 21 calls of sweep_due(1000), the last finding none. Each call's
# time is clock_timestamp() - statement_timestamp() as it returns (the
# commit not included); the figures are the mean and the median over the
# calls that claimed something. Churn: the steady loop again, right after
# 20,000 orders were drained without a VACUUM, as between two autovacuums
# of river_job in production: the deleted timer rows' index entries lie
# where a sweep's scans start (migration 000046); the figures add the
# buffers a call reads (pg_stat_statements, the top-level sweep_due). Two
# rounds, base, head, head, base, so that a drift of the machine's speed
# falls on both. Durable settings (fsync, synchronous_commit,
# full_page_writes on); autovacuum off, so that none runs in the middle of
# a loop: the steady and churn loops VACUUM before their orders are made and
# ANALYZE once they exist, the drain loop runs VACUUM ANALYZE and CHECKPOINT
# before it starts.
#
# Usage (from the repository root): tests/bench/sweep-loop.sh [BASE]
#   BASE: the migration version to compare with (default: the last but one).
#   SWEEP_LOOP_PHASES: which loops to run (default "steady churn drain").
# Needs the migrate CLI (built into .cache/bin by tests/lib/pg.sh's
# ensure_migrate). Takes about 20 minutes with the three (steady 6, churn 8, drain 5
# on the 2-core machine).
set -euo pipefail
# shellcheck source=tests/lib/pg.sh
source "$(dirname "$0")/../lib/pg.sh"
cd "$ROOT"
ensure_migrate

last="$(find migrations -name '*.up.sql' | sed 's|.*/0*\([0-9]*\)_.*|\1|' | sort -n | tail -1)"
base="${1:-$((last - 1))}"
[[ $base =~ ^[0-9]+$ ]] && base=$((10#$base))
[[ $base =~ ^[0-9]+$ && $base -ge 9 && $base -lt $last ]] ||
	die "BASE must be a migration version from 9 to $((last - 1)), got '${1:-}'"
# The comparison gets a private server with the bench's durable settings
# (tests/bin/withpg), whatever DATABASE_URL says: it creates databases base
# and head, and its figures mean something only with those settings.
if [[ -z "${SWEEP_LOOP_INNER:-}" ]]; then
	SWEEP_LOOP_INNER=1 WITHPG_OPTS="-c fsync=on -c synchronous_commit=on -c full_page_writes=on -c shared_buffers=512MB \
 -c autovacuum=off -c shared_preload_libraries=pg_stat_statements" \
		exec env -u DATABASE_URL "$ROOT/tests/bin/withpg" "$0" "$base"
fi
server="${DATABASE_URL%%\?*}"
server="${server%/*}"
psql=("$(pgtool psql)" -X -q -v ON_ERROR_STOP=1)
url="$server"

for db in base head; do
	"${psql[@]}" "$url/postgres" -c "CREATE DATABASE $db"
	if [[ $db == base ]]; then
		run_quiet "$MIGRATE" -path migrations -database "$(pgx5_url "$server/$db?sslmode=disable")" goto "$base"
	else
		run_quiet "$MIGRATE" -path migrations -database "$(pgx5_url "$server/$db?sslmode=disable")" up
	fi
	"${psql[@]}" "$url/$db" >/dev/null <<-'SQL'
		CREATE EXTENSION pg_stat_statements;
		SELECT ordertimeout.configure(grace => '0');
		SELECT count(ordertimeout.put_stock('s' || n, 1000000000)) FROM generate_series(1, 100) AS n;
	SQL
done

# orders DB PREFIX N: N orders of two items with a one-hour timeout.
orders() {
	"${psql[@]}" "$url/$1" -c "SELECT count(ordertimeout.create_order('$2' || i,
		jsonb_build_array(jsonb_build_object('sku', 's' || (i % 100 + 1), 'qty', 1),
		                  jsonb_build_object('sku', 's' || ((i + 7) % 100 + 1), 'qty', 2)), '1 hour'))
		FROM generate_series(1, $3) AS i" >/dev/null
}

# due DB PREFIX FIRST STEP: the PREFIX orders come due FIRST from now and STEP
# apart, in creation order: their deadlines and their timer rows move
# together, as tests/pgtap's test.make_due does (after an ANALYZE of the
# orders, and of river_job while it holds their timer rows: autovacuum is
# off; without statistics the update took minutes, and river_job analyzed
# while empty made the sweep's delete of its timer rows by id scan River's
# whole fetch index, 220 buffers per call, in both databases).
due() {
	"${psql[@]}" "$url/$1" >/dev/null <<-SQL
		ANALYZE ordertimeout.orders, public.river_job;
		WITH o AS (SELECT order_id, clock_timestamp() + interval '$3' + n * interval '$4' - cancel_at AS shift
		             FROM (SELECT order_id, cancel_at, row_number() OVER (ORDER BY created_at, order_id) AS n
		                     FROM ordertimeout.orders WHERE order_id LIKE '$2%' AND status = 'PENDING') AS p),
		     moved AS (UPDATE ordertimeout.orders AS x
		                  SET created_at = x.created_at + o.shift, expire_at = x.expire_at + o.shift,
		                      cancel_at = x.cancel_at + o.shift, gateway_expire_at = x.gateway_expire_at + o.shift
		                 FROM o WHERE x.order_id = o.order_id
		                RETURNING x.timer_job_id, x.cancel_at)
		UPDATE public.river_job AS r SET scheduled_at = moved.cancel_at
		FROM moved WHERE r.id = moved.timer_job_id AND r.kind = 'ordertimeout_expire' AND r.state = 'available';
	SQL
}

# sweeps DB N PAUSE: N calls of sweep_due(1000) with PAUSE seconds between
# them; prints "claimed ms" per call.
sweeps() {
	for _ in $(seq "$2"); do
		echo "SELECT claimed, round(extract(epoch FROM clock_timestamp() - statement_timestamp()) * 1000, 3) FROM ordertimeout.sweep_due(1000);"
		[[ $3 == 0 ]] || echo "SELECT pg_sleep($3);"
	done | "${psql[@]}" "$url/$1" -At -F ' ' | awk 'NF == 2'
}

# summary LABEL: mean and median ms of the calls (on stdin) that claimed.
summary() {
	awk '$1 > 0' | sort -k2,2n | awk -v label="$1" '{ n++; sum += $2; claimed += $1; ms[n] = $2 }
		END { if (n == 0) { print label ": no call claimed anything"; exit }
		      printf "%s: %d calls claimed %d orders (%.1f per call); %.3f ms mean, %.3f ms median per call\n",
		        label, n, claimed, claimed / n, sum / n, ms[int((n + 1) / 2)] }'
}

# buffers DB: shared buffers read per top-level sweep_due call since the
# last reset.
buffers() {
	"${psql[@]}" "$url/$1" -At -c "SELECT round(sum(shared_blks_hit + shared_blks_read)::numeric / sum(calls), 1)
		FROM pg_stat_statements WHERE toplevel AND query LIKE '%sweep_due%' AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
}

phases="${SWEEP_LOOP_PHASES:-steady churn drain}"
echo "sweep_due, migration $base (base) against $last (head), durable settings; phases: $phases"
# Each round runs base, head, head, base; run k of a round has its own orders.
for phase in $phases; do
	case $phase in
	steady)
		for round in 1 2; do
			k=0
			for db in base head head base; do
				k=$((k + 1))
				"${psql[@]}" "$url/$db" -c "VACUUM" >/dev/null
				orders "$db" "steady$round-$k-" 3000
				due "$db" "steady$round-$k-" '1 second' '3 ms'
				sweeps "$db" 1050 0.009 | summary "steady round $round, $db"
			done
		done
		;;
	churn)
		for round in 1 2; do
			k=0
			for db in base head head base; do
				k=$((k + 1))
				"${psql[@]}" "$url/$db" -c "VACUUM" >/dev/null
				orders "$db" "gone$round-$k-" 20000
				due "$db" "gone$round-$k-" '-1 minute' '0 ms'
				sweeps "$db" 21 0 >/dev/null
				orders "$db" "churn$round-$k-" 3000
				due "$db" "churn$round-$k-" '1 second' '3 ms'
				"${psql[@]}" "$url/$db" -c "SELECT pg_stat_statements_reset()" >/dev/null
				sweeps "$db" 1050 0.009 | summary "churn round $round, $db" | tr -d '\n'
				echo "; $(buffers "$db") buffers per call"
			done
		done
		;;
	drain)
		for round in 1 2; do
			k=0
			for db in base head head base; do
				k=$((k + 1))
				orders "$db" "drain$round-$k-" 20000
				due "$db" "drain$round-$k-" '-1 minute' '0 ms'
				"${psql[@]}" "$url/$db" -c "VACUUM ANALYZE" -c CHECKPOINT
				sweeps "$db" 21 0 | summary "drain round $round, $db"
			done
		done
		;;
	*) die "SWEEP_LOOP_PHASES: unknown phase '$phase' (steady, churn, drain)" ;;
	esac
done
