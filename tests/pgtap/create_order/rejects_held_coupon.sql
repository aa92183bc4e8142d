-- create_order raises OT110 for a coupon that another live order holds; a
-- coupon released by a cancelled order can be used again, a used one cannot.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(6);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', NULL, '{"coupon": "C1"}');
SELECT test.snapshot() AS before \gset

SELECT throws_ok($$SELECT ordertimeout.create_order('o2', '[{"sku": "A", "qty": 1}]', NULL, '{"coupon": "C1"}')$$,
    'OT110', NULL, 'a coupon held by a PENDING order: OT110');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written: no stock reserved for o2');

SELECT ok(ordertimeout.cancel_order('o1'), 'o1 cancelled');
SELECT is((ordertimeout.create_order('o2', '[{"sku": "A", "qty": 1}]', NULL, '{"coupon": "C1"}')).status, 'PENDING',
    'the released coupon is held by a new order');

SELECT ordertimeout.confirm_payment('o2', 'p2');
SELECT throws_ok($$SELECT ordertimeout.create_order('o3', '[{"sku": "A", "qty": 1}]', NULL, '{"coupon": "C1"}')$$,
    'OT110', NULL, 'a coupon used by a paid order: OT110');
SELECT results_eq(
    $$SELECT order_id, released_at IS NOT NULL, used_at IS NOT NULL FROM ordertimeout.coupon_holds ORDER BY order_id$$,
    $$VALUES ('o1', true, false), ('o2', false, true)$$,
    'o1 released the coupon, o2 used it');

SELECT * FROM finish();
ROLLBACK;
