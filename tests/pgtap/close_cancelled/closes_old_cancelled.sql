-- close_cancelled moves CANCELLED orders cancelled longer ago than older_than
-- to CLOSED, at most max of them, skipping orders with an open conflict.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(8);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order(id, '[{"sku": "A", "qty": 1}]')
FROM unnest(ARRAY['old1', 'old2', 'recent', 'conflict', 'pending']) AS id;
SELECT ordertimeout.cancel_order(id) FROM unnest(ARRAY['old1', 'old2', 'recent', 'conflict']) AS id;
SELECT ordertimeout.confirm_payment('conflict', 'p1');     -- a late payment: open conflict
UPDATE ordertimeout.orders SET cancelled_at = cancelled_at - interval '3 days' WHERE order_id = 'old1';
UPDATE ordertimeout.orders SET cancelled_at = cancelled_at - interval '2 days' WHERE order_id IN ('old2', 'conflict');

SELECT is(ordertimeout.close_cancelled(interval '1 day', 1), 1, 'max 1: closes one');
SELECT is((SELECT status FROM ordertimeout.orders WHERE order_id = 'old1'), 'CLOSED', 'the oldest first');
SELECT is(ordertimeout.close_cancelled(interval '1 day'), 1, 'then the other old one; the one with an open conflict is skipped');
SELECT results_eq(
    $$SELECT order_id, status::text, closed_at IS NOT NULL FROM ordertimeout.orders ORDER BY order_id$$,
    $$VALUES ('conflict', 'CANCELLED', false), ('old1', 'CLOSED', true), ('old2', 'CLOSED', true),
             ('pending', 'PENDING', false), ('recent', 'CANCELLED', false)$$,
    'only old CANCELLED orders without an open conflict are CLOSED');
SELECT results_eq(
    $$SELECT order_id, from_status, to_status, cause::text FROM ordertimeout.events WHERE to_status = 'CLOSED' ORDER BY order_id$$,
    $$VALUES ('old1', 'CANCELLED', 'CLOSED', 'admin'), ('old2', 'CANCELLED', 'CLOSED', 'admin')$$,
    'an event per closed order, cause admin');

SELECT is(ordertimeout.close_cancelled(interval '0'), 1, 'older_than 0 closes the recent one too');
SELECT ordertimeout.resolve_conflict((SELECT conflict_id FROM ordertimeout.conflicts), 'refund');
SELECT is(ordertimeout.close_cancelled(interval '1 day'), 0, 'nor while its conflict is being refunded');
SELECT ordertimeout.finish_refund((SELECT conflict_id FROM ordertimeout.conflicts), 'R1');
SELECT is(ordertimeout.close_cancelled(interval '1 day'), 1, 'once its conflict is resolved, the order is closed');

SELECT * FROM finish();
ROLLBACK;
