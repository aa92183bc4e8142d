-- begin_payment moves a PENDING order to PAYING: the timeout no longer
-- applies (its timer row is gone, the version is bumped) and a payment check
-- is scheduled at paying_until.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(12);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]');
SELECT test.timer_of('o1') AS old_timer \gset

CREATE TEMP TABLE paying AS SELECT * FROM ordertimeout.begin_payment('o1', 'p1', interval '5 minutes');

SELECT is((SELECT status FROM paying), 'PAYING', 'the order is PAYING');
SELECT is((SELECT deadline_version FROM paying), 2, 'the deadline version is bumped');
SELECT is((SELECT payment_attempted FROM paying), true, 'payment_attempted is set');
SELECT results_eq(
    $$SELECT payment_id, status::text FROM ordertimeout.payments WHERE order_id = 'o1'$$,
    $$VALUES ('p1', 'started')$$,
    'one payments row, started');
SELECT is((SELECT paying_until FROM paying) - (SELECT started_at FROM ordertimeout.payments),
          interval '5 minutes' + (SELECT grace FROM ordertimeout.settings), 'paying_until = start + paying_window + grace');
SELECT is_empty(format('SELECT 1 FROM public.river_job WHERE id = %s', :old_timer),
    'the old timer row is deleted');
SELECT is_empty($$SELECT 1 FROM public.river_job WHERE queue = 'ordertimeout_expire'$$,
    'no timer row is left for the order');
SELECT results_eq(
    $$SELECT kind, queue, state::text, args FROM public.river_job$$,
    $$VALUES ('ordertimeout_payment_check', 'ordertimeout', 'available', '{"order_id": "o1", "payment_id": "p1"}'::jsonb)$$,
    'one payment check job in queue ordertimeout with args {order_id, payment_id}');
SELECT is((SELECT scheduled_at FROM public.river_job), (SELECT paying_until FROM paying),
    'the payment check is scheduled at paying_until');
SELECT is((SELECT id FROM public.river_job), test.timer_of('o1'), 'orders.timer_job_id names the payment check');
SELECT results_eq(
    $$SELECT from_status, to_status, cause::text, detail ->> 'payment_id' FROM ordertimeout.events WHERE order_id = 'o1' ORDER BY event_id DESC LIMIT 1$$,
    $$VALUES ('PENDING', 'PAYING', 'payment', 'p1')$$,
    'an event PENDING -> PAYING, cause payment');

-- Without a window, the settings' paying_window applies.
SELECT ordertimeout.create_order('o2', '[{"sku": "A", "qty": 1}]');
SELECT is((SELECT gateway_expire_at - clock_timestamp() FROM ordertimeout.begin_payment('o2', 'p2')) BETWEEN interval '14 minutes' AND interval '15 minutes',
    true, 'the default paying_window is 15 minutes');

SELECT * FROM finish();
ROLLBACK;
