-- create_order raises OT100 for a NULL order_id or NULL items, writing nothing.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(3);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT test.snapshot() AS before \gset

SELECT throws_ok($$SELECT ordertimeout.create_order(NULL, '[{"sku": "A", "qty": 1}]')$$,
    'OT100', NULL, 'order_id NULL: OT100');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', NULL)$$,
    'OT100', NULL, 'items NULL: OT100');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT * FROM finish();
ROLLBACK;
