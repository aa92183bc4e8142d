-- An order cancelled by cancel_order while a payment method's window is
-- still open at the gateway (bank_transfer: three days) may still get that
-- money, a late payment that must find its order. purge_orders keeps it,
-- CLOSED and old enough, until the window (and the grace) has ended. Before
-- migration 000057 it was purged at once, and the transfer's confirmation
-- then raised OT120 (unknown order): money without an order.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(4);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('g1', '[{"sku": "A", "qty": 1}]', interval '30 minutes', '{"amount":10,"currency":"EUR"}');
SELECT ordertimeout.begin_payment('g1', 'g1-bt', method => 'bank_transfer');
SELECT ordertimeout.fail_payment('g1', 'g1-bt');
SELECT ok(ordertimeout.cancel_order('g1', 'buyer gave up'), 'cancelled by request inside the window');
SELECT ordertimeout.close_cancelled(interval '0');
UPDATE ordertimeout.orders SET closed_at = closed_at - interval '1 day' WHERE order_id = 'g1';

SELECT is(ordertimeout.purge_orders(interval '1 hour', 1000), 0, 'CLOSED and old enough, but its window is open: kept');
SELECT is(ordertimeout.confirm_payment('g1', 'g1-credit', 10, 'EUR'), 'conflict', 'the transfer finds its order: a late payment');

-- The window over (and the grace), a CLOSED order goes.
SELECT ordertimeout.resolve_conflict(conflict_id, 'manual') FROM ordertimeout.conflicts WHERE order_id = 'g1';
SELECT ordertimeout.close_cancelled(interval '0');
UPDATE ordertimeout.orders
   SET gateway_expire_at = now() - interval '1 day', closed_at = closed_at - interval '1 day'
 WHERE order_id = 'g1';
SELECT is(ordertimeout.purge_orders(interval '1 hour', 1000), 1, 'purged once the window has ended');

SELECT * FROM finish();
ROLLBACK;
