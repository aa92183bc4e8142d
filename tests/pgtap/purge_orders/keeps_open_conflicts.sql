-- purge_orders never deletes an order with an open conflict: a late payment
-- on a CLOSED order (which moves it back to CANCELLED), a double payment on a
-- PAID one. Once resolved (and the order closed again), the order goes with
-- its conflict.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(6);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order(id, '[{"sku": "A", "qty": 1}]') FROM unnest(ARRAY['late', 'double']) AS id;
SELECT ordertimeout.cancel_order('late');
SELECT ordertimeout.close_cancelled(interval '0');
SELECT is(ordertimeout.confirm_payment('late', 'p-late'), 'conflict', 'money for a CLOSED order: a conflict');
SELECT ordertimeout.confirm_payment('double', 'p1');
SELECT is(ordertimeout.confirm_payment('double', 'p2'), 'conflict', 'a second payment: a conflict');
UPDATE ordertimeout.orders SET cancelled_at = cancelled_at - interval '1 year' WHERE order_id = 'late';
UPDATE ordertimeout.orders SET paid_at = paid_at - interval '1 year' WHERE order_id = 'double';

SELECT is(ordertimeout.purge_orders(interval '1 day', 1000, interval '1 day'), 0,
    'both are old enough, but their conflicts are open');

SELECT ordertimeout.resolve_conflict(conflict_id, 'refund') FROM ordertimeout.conflicts WHERE order_id = 'late';
SELECT ordertimeout.finish_refund(conflict_id, 'R-late') FROM ordertimeout.conflicts WHERE order_id = 'late';
SELECT ordertimeout.close_cancelled(interval '0');
UPDATE ordertimeout.orders SET closed_at = closed_at - interval '1 year' WHERE order_id = 'late';
SELECT is(ordertimeout.purge_orders(interval '1 day', 1000, interval '1 day'), 1,
    'the CLOSED order goes once its conflict is resolved');
SELECT ordertimeout.resolve_conflict(conflict_id, 'manual') FROM ordertimeout.conflicts WHERE order_id = 'double';
SELECT is(ordertimeout.purge_orders(interval '1 day', 1000, interval '1 day'), 1,
    'and the PAID one once its conflict is resolved');
SELECT is_empty($$SELECT * FROM ordertimeout.conflicts$$, 'the resolved conflicts went with their orders');

SELECT * FROM finish();
ROLLBACK;
