-- With precheck 'attempted' (the default), a due order whose payment was
-- started is not cancelled: it gets a gateway check job instead and leaves
-- the sweep's work. The sidecar then cancels it with cancel_checked.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(8);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.begin_payment('o1', 'p1');
SELECT ordertimeout.fail_payment('o1', 'p1');      -- PENDING again, version 3, payment_attempted
SELECT test.make_due('o1');

SELECT results_eq(
    $$SELECT claimed, cancelled, caught_by_sweep, checks, moot FROM ordertimeout.sweep_due()$$,
    $$VALUES (1, 0, 0, 1, 0)$$,
    'the due order is handed to a check, not cancelled');
SELECT is((SELECT status FROM ordertimeout.order_info('o1')), 'PENDING', 'the order is still PENDING');
SELECT results_eq(
    $$SELECT kind, queue, state::text, args FROM public.river_job WHERE kind <> 'ordertimeout_payment_check'$$,
    $$VALUES ('ordertimeout_precancel_check', 'ordertimeout', 'available', '{"order_id": "o1", "version": 3}'::jsonb)$$,
    'one precancel check job for version 3; the timer row is gone');
SELECT results_eq(
    $$SELECT check_job_id = (SELECT id FROM public.river_job WHERE kind = 'ordertimeout_precancel_check'), timer_job_id
        FROM ordertimeout.orders$$,
    $$VALUES (true, NULL::bigint)$$,
    'orders.check_job_id names the check job; timer_job_id is cleared');
SELECT results_eq(
    $$SELECT awaiting_check, overdue_orders FROM ordertimeout.sweep_stats$$,
    $$VALUES (1::bigint, 0::bigint)$$,
    'sweep_stats: one order awaiting its check, none overdue');
SELECT results_eq(
    $$SELECT claimed, cancelled, checks FROM ordertimeout.sweep_due()$$,
    $$VALUES (0, 0, 0)$$,
    'the next sweep leaves the order to its check (no second check, no fallback cancel)');

SELECT is(ordertimeout.cancel_checked('o1', 3), true, 'the gateway said not paid: cancel_checked cancels it');
SELECT is((SELECT (status, cancel_cause) FROM ordertimeout.order_info('o1')), ROW('CANCELLED'::text, 'timeout'::text),
    'cancelled as a timeout');

SELECT * FROM finish();
ROLLBACK;
