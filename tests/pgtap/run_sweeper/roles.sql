-- run_sweeper runs with its caller's rights: ordertimeout_sidecar and
-- ordertimeout_admin may call it (and the sweep_due and plan_next_sweep it
-- calls), ordertimeout_app and PUBLIC may not; a role that may call it but
-- not what it calls is told so before anything is swept. A procedure that commits cannot be
-- SECURITY DEFINER nor pin search_path with SET, so it is checked here.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(7);

SELECT ok(NOT has_function_privilege('ordertimeout_app', 'ordertimeout.run_sweeper(integer, interval, interval)', 'EXECUTE'),
    'ordertimeout_app may not call run_sweeper');
SELECT ok(has_function_privilege('ordertimeout_sidecar', 'ordertimeout.run_sweeper(integer, interval, interval)', 'EXECUTE')
      AND has_function_privilege('ordertimeout_sidecar', 'ordertimeout.sweep_due(integer)', 'EXECUTE')
      AND has_function_privilege('ordertimeout_sidecar', 'ordertimeout.plan_next_sweep(interval, timestamptz, interval)', 'EXECUTE'),
    'ordertimeout_sidecar may call run_sweeper and what it calls');
SELECT ok(has_function_privilege('ordertimeout_admin', 'ordertimeout.run_sweeper(integer, interval, interval)', 'EXECUTE')
      AND has_function_privilege('ordertimeout_admin', 'ordertimeout.sweep_due(integer)', 'EXECUTE')
      AND has_function_privilege('ordertimeout_admin', 'ordertimeout.plan_next_sweep(interval, timestamptz, interval)', 'EXECUTE'),
    'ordertimeout_admin may call run_sweeper and what it calls');

SET LOCAL ROLE ordertimeout_app;
SELECT throws_ok($$CALL ordertimeout.run_sweeper(duration => interval '1 second')$$, '42501', NULL,
    'ordertimeout_app: permission denied');
RESET ROLE;
SET LOCAL ROLE ordertimeout_sidecar;
SELECT throws_ok($$CALL ordertimeout.run_sweeper(duration => interval '1 second')$$, '2D000', NULL,
    'ordertimeout_sidecar gets as far as its first COMMIT (refused inside a transaction block)');
RESET ROLE;

-- A role given run_sweeper alone (not a member of ordertimeout_sidecar).
CREATE ROLE ot_test_cron_only NOLOGIN;
GRANT USAGE ON SCHEMA ordertimeout TO ot_test_cron_only;
GRANT EXECUTE ON PROCEDURE ordertimeout.run_sweeper(integer, interval, interval) TO ot_test_cron_only;
SET LOCAL ROLE ot_test_cron_only;
SELECT throws_ok($$CALL ordertimeout.run_sweeper(duration => interval '1 second')$$, '42501',
    'run_sweeper runs with its caller''s rights, and role "ot_test_cron_only" may not execute ordertimeout.sweep_due(integer) and ordertimeout.plan_next_sweep(interval, timestamptz, interval)',
    'a role without sweep_due and plan_next_sweep is told so before its first sweep (not 2D000 at its first COMMIT)');
RESET ROLE;

SELECT is((SELECT p.prosecdef OR p.proconfig IS NOT NULL FROM pg_catalog.pg_proc AS p
            WHERE p.oid = 'ordertimeout.run_sweeper(integer, interval, interval)'::regprocedure),
          false, 'SECURITY INVOKER without SET: PostgreSQL refuses COMMIT otherwise');

SELECT * FROM finish();
ROLLBACK;
