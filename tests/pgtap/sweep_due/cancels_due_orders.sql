-- sweep_due cancels the orders whose timer row is due, as timeouts with their
-- lateness, releases their stock and deletes their timer rows; orders not yet
-- due and PAYING orders are left alone.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(9);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('due1', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.create_order('due2', '[{"sku": "A", "qty": 2}]');
SELECT ordertimeout.create_order('later', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.create_order('paying', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.begin_payment('paying', 'p1');
SELECT test.make_due('due1', interval '2 minutes');
SELECT test.make_due('due2', interval '1 minute');
SELECT test.make_due('paying', interval '5 minutes');   -- past cancel_at, but PAYING

SELECT results_eq(
    $$SELECT claimed, cancelled, caught_by_sweep, checks, moot, deferred FROM ordertimeout.sweep_due()$$,
    $$VALUES (2, 2, 0, 0, 0, 0)$$,
    'claims the two due timers and cancels their orders');
SELECT results_eq(
    $$SELECT order_id, status::text, cancel_cause::text FROM ordertimeout.orders ORDER BY order_id$$,
    $$VALUES ('due1', 'CANCELLED', 'timeout'), ('due2', 'CANCELLED', 'timeout'),
             ('later', 'PENDING', NULL), ('paying', 'PAYING', NULL)$$,
    'due orders cancelled as timeouts; the others untouched');
SELECT results_eq(
    $$SELECT order_id, cause::text, lateness >= interval '1 minute' AND lateness < interval '10 minutes'
        FROM ordertimeout.events WHERE to_status = 'CANCELLED' ORDER BY order_id$$,
    $$VALUES ('due1', 'timeout', true), ('due2', 'timeout', true)$$,
    'events cause timeout with their lateness');
SELECT ok((SELECT bool_and(e.lateness = o.cancelled_at - o.cancel_at)
             FROM ordertimeout.events AS e JOIN ordertimeout.orders AS o USING (order_id)
            WHERE e.to_status = 'CANCELLED'),
    'lateness = cancelled_at - cancel_at');
SELECT results_eq(
    $$SELECT available::bigint, reserved::bigint FROM ordertimeout.stock$$,
    $$VALUES (8::bigint, 2::bigint)$$,
    'the stock of the cancelled orders is released');
SELECT results_eq(
    $$SELECT args ->> 'order_id' FROM public.river_job WHERE queue = 'ordertimeout_expire'$$,
    $$VALUES ('later')$$,
    'the claimed timer rows are deleted; the later one stays');
SELECT results_eq(
    $$SELECT order_id, cause::text FROM ordertimeout.cancel_lag ORDER BY order_id$$,
    $$VALUES ('due1', 'timeout'), ('due2', 'timeout')$$,
    'the view cancel_lag lists both timeouts');

SELECT results_eq(
    $$SELECT claimed, cancelled FROM ordertimeout.sweep_due()$$,
    $$VALUES (0, 0)$$,
    'a second sweep finds nothing');
SELECT is((SELECT count(*)::integer FROM ordertimeout.releases), 2, 'released once: one ledger row per order');

SELECT * FROM finish();
ROLLBACK;
