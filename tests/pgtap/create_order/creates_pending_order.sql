-- create_order places a PENDING order: reserves its stock, stores its items
-- sorted by sku, schedules its timeout as a River job row and logs an event.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(15);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10), ('B', 5);

CREATE TEMP TABLE placed AS
SELECT * FROM ordertimeout.create_order('o1', '[{"sku": "B", "qty": 2}, {"sku": "A", "qty": 1}]', interval '10 minutes');

SELECT is((SELECT status FROM placed), 'PENDING', 'the order is PENDING');
SELECT is((SELECT created FROM placed), true, 'created is true for the call that inserted it');
SELECT is((SELECT expire_at - created_at FROM placed), interval '10 minutes', 'expire_at = created_at + timeout');
SELECT is((SELECT cancel_at - expire_at FROM placed), interval '60 seconds', 'cancel_at = expire_at + grace (default 60 s)');
SELECT is((SELECT deadline_version FROM placed), 1, 'deadline version starts at 1');
SELECT is((SELECT items FROM placed), '[{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}]'::jsonb,
    'items are normalized and sorted by sku');

SELECT results_eq(
    $$SELECT sku, available::bigint, reserved::bigint, sold::bigint FROM ordertimeout.stock ORDER BY sku$$,
    $$VALUES ('A', 9::bigint, 1::bigint, 0::bigint), ('B', 3, 2, 0)$$,
    'stock moved from available to reserved');
SELECT results_eq(
    $$SELECT sku, qty FROM ordertimeout.order_items WHERE order_id = 'o1' ORDER BY sku$$,
    $$VALUES ('A', 1), ('B', 2)$$,
    'one order_items row per sku');

SELECT results_eq(
    $$SELECT kind, queue, state::text, args FROM public.river_job$$,
    $$VALUES ('ordertimeout_expire', 'ordertimeout_expire', 'available', '{"order_id": "o1", "version": 1}'::jsonb)$$,
    'one timer row: kind and queue ordertimeout_expire, available, args {order_id, version 1}');
SELECT is((SELECT r.scheduled_at FROM public.river_job AS r),
          (SELECT cancel_at FROM placed),
          'the timer row is scheduled at cancel_at');
SELECT is((SELECT r.id FROM public.river_job AS r), test.timer_of('o1'),
          'orders.timer_job_id names the timer row');
SELECT is((SELECT r.priority FROM public.river_job AS r), 1::smallint,
          'the timer row has priority 1 (the sweep''s index)');

SELECT results_eq(
    $$SELECT order_id, from_status, to_status, cause::text FROM ordertimeout.events$$,
    $$VALUES ('o1', NULL::text, 'PENDING', 'requested')$$,
    'one event: NULL -> PENDING, cause requested');
SELECT is((SELECT actor FROM ordertimeout.events), session_user::text, 'the event''s actor is the login role');
SELECT is((SELECT payment_attempted FROM placed), false, 'no payment attempted yet');

SELECT * FROM finish();
ROLLBACK;
