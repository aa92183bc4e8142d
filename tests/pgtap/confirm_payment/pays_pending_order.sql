-- confirm_payment on a PENDING order (no begin_payment) marks it PAID and
-- turns its reservations into sales: stock reserved -> sold, coupon used,
-- points spent (balance and held both go down).
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(11);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10), ('B', 10);
INSERT INTO ordertimeout.points_accounts (account_id, balance) VALUES ('acct', 1000);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 2}, {"sku": "B", "qty": 1}]', NULL,
    '{"coupon": "C1", "points_account": "acct", "points": 300, "amount": 20}');

SELECT is(ordertimeout.confirm_payment('o1', 'p1', 20), 'paid', 'returns paid');
SELECT is((SELECT (status, deadline_version, paying_until) FROM ordertimeout.order_info('o1')),
          ROW('PAID'::text, 2, NULL::timestamptz), 'the order is PAID, version bumped');
SELECT isnt((SELECT paid_at FROM ordertimeout.orders WHERE order_id = 'o1'), NULL, 'paid_at is set');
SELECT results_eq(
    $$SELECT sku, available::bigint, reserved::bigint, sold::bigint FROM ordertimeout.stock ORDER BY sku$$,
    $$VALUES ('A', 8::bigint, 0::bigint, 2::bigint), ('B', 9, 0, 1)$$,
    'reserved stock is sold');
SELECT results_eq(
    $$SELECT used_at IS NOT NULL, released_at IS NULL FROM ordertimeout.coupon_holds WHERE order_id = 'o1'$$,
    $$VALUES (true, true)$$,
    'the coupon is used');
SELECT results_eq(
    $$SELECT balance, held FROM ordertimeout.points_accounts WHERE account_id = 'acct'$$,
    $$VALUES (700::bigint, 0::bigint)$$,
    'the points are spent: balance and held both down by 300');
SELECT isnt((SELECT used_at FROM ordertimeout.points_holds WHERE order_id = 'o1'), NULL, 'the points hold is used');
SELECT results_eq(
    $$SELECT payment_id, status::text, amount::numeric FROM ordertimeout.payments$$,
    $$VALUES ('p1', 'confirmed', 20::numeric)$$,
    'a confirmed payments row');
SELECT is_empty($$SELECT 1 FROM public.river_job WHERE queue = 'ordertimeout_expire'$$, 'the timer row is deleted');
SELECT results_eq(
    $$SELECT from_status, to_status, cause::text FROM ordertimeout.events ORDER BY event_id DESC LIMIT 1$$,
    $$VALUES ('PENDING', 'PAID', 'payment')$$,
    'an event PENDING -> PAID, cause payment');
SELECT is_empty($$SELECT 1 FROM ordertimeout.releases$$, 'nothing is released');

SELECT * FROM finish();
ROLLBACK;
