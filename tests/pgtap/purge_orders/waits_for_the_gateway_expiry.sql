-- A PAID order with another payment attempt still open (started) is not
-- purged before its gateway_expire_at is as old as paid_older_than: that
-- attempt may still bring money, which must find its order and become a
-- double_payment conflict, not OT120 (before migration 000030 a short
-- paid_older_than purged it, and the money was refused as an unknown order).
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(6);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.configure(grace => '60 seconds');
SELECT ordertimeout.create_order(id, '[{"sku":"A","qty":1}]', NULL, '{"amount":5,"currency":"EUR"}')
FROM unnest(ARRAY['open', 'done']) AS id;
-- open: a bank transfer of three days started, then paid by card.
SELECT ordertimeout.begin_payment('open', 'open-bank', '3 days');
SELECT ordertimeout.confirm_payment('open', 'open-card', 5, 'EUR');
-- done: paid by the attempt it started, none other open.
SELECT ordertimeout.begin_payment('done', 'done-card', '3 days');
SELECT ordertimeout.confirm_payment('done', 'done-card', 5, 'EUR');
UPDATE ordertimeout.orders SET paid_at = paid_at - interval '2 days';

SELECT is(ordertimeout.purge_orders(interval '1 day', 1000, interval '1 day'), 1,
    'one order purged: the one whose only attempt paid it, though its gateway expiry is to come');
SELECT results_eq($$SELECT order_id FROM ordertimeout.orders$$, $$VALUES ('open')$$,
    'the order whose bank transfer may still come stays');
-- The transfer's expiry passed 30 s before the cut: within the grace (60 s)
-- a callback may still come.
UPDATE ordertimeout.orders SET gateway_expire_at = now() - interval '1 day 30 seconds' WHERE order_id = 'open';
SELECT is(ordertimeout.purge_orders(interval '1 day', 1000, interval '1 day'), 0,
    'the gateway''s expiry 30 s older than the cut: still within the grace (60 s), kept');
SELECT is(ordertimeout.confirm_payment('open', 'open-bank', 5, 'EUR'), 'conflict',
    'the transfer comes: a conflict, not OT120');
SELECT results_eq($$SELECT kind FROM ordertimeout.conflicts WHERE order_id = 'open'$$, $$VALUES ('double_payment')$$,
    'a double payment, for a person to refund');

SELECT ordertimeout.resolve_conflict(conflict_id, 'manual', 'refunded by hand') FROM ordertimeout.conflicts WHERE order_id = 'open';
UPDATE ordertimeout.orders SET gateway_expire_at = now() - interval '2 days', paid_at = now() - interval '3 days'
WHERE order_id = 'open';
SELECT is(ordertimeout.purge_orders(interval '1 day', 1000, interval '1 day'), 1,
    'once the gateway''s expiry is as old as the retention, it goes');

SELECT * FROM finish();
ROLLBACK;
