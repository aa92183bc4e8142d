-- cancel_order's errors: OT144 bad reason, OT100 NULL, OT101, OT120; none
-- writes anything.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(8);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]');
SELECT test.snapshot() AS before \gset

SELECT throws_ok($$SELECT ordertimeout.cancel_order('o1', '')$$, 'OT144', NULL, 'empty reason: OT144');
SELECT throws_ok(format('SELECT ordertimeout.cancel_order(''o1'', %L)', repeat('r', 201)), 'OT144', NULL,
    'reason of 201 characters: OT144');
SELECT throws_ok($$SELECT ordertimeout.cancel_order('o1', NULL)$$, 'OT100', NULL, 'reason NULL: OT100');
SELECT throws_ok($$SELECT ordertimeout.cancel_order(NULL)$$, 'OT100', NULL, 'order_id NULL: OT100');
SELECT throws_ok($$SELECT ordertimeout.cancel_order('')$$, 'OT101', NULL, 'empty order_id: OT101');
SELECT throws_ok($$SELECT ordertimeout.cancel_order('nope')$$, 'OT120', NULL, 'unknown order: OT120');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');
SELECT is(ordertimeout.cancel_order('o1', repeat('r', 200)), true, 'a reason of 200 characters is fine');

SELECT * FROM finish();
ROLLBACK;
