-- fail_payment on the only started attempt moves the order back to PENDING and
-- gives it a new timer row for the new version, due at its cancel_at.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(8);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.begin_payment('o1', 'p1');

SELECT is(ordertimeout.fail_payment('o1', 'p1'), 'pending', 'returns pending');
SELECT is((SELECT (status, deadline_version, paying_until, payment_attempted) FROM ordertimeout.order_info('o1')),
          ROW('PENDING'::text, 3, NULL::timestamptz, true), 'PENDING again at version 3, paying_until cleared');
SELECT results_eq(
    $$SELECT status::text, failed_at IS NOT NULL FROM ordertimeout.payments$$,
    $$VALUES ('failed', true)$$,
    'the payment is failed');
SELECT results_eq(
    $$SELECT kind, state::text, args FROM public.river_job WHERE queue = 'ordertimeout_expire'$$,
    $$VALUES ('ordertimeout_expire', 'available', '{"order_id": "o1", "version": 3}'::jsonb)$$,
    'one timer row, for version 3');
SELECT is((SELECT scheduled_at FROM public.river_job WHERE queue = 'ordertimeout_expire'),
          (SELECT cancel_at FROM ordertimeout.orders), 'scheduled at the order''s cancel_at');
SELECT is(test.timer_of('o1'), (SELECT id FROM public.river_job WHERE queue = 'ordertimeout_expire'),
    'timer_job_id names the new timer row');
SELECT results_eq(
    $$SELECT from_status, to_status, cause::text FROM ordertimeout.events ORDER BY event_id DESC LIMIT 1$$,
    $$VALUES ('PAYING', 'PENDING', 'payment')$$,
    'an event PAYING -> PENDING');

-- The timeout applies again: once due, the sweep cancels the order.
SELECT test.make_due('o1');
SELECT ordertimeout.configure(precheck => 'never');
SELECT is((SELECT cancelled FROM ordertimeout.sweep_due()), 1, 'the new timer cancels the order once due');

SELECT * FROM finish();
ROLLBACK;
