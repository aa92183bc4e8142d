-- A timer row whose order row does not exist (deleted by hand) is not
-- deferred as if another transaction held the order: it is claimed, counted
-- as moot and deleted, so it does not come back on every sweep. An order
-- another transaction holds is still deferred (tests/race, nowait_test.go).
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(4);

SELECT test.insert_timer('ghost', 1, clock_timestamp() - interval '1 minute');

SELECT results_eq(
    $$SELECT claimed, cancelled, caught_by_sweep, checks, moot, deferred FROM ordertimeout.sweep_due()$$,
    $$VALUES (1, 0, 0, 0, 1, 0)$$,
    'the timer of a missing order is claimed and counted as moot, not deferred');
SELECT is_empty($$SELECT 1 FROM public.river_job WHERE queue = 'ordertimeout_expire'$$, 'its timer row is deleted');
SELECT results_eq(
    $$SELECT claimed, moot, deferred FROM ordertimeout.sweep_due()$$,
    $$VALUES (0, 0, 0)$$,
    'the next sweep finds nothing');
SELECT is_empty($$SELECT 1 FROM ordertimeout.events$$, 'no event for an order that does not exist');

SELECT * FROM finish();
ROLLBACK;
