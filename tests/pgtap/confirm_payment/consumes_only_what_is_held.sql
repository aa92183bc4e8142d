-- confirm_payment consumes what the paid order holds and nothing else: an
-- order with a coupon only, with points only, and with neither. The holds of
-- another order, still PENDING, stay as they were.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(9);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
INSERT INTO ordertimeout.points_accounts (account_id, balance) VALUES ('acct', 1000), ('other', 500);
SELECT ordertimeout.create_order('coupon_only', '[{"sku": "A", "qty": 1}]', NULL, '{"coupon": "C1"}');
SELECT ordertimeout.create_order('points_only', '[{"sku": "A", "qty": 1}]', NULL,
    '{"points_account": "acct", "points": 100}');
SELECT ordertimeout.create_order('neither', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.create_order('waiting', '[{"sku": "A", "qty": 1}]', NULL,
    '{"coupon": "C2", "points_account": "other", "points": 50}');

SELECT is(ordertimeout.confirm_payment('coupon_only', 'p1'), 'paid', 'the order with a coupon only is paid');
SELECT results_eq(
    $$SELECT used_at IS NOT NULL FROM ordertimeout.coupon_holds WHERE order_id = 'coupon_only'$$,
    $$VALUES (true)$$,
    'its coupon is used');

SELECT is(ordertimeout.confirm_payment('points_only', 'p2'), 'paid', 'the order with points only is paid');
SELECT results_eq(
    $$SELECT balance, held FROM ordertimeout.points_accounts WHERE account_id = 'acct'$$,
    $$VALUES (900::bigint, 0::bigint)$$,
    'its points are spent');

SELECT is(ordertimeout.confirm_payment('neither', 'p3'), 'paid', 'the order with neither is paid');
SELECT results_eq(
    $$SELECT available::bigint, reserved::bigint, sold::bigint FROM ordertimeout.stock$$,
    $$VALUES (6::bigint, 1::bigint, 3::bigint)$$,
    'the three paid orders'' stock is sold, the waiting order''s still reserved');

SELECT results_eq(
    $$SELECT used_at, released_at FROM ordertimeout.coupon_holds WHERE order_id = 'waiting'$$,
    $$VALUES (NULL::timestamptz, NULL::timestamptz)$$,
    'the waiting order''s coupon is still held');
SELECT results_eq(
    $$SELECT balance, held FROM ordertimeout.points_accounts WHERE account_id = 'other'$$,
    $$VALUES (500::bigint, 50::bigint)$$,
    'the waiting order''s points are still held');
SELECT is_empty(
    $$SELECT 1 FROM ordertimeout.points_holds WHERE order_id = 'waiting' AND used_at IS NOT NULL$$,
    'the waiting order''s points hold is not used');

SELECT * FROM finish();
ROLLBACK;
