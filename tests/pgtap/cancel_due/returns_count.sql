-- cancel_due runs the sweep and returns how many orders it cancelled; its max
-- is checked like sweep_due's.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(7);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.create_order('o2', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.create_order('o3', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.create_order('later', '[{"sku": "A", "qty": 1}]');
SELECT test.make_due('o1');
SELECT test.make_due('o2');
SELECT test.make_due('o3');

SELECT throws_ok($$SELECT ordertimeout.cancel_due(0)$$, 'OT140', NULL, 'max 0: OT140');
SELECT throws_ok($$SELECT ordertimeout.cancel_due(NULL)$$, 'OT100', NULL, 'max NULL: OT100');

SELECT is(ordertimeout.cancel_due(2), 2, 'max 2: cancels two');
SELECT is(ordertimeout.cancel_due(), 1, 'the default max takes the rest');
SELECT is(ordertimeout.cancel_due(), 0, 'then nothing is due');
SELECT results_eq(
    $$SELECT status::text, count(*)::integer FROM ordertimeout.orders GROUP BY status ORDER BY status$$,
    $$VALUES ('CANCELLED', 3), ('PENDING', 1)$$,
    'three cancelled, the later order PENDING');
SELECT results_eq(
    $$SELECT status::text, orders FROM ordertimeout.order_counts ORDER BY status$$,
    $$VALUES ('CANCELLED', 3::bigint), ('PENDING', 1)$$,
    'the view order_counts agrees');

SELECT * FROM finish();
ROLLBACK;
