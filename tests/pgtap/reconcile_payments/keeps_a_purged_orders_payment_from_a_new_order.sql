-- An order cancelled, closed and purged, whose buyer's payment never reached
-- this database (a lost callback), and a new order given the same id soon
-- after: the gateway lists that payment under the id, taken before the new
-- order was created but less than 5 minutes before. reconcile_payments
-- reports it as other_order (purged_orders) instead of paying the new order
-- with the earlier buyer's money, which a review reproduced. A payment taken
-- more than 5 minutes after the purge is the new order's. purge_orders keeps
-- a record an hour, or while an order given the id within 10 minutes of the
-- purge lives.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(10);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('RX', '[{"sku":"A","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}');
SELECT ordertimeout.cancel_order('RX');
SELECT ordertimeout.close_cancelled('0');
SELECT is(ordertimeout.purge_orders('0', 10), 1, 'the first RX is purged');
SELECT purged_at AS purged FROM ordertimeout.purged_orders WHERE order_id = 'RX' \gset
SELECT ok(:'purged'::timestamptz IS NOT NULL, 'its id is recorded with the moment');
SELECT ordertimeout.create_order('RX', '[{"sku":"A","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}');

SELECT results_eq(
    format($$SELECT outcome, detail LIKE 'paid at the gateway at %%, before order RX was purged at %% and given again (order created %%): a payment of the purged order?'
               FROM ordertimeout.reconcile_payments(
                   jsonb_build_array(jsonb_build_object('line', 1, 'payment_id', 'PAY-OLD', 'order_id', 'RX', 'status', 'paid',
                                                        'amount', '10', 'currency', 'EUR', 'at', %L::timestamptz - interval '1 minute')),
                   now() - interval '1 day', now() + interval '1 hour')$$, :'purged'),
    $$VALUES ('other_order', true)$$, 'a payment taken before the purge: other_order, the purge named');
SELECT is((SELECT status FROM ordertimeout.orders WHERE order_id = 'RX'), 'PENDING', 'the new order is not paid with it');
SELECT is((SELECT count(*)::int FROM ordertimeout.payments), 0, 'no payment row written');
SELECT is((SELECT outcome FROM ordertimeout.reconcile_payments(
               jsonb_build_array(jsonb_build_object('line', 1, 'payment_id', 'PAY-OLD2', 'order_id', 'RX', 'status', 'paid',
                                                    'amount', '10', 'currency', 'EUR', 'at', :'purged'::timestamptz + interval '4 minutes')),
               now() - interval '1 day', now() + interval '1 hour')),
    'other_order', 'within the 5 minutes two clocks may differ: still not confirmed');
SELECT is((SELECT outcome FROM ordertimeout.reconcile_payments(
               jsonb_build_array(jsonb_build_object('line', 1, 'payment_id', 'PAY-NEW', 'order_id', 'RX', 'status', 'paid',
                                                    'amount', '10', 'currency', 'EUR', 'at', :'purged'::timestamptz + interval '6 minutes')),
               now() - interval '1 day', now() + interval '1 hour')),
    'confirmed', 'taken more than 5 minutes after the purge: the new order''s own lost callback');
SELECT is((SELECT status FROM ordertimeout.orders WHERE order_id = 'RX'), 'PAID', 'and it pays the new order');

-- Records an hour old: one whose id no order took goes with the next purge;
-- one whose id an order took within 10 minutes of its purge stays; one 30
-- minutes old stays (a create_order begun within its 10 minutes may not have
-- committed yet).
INSERT INTO ordertimeout.purged_orders (order_id, purged_at)
VALUES ('gone', clock_timestamp() - interval '61 minutes'), ('recent', clock_timestamp() - interval '30 minutes');
UPDATE ordertimeout.purged_orders SET purged_at = purged_at - interval '61 minutes' WHERE order_id = 'RX';
UPDATE ordertimeout.orders
   SET created_at = created_at - interval '61 minutes', expire_at = expire_at - interval '61 minutes',
       cancel_at = cancel_at - interval '61 minutes'
 WHERE order_id = 'RX';
SELECT ordertimeout.create_order('Z', '[{"sku":"A","qty":1}]');
SELECT ordertimeout.cancel_order('Z');
SELECT ordertimeout.close_cancelled('0');
SELECT is(ordertimeout.purge_orders('0', 10), 1, 'another purge');
SELECT results_eq($$SELECT order_id FROM ordertimeout.purged_orders ORDER BY 1$$, $$VALUES ('RX'), ('Z'), ('recent')$$,
    'the hour-old record nobody reused is gone; the reused one, the 30-minute-old one and the new one stay');

SELECT * FROM finish();
ROLLBACK;
