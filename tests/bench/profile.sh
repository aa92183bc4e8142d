#!/usr/bin/env bash
# profile.sh: where ordertimeout's per-order CPU goes, next to the ZSet
# baseline's, on the bench's durable settings. It starts a private server
# with pg_stat_statements (track = all: the statements inside the PL/pgSQL
# functions too; track_planning = on: planning time per statement, which
# adds a little overhead of its own, so its exec times are not comparable
# with profiles taken before it was on) and auto_explain, runs the create
# and steady scenarios of the benchmark at PROFILE_RATE orders/s for
# PROFILE_DURATION (both designs),
# then prints, from the kept databases:
#   1. pg_stat_statements per statement: calls, exec ms per call, planning
#      ms per plan, rows, buffers and WAL per call, sorted by total time;
#   2. the indexes of every table a lifecycle writes, and how its rows were
#      written (inserts, updates, HOT updates, deletes) per order;
#   3. EXPLAIN (ANALYZE, BUFFERS, WAL) of every statement of create_order,
#      begin_payment and confirm_payment (auto_explain, nested statements),
#      for one order, in a transaction rolled back;
#   4. the sidecar's CPU from the steady JSON line.
#
# Usage (from the repository root): tests/bench/profile.sh > profile.txt
# Environment: PROFILE_RATE (default 500), PROFILE_DURATION (default 20s).
set -euo pipefail
cd "$(dirname "$0")/../.."

if [[ -z "${PROFILE_INNER:-}" ]]; then
	go build -o bin/ordertimeout ./sidecar/cmd/ordertimeout
	go build -o bin/ordertimeout-bench ./tests/bench
	tests/bin/ensure-redis
	out="$(mktemp -d -t bench-profile.XXXXXX)"
	trap 'rm -rf "$out"' EXIT
	WITHPG_OPTS="-c fsync=on -c synchronous_commit=on -c full_page_writes=on \
 -c shared_preload_libraries=pg_stat_statements,auto_explain -c pg_stat_statements.track=all \
 -c pg_stat_statements.max=5000 -c pg_stat_statements.track_planning=on -c track_io_timing=on" \
		PROFILE_INNER=1 PROFILE_OUT="$out" PROFILE_RATE="${PROFILE_RATE:-500}" PROFILE_DURATION="${PROFILE_DURATION:-20s}" \
		tests/bin/withpg "$0"
	exit
fi

# Inside withpg: DATABASE_URL is the private server.
PSQL=(/usr/lib/postgresql/15/bin/psql -X -q -v ON_ERROR_STOP=1)
"${PSQL[@]}" "$DATABASE_URL" -c "CREATE EXTENSION pg_stat_statements"
bin/ordertimeout-bench --scenarios create,steady --runs 1 --steady-runs 1 --create-duration 10s \
	--steady-rate "$PROFILE_RATE" --steady-duration "$PROFILE_DURATION" --keep --plot-dir "" \
	>"$PROFILE_OUT/bench.jsonl" 2>"$PROFILE_OUT/bench.log"
echo "## bench JSON lines (create, steady)"
grep "\"scenario\":\"\(create\|steady\)\"" "$PROFILE_OUT/bench.jsonl" | cut -c1-600
echo
echo "## 1. pg_stat_statements, every database, by total exec time (top 70)"
"${PSQL[@]}" "$DATABASE_URL" -P pager=off <<"SQL"
SELECT round(s.total_exec_time::numeric, 0) AS total_ms,
       s.calls,
       round((s.total_exec_time / s.calls)::numeric, 4) AS ms_per_call,
       round((s.total_plan_time / greatest(s.plans, 1))::numeric, 4) AS plan_ms,
       round(s.rows::numeric / s.calls, 2) AS rows,
       round((s.shared_blks_hit + s.shared_blks_read)::numeric / s.calls, 1) AS blks,
       round(s.shared_blks_dirtied::numeric / s.calls, 2) AS dirtied,
       round(s.wal_bytes / s.calls, 0) AS wal_b,
       round(s.wal_fpi::numeric / s.calls, 3) AS fpi,
       s.toplevel AS top,
       left(regexp_replace(s.query, $$\s+$$, $$ $$, $$g$$), 110) AS query
FROM pg_stat_statements AS s
WHERE s.calls >= 100
ORDER BY s.total_exec_time DESC
LIMIT 70;
SQL
db="$("${PSQL[@]}" "$DATABASE_URL" -At -c "SELECT datname FROM pg_database WHERE datname LIKE 'bench_%_steady_%' AND datname NOT LIKE '%zset%' ORDER BY oid DESC LIMIT 1")"
zdb="$("${PSQL[@]}" "$DATABASE_URL" -At -c "SELECT datname FROM pg_database WHERE datname LIKE 'bench_%_zset_steady_%' ORDER BY oid DESC LIMIT 1")"
echo
echo "## 1b. planning (track_planning), every database, by total planning time (top 15): plans = calls means re-planned on every call"
"${PSQL[@]}" "$DATABASE_URL" -P pager=off <<"SQL"
SELECT round(sum(s.total_plan_time)::numeric, 0) AS total_plan_ms, sum(s.plans) AS plans FROM pg_stat_statements AS s;
SELECT round(s.total_plan_time::numeric, 0) AS plan_ms, s.plans, s.calls,
       round((s.total_plan_time / greatest(s.plans, 1))::numeric, 3) AS ms_per_plan,
       left(regexp_replace(s.query, $$\s+$$, $$ $$, $$g$$), 110) AS query
FROM pg_stat_statements AS s
ORDER BY s.total_plan_time DESC
LIMIT 15;
SQL
echo
echo "## 2. indexes of the tables written per order, and how rows were written (steady database $db)"
"${PSQL[@]}" "${DATABASE_URL/\/postgres\?//$db?}" -P pager=off <<"SQL"
SELECT t.schemaname || $$.$$ || t.relname AS "table",
       (SELECT count(*) FROM pg_index AS i WHERE i.indrelid = t.relid) AS indexes,
       (SELECT string_agg(am.amname, $$,$$ ORDER BY c.relname) FROM pg_index AS i
          JOIN pg_class AS c ON c.oid = i.indexrelid JOIN pg_am AS am ON am.oid = c.relam
         WHERE i.indrelid = t.relid) AS kinds,
       round(t.n_tup_ins::numeric / o.n, 2) AS ins_per_order,
       round(t.n_tup_upd::numeric / o.n, 2) AS upd_per_order,
       round(t.n_tup_hot_upd::numeric / o.n, 2) AS hot_per_order,
       round(t.n_tup_del::numeric / o.n, 2) AS del_per_order
FROM pg_stat_user_tables AS t, (SELECT count(*)::numeric AS n FROM ordertimeout.orders) AS o
WHERE t.n_tup_ins + t.n_tup_upd + t.n_tup_del > 0
ORDER BY 1;
SELECT c.relname AS "index", am.amname, pg_get_indexdef(i.indexrelid) AS def
FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid JOIN pg_am AS am ON am.oid = c.relam
WHERE i.indrelid IN ($$public.river_job$$::regclass, $$ordertimeout.orders$$::regclass, $$ordertimeout.events$$::regclass,
                     $$ordertimeout.order_items$$::regclass, $$ordertimeout.payments$$::regclass, $$ordertimeout.stock$$::regclass)
ORDER BY i.indrelid::regclass::text, 1;
SQL
echo
echo "## 2b. the same for the ZSet baseline (database $zdb)"
"${PSQL[@]}" "${DATABASE_URL/\/postgres\?//$zdb?}" -P pager=off <<"SQL"
SELECT t.schemaname || $$.$$ || t.relname AS "table",
       (SELECT count(*) FROM pg_index AS i WHERE i.indrelid = t.relid) AS indexes,
       round(t.n_tup_ins::numeric / o.n, 2) AS ins_per_order,
       round(t.n_tup_upd::numeric / o.n, 2) AS upd_per_order,
       round(t.n_tup_hot_upd::numeric / o.n, 2) AS hot_per_order,
       round(t.n_tup_del::numeric / o.n, 2) AS del_per_order
FROM pg_stat_user_tables AS t, (SELECT count(*)::numeric AS n FROM zset.orders) AS o
WHERE t.schemaname = $$zset$$ AND t.n_tup_ins + t.n_tup_upd + t.n_tup_del > 0
ORDER BY 1;
SQL
echo
echo "## 3. EXPLAIN (ANALYZE, BUFFERS, WAL) of each statement of create_order, begin_payment, confirm_payment, and of a sweep_due cancelling 2 orders"
echo "## (auto_explain, nested statements; second order of the session, so the plans are the cached generic ones)"
"${PSQL[@]}" "${DATABASE_URL/\/postgres\?//$db?}" -P pager=off 2>&1 <<"SQL" | grep -v "^$"
BEGIN;
SELECT FROM ordertimeout.create_order($$prof-0$$, $$[{"sku":"sku-001","qty":1},{"sku":"sku-002","qty":2}]$$, $$3 s$$);
SELECT FROM ordertimeout.begin_payment($$prof-0$$, $$pay-0$$);
SELECT FROM ordertimeout.confirm_payment($$prof-0$$, $$pay-0$$);
SET auto_explain.log_min_duration = 0;
SET auto_explain.log_analyze = on;
SET auto_explain.log_buffers = on;
SET auto_explain.log_wal = on;
SET auto_explain.log_timing = on;
SET auto_explain.log_nested_statements = on;
SET auto_explain.log_level = notice;
SET client_min_messages = notice;
SELECT FROM ordertimeout.create_order($$prof-1$$, $$[{"sku":"sku-003","qty":1},{"sku":"sku-004","qty":2}]$$, $$3 s$$);
SELECT FROM ordertimeout.begin_payment($$prof-1$$, $$pay-1$$);
SELECT FROM ordertimeout.confirm_payment($$prof-1$$, $$pay-1$$);
SELECT FROM ordertimeout.create_order($$prof-2$$, $$[{"sku":"sku-005","qty":1},{"sku":"sku-006","qty":2}]$$, $$1 ms$$);
SELECT FROM ordertimeout.create_order($$prof-3$$, $$[{"sku":"sku-007","qty":1},{"sku":"sku-008","qty":2}]$$, $$1 ms$$);
SELECT pg_sleep(0.01);
SELECT * FROM ordertimeout.sweep_due(1000);
ROLLBACK;
SQL
echo
echo "## 4. sidecar CPU during steady"
grep "\"scenario\":\"steady\"" "$PROFILE_OUT/bench.jsonl" | grep -o "\"design\":\"[a-z]*\"\|\"sidecar_cpu_s\":[0-9.]*\|\"created\":[0-9]*\|\"own_cpu_s\":[0-9.]*" | paste -sd " "
for d in $("${PSQL[@]}" "$DATABASE_URL" -At -c "SELECT datname FROM pg_database WHERE datname LIKE 'bench_%'"); do
	"${PSQL[@]}" "$DATABASE_URL" -c "DROP DATABASE \"$d\" WITH (FORCE)"
done
