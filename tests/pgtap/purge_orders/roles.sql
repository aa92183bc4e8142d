-- purge_orders is for the sidecar and the administrator, not the application.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(3);

SET LOCAL ROLE ordertimeout_app;
SELECT throws_ok($$SELECT ordertimeout.purge_orders(interval '1 day')$$, '42501', NULL, 'ordertimeout_app cannot purge');
RESET ROLE;
SET LOCAL ROLE ordertimeout_sidecar;
SELECT lives_ok($$SELECT ordertimeout.purge_orders(interval '1 day')$$, 'ordertimeout_sidecar can purge');
RESET ROLE;
SET LOCAL ROLE ordertimeout_admin;
SELECT lives_ok($$SELECT ordertimeout.purge_orders(interval '1 day', 10, interval '1 year')$$, 'ordertimeout_admin can purge');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
