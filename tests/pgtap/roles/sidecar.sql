-- ordertimeout_sidecar may run the sweep, the gateway-check and conflict
-- functions, read the stats views and use River's tables, but not administer
-- stock, points or settings.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(17);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SET LOCAL ROLE ordertimeout_sidecar;

SELECT lives_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]')$$, 'can create_order');
SELECT lives_ok($$SELECT * FROM ordertimeout.sweep_due()$$, 'can sweep_due');
SELECT lives_ok($$SELECT ordertimeout.cancel_due()$$, 'can cancel_due');
SELECT lives_ok($$SELECT * FROM ordertimeout.preview_due()$$, 'can preview_due');
SELECT lives_ok($$SELECT ordertimeout.plan_sleep(interval '1 second')$$, 'can plan_sleep');
SELECT lives_ok($$SELECT * FROM ordertimeout.rescue_stuck_jobs(interval '1 minute')$$, 'can rescue_stuck_jobs');
SELECT lives_ok($$SELECT ordertimeout.cancel_checked('o1', 1)$$, 'can cancel_checked');
SELECT lives_ok($$SELECT ordertimeout.close_cancelled(interval '0')$$, 'can close_cancelled');
SELECT lives_ok($$SELECT * FROM ordertimeout.sweep_stats$$, 'can SELECT sweep_stats');
SELECT lives_ok($$SELECT * FROM ordertimeout.order_counts, ordertimeout.cancel_lag$$, 'can SELECT order_counts and cancel_lag');
SELECT lives_ok($$INSERT INTO public.river_job (kind, args) VALUES ('ordertimeout_webhook', '{}')$$, 'can INSERT INTO river_job');
SELECT lives_ok($$SELECT * FROM public.river_job$$, 'can SELECT river_job');
SELECT throws_ok($$SELECT ordertimeout.hand_over_conflict(-1, 'why')$$, 'OT130', NULL,
    'can call hand_over_conflict (an unknown conflict: OT130, not 42501)');

SELECT throws_ok($$SELECT ordertimeout.put_stock('A', 1000)$$, '42501', NULL, 'cannot put_stock');
SELECT throws_ok($$SELECT ordertimeout.put_points('acct', 1000)$$, '42501', NULL, 'cannot put_points');
SELECT throws_ok($$SELECT ordertimeout.configure(grace => interval '0')$$, '42501', NULL, 'cannot configure');
SELECT throws_ok($$SELECT * FROM ordertimeout.orders$$, '42501', NULL, 'cannot SELECT ordertimeout.orders');

SELECT * FROM finish();
ROLLBACK;
