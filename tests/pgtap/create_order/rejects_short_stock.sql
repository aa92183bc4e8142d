-- create_order raises OT109 when a sku has not enough stock; the order is all
-- or nothing: the other skus of the order stay untouched.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(5);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10), ('B', 3);
SELECT test.snapshot() AS before \gset

SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 5}, {"sku": "B", "qty": 4}]')$$,
    'OT109', NULL, '4 of B with 3 available: OT109');
SELECT results_eq(
    $$SELECT sku, available::bigint, reserved::bigint FROM ordertimeout.stock ORDER BY sku$$,
    $$VALUES ('A', 10::bigint, 0::bigint), ('B', 3, 0)$$,
    'A is not reserved either: all or nothing');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT lives_ok($$SELECT ordertimeout.create_order('o2', '[{"sku": "B", "qty": 3}]')$$,
    'exactly the available stock is fine');
SELECT throws_ok($$SELECT ordertimeout.create_order('o3', '[{"sku": "B", "qty": 1}]')$$,
    'OT109', NULL, 'reserved stock is not available: OT109');

SELECT * FROM finish();
ROLLBACK;
