-- create_order raises OT107 for a sku listed twice and OT108 for a sku that
-- has no stock row, writing nothing.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(4);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10), ('B', 10);
SELECT test.snapshot() AS before \gset

SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}, {"sku": "B", "qty": 1}, {"sku": "A", "qty": 2}]')$$,
    'OT107', NULL, 'sku A twice: OT107');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "Z", "qty": 1}]')$$,
    'OT108', NULL, 'unknown sku: OT108');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}, {"sku": "Z", "qty": 1}]')$$,
    'OT108', NULL, 'one known and one unknown sku: OT108');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written: the known sku is not reserved');

SELECT * FROM finish();
ROLLBACK;
