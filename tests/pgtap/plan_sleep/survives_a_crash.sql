-- sweep_state is unlogged: after a crash PostgreSQL empties it. plan_sleep
-- then writes the row again, and the table is unlogged so that this hint
-- costs no WAL flush per sweep.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(3);

SELECT is((SELECT c.relpersistence FROM pg_catalog.pg_class AS c WHERE c.oid = 'ordertimeout.sweep_state'::regclass),
    'u'::"char", 'sweep_state is unlogged');

DELETE FROM ordertimeout.sweep_state;   -- what a crash leaves
SELECT ordertimeout.plan_sleep(interval '1 second') AS wake_at \gset
SELECT is((SELECT count(*)::integer FROM ordertimeout.sweep_state), 1, 'plan_sleep writes the row again');
SELECT is((SELECT wake_at FROM ordertimeout.sweep_state), :'wake_at'::timestamptz, 'with the planned moment');

SELECT * FROM finish();
ROLLBACK;
