-- create_order with a coupon and points in options holds them for the order.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(8);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
INSERT INTO ordertimeout.points_accounts (account_id, balance) VALUES ('acct', 1000);

CREATE TEMP TABLE placed AS
SELECT * FROM ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', NULL,
    '{"coupon": "SPRING", "points_account": "acct", "points": 300, "amount": 9.90, "currency": "EUR"}');

SELECT is((SELECT (coupon_id, points_account, points, amount, currency) FROM placed),
          ROW('SPRING'::text, 'acct'::text, 300::bigint, 9.90::numeric, 'EUR'::text),
          'the order state shows coupon, points, amount and currency');
SELECT results_eq(
    $$SELECT order_id, coupon_id, used_at, released_at FROM ordertimeout.coupon_holds$$,
    $$VALUES ('o1', 'SPRING', NULL::timestamptz, NULL::timestamptz)$$,
    'the coupon is held by the order');
SELECT is((SELECT held_at FROM ordertimeout.coupon_holds), (SELECT created_at FROM placed),
          'held at the order''s creation');
SELECT results_eq(
    $$SELECT balance, held FROM ordertimeout.points_accounts WHERE account_id = 'acct'$$,
    $$VALUES (1000::bigint, 300::bigint)$$,
    'the points are held: balance unchanged, held + 300');
SELECT results_eq(
    $$SELECT order_id, account_id, points, used_at, released_at FROM ordertimeout.points_holds$$,
    $$VALUES ('o1', 'acct', 300::bigint, NULL::timestamptz, NULL::timestamptz)$$,
    'one points_holds row');

-- A second order may use the rest of the free points.
SELECT ordertimeout.create_order('o2', '[{"sku": "A", "qty": 1}]', NULL, '{"points_account": "acct", "points": 700}');
SELECT is((SELECT held FROM ordertimeout.points_accounts WHERE account_id = 'acct'), 1000::bigint,
          'all free points may be held');

-- Points written with decimals are the integer they stand for, as an item's
-- qty 2.0 is 2 (they were validated, then refused with 22P02).
INSERT INTO ordertimeout.points_accounts (account_id, balance) VALUES ('acct2', 1000);
SELECT is((SELECT points FROM ordertimeout.create_order('o3', '[{"sku": "A", "qty": 1}]', NULL,
              '{"points_account": "acct2", "points": 100.0}')),
          100::bigint, 'points 100.0 hold 100 points');
SELECT is((SELECT (points, created) FROM ordertimeout.create_order('o3', '[{"sku": "A", "qty": 1}]', NULL,
              '{"points_account": "acct2", "points": 100}')),
          ROW(100::bigint, false), 'and the same order with points 100 is a repeat of it');

SELECT * FROM finish();
ROLLBACK;
