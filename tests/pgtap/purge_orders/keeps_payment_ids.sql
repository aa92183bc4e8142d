-- A purged order's payment ids stay (purged_payments): its order id is free
-- again, and a callback of the old payment, coming after a new order took the
-- id, is refused (OT176) instead of paying the new order; reconcile_payments
-- reports it as other_order. A review reproduced the new order PAID by the
-- money of a late payment of the old one that a person had already handled.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(11);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('c1', '[{"sku":"A","qty":1}]');
SELECT ordertimeout.cancel_order('c1');
SELECT ordertimeout.confirm_payment('c1', 'c1-late');
SELECT ordertimeout.resolve_conflict(conflict_id, 'manual') FROM ordertimeout.conflicts;
SELECT ordertimeout.close_cancelled('0');
SELECT ordertimeout.create_order('c2', '[{"sku":"A","qty":1}]');
SELECT ordertimeout.begin_payment('c2', 'c2-pay');
SELECT ordertimeout.confirm_payment('c2', 'c2-pay');

SELECT is(ordertimeout.purge_orders('0', 10, paid_older_than => '0'), 2, 'both orders purged');
SELECT results_eq($$SELECT payment_id, order_id FROM ordertimeout.purged_payments ORDER BY 1$$,
    $$VALUES ('c1-late', 'c1'), ('c2-pay', 'c2')$$, 'their payment ids are kept, with their orders');

SELECT is((ordertimeout.create_order('c1', '[{"sku":"A","qty":1}]')).status, 'PENDING', 'the id c1 is free again');
SELECT throws_like($$SELECT ordertimeout.confirm_payment('c1', 'c1-late')$$,
    'payment_id "c1-late" was of order "c1", purged at %: it is not a payment of order "c1" (a person checks it at the gateway)',
    'the old payment again: OT176');
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('c1', 'c1-late')$$, 'OT176', NULL, 'with its own code');
SELECT is((SELECT status FROM ordertimeout.orders WHERE order_id = 'c1'), 'PENDING', 'the new order is not paid');
SELECT is((SELECT count(*)::int FROM ordertimeout.payments), 0, 'no payment row written');
SELECT results_eq(
    $$SELECT outcome, detail LIKE 'payment c1-late was of order c1, purged at %: not a payment of order c1 here'
        FROM ordertimeout.reconcile_payments(
            jsonb_build_array(jsonb_build_object('line', 1, 'payment_id', 'c1-late', 'order_id', 'c1', 'status', 'paid',
                                                 'amount', '10', 'currency', 'EUR', 'at', now())),
            now() - interval '1 day', now() + interval '1 minute')$$,
    $$VALUES ('other_order', true)$$, 'reconcile reports it as other_order');
SELECT is((SELECT status FROM ordertimeout.orders WHERE order_id = 'c1'), 'PENDING', 'and does not pay the new order either');

SELECT throws_ok($$SELECT ordertimeout.begin_payment('c1', 'c1-late')$$, 'OT176', NULL,
    'nor can a new attempt of the new order take the old id (its callback would pay it)');
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('c1', 'c1-late')$$, 'OT176', NULL, 'so the old callback is still refused');

SELECT * FROM finish();
ROLLBACK;
