-- purge_orders deletes CLOSED orders closed longer ago than closed_older_than,
-- oldest first, at most max, with every row about them; PAID orders only with
-- paid_older_than; never a live order. The hold of a spent coupon stays.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(18);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 100), ('B', 100);
INSERT INTO ordertimeout.points_accounts (account_id, balance) VALUES ('acct', 1000);
SELECT ordertimeout.create_order(id, '[{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}]')
FROM unnest(ARRAY['closed1', 'closed2', 'closed_new', 'cancelled', 'pending', 'paying', 'paid']) AS id;
SELECT ordertimeout.create_order('closed3', '[{"sku": "A", "qty": 1}]', NULL,
    '{"coupon": "C0", "points_account": "acct", "points": 100}');
SELECT ordertimeout.create_order('paid_coupon', '[{"sku": "A", "qty": 1}]', NULL,
    '{"coupon": "C1", "points_account": "acct", "points": 200}');
-- closed1 had a failed payment attempt, then timed out.
SELECT ordertimeout.begin_payment('closed1', 'p-closed1');
SELECT ordertimeout.fail_payment('closed1', 'p-closed1');
SELECT ordertimeout.begin_payment('paying', 'p-paying');
SELECT ordertimeout.confirm_payment('paid', 'p-paid');
SELECT ordertimeout.confirm_payment('paid_coupon', 'p-paid-coupon');
SELECT ordertimeout.cancel_order(id) FROM unnest(ARRAY['closed1', 'closed2', 'closed3', 'closed_new', 'cancelled']) AS id;
SELECT ordertimeout.close_cancelled(interval '0');
-- Ages: closed3 was closed first, then closed1, then closed2.
UPDATE ordertimeout.orders SET closed_at = closed_at - interval '300 days' WHERE order_id = 'closed3';
UPDATE ordertimeout.orders SET closed_at = closed_at - interval '200 days',
                               gateway_expire_at = gateway_expire_at - interval '200 days' WHERE order_id = 'closed1';
UPDATE ordertimeout.orders SET closed_at = closed_at - interval '100 days' WHERE order_id = 'closed2';
UPDATE ordertimeout.orders SET status = 'CANCELLED', closed_at = NULL, cancelled_at = cancelled_at - interval '300 days'
WHERE order_id = 'cancelled';
UPDATE ordertimeout.orders SET paid_at = paid_at - interval '400 days', created_at = created_at - interval '400 days',
                               expire_at = expire_at - interval '400 days', cancel_at = cancel_at - interval '400 days',
                               gateway_expire_at = gateway_expire_at - interval '400 days'
WHERE order_id IN ('paid', 'paid_coupon', 'pending', 'paying');
SELECT test.snapshot() -> 'ordertimeout.stock' AS stock_before \gset
SELECT test.snapshot() -> 'ordertimeout.points_accounts' AS points_before \gset

SELECT is(ordertimeout.purge_orders(interval '90 days', 2), 2, 'max 2: two orders purged');
SELECT results_eq(
    $$SELECT order_id FROM ordertimeout.orders WHERE status = 'CLOSED' ORDER BY order_id$$,
    $$VALUES ('closed2'), ('closed_new')$$,
    'the oldest first: closed3 and closed1 are gone');
SELECT is(ordertimeout.purge_orders(interval '90 days'), 1, 'then the last one older than 90 days');
SELECT is(ordertimeout.purge_orders(interval '90 days'), 0, 'nothing more is old enough');

SELECT results_eq(
    $$SELECT order_id, status::text FROM ordertimeout.orders ORDER BY order_id$$,
    $$VALUES ('cancelled', 'CANCELLED'), ('closed_new', 'CLOSED'), ('paid', 'PAID'),
             ('paid_coupon', 'PAID'), ('paying', 'PAYING'), ('pending', 'PENDING')$$,
    'live, CANCELLED, recently CLOSED and PAID orders stay');

-- Nothing about a purged order is left.
SELECT is_empty($$SELECT order_id FROM ordertimeout.order_items WHERE order_id LIKE 'closed_' $$, 'no items left');
SELECT is_empty($$SELECT order_id FROM ordertimeout.payments WHERE order_id LIKE 'closed_' $$, 'no payments left');
SELECT is_empty($$SELECT order_id FROM ordertimeout.releases WHERE order_id LIKE 'closed_' $$, 'no releases left');
SELECT is_empty($$SELECT order_id FROM ordertimeout.events WHERE order_id LIKE 'closed_' $$, 'no events left');
SELECT is_empty(
    $$SELECT order_id FROM ordertimeout.coupon_holds WHERE order_id LIKE 'closed_'
      UNION ALL SELECT order_id FROM ordertimeout.points_holds WHERE order_id LIKE 'closed_'$$,
    'no released coupon or points holds left');
SELECT is(test.snapshot() -> 'ordertimeout.stock', :'stock_before'::jsonb, 'stock is untouched');

-- Paid orders only with their own retention.
SELECT is(ordertimeout.purge_orders(interval '0', 1000, interval '500 days'), 1,
    'paid_older_than 500 days: only closed_new, closed just now');
SELECT is(ordertimeout.purge_orders(interval '0', 1000, interval '365 days'), 2,
    'paid_older_than 365 days: both paid orders');
SELECT results_eq(
    $$SELECT order_id FROM ordertimeout.orders ORDER BY order_id$$,
    $$VALUES ('cancelled'), ('paying'), ('pending')$$,
    'only the live and the CANCELLED orders are left');
SELECT results_eq(
    $$SELECT sku, qty FROM ordertimeout.purged_sales ORDER BY sku$$,
    $$VALUES ('A', 2::bigint), ('B', 2::bigint)$$,
    'what the two paid orders bought is in purged_sales; the closed ones bought nothing');
SELECT results_eq(
    $$SELECT s.sku, s.sold::bigint FROM ordertimeout.stock AS s ORDER BY s.sku$$,
    $$SELECT sku, qty FROM ordertimeout.purged_sales ORDER BY sku$$,
    'stock.sold is what they bought: no paid order is left');
SELECT results_eq(
    $$SELECT order_id, coupon_id, used_at IS NOT NULL FROM ordertimeout.coupon_holds ORDER BY order_id$$,
    $$VALUES ('paid_coupon', 'C1', true)$$,
    'the hold of the spent coupon stays: it keeps the coupon from being used again');
SELECT throws_ok(
    $$SELECT ordertimeout.create_order('again', '[{"sku": "A", "qty": 1}]', NULL, '{"coupon": "C1"}')$$,
    'OT110', NULL, 'the spent coupon cannot be held by a new order');

SELECT * FROM finish();
ROLLBACK;
