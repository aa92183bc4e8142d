-- create_order raises OT101 for an order_id that is empty, longer than 64
-- characters or holds a control character, writing nothing.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(5);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT test.snapshot() AS before \gset

SELECT throws_ok($$SELECT ordertimeout.create_order('', '[{"sku": "A", "qty": 1}]')$$,
    'OT101', NULL, 'empty order_id: OT101');
SELECT throws_ok(format('SELECT ordertimeout.create_order(%L, ''[{"sku": "A", "qty": 1}]'')', repeat('x', 65)),
    'OT101', NULL, '65 characters: OT101');
SELECT throws_ok($$SELECT ordertimeout.create_order(E'o\n1', '[{"sku": "A", "qty": 1}]')$$,
    'OT101', NULL, 'a control character: OT101');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT lives_ok(format('SELECT ordertimeout.create_order(%L, ''[{"sku": "A", "qty": 1}]'')', repeat('é', 64)),
    '64 characters (not bytes) are fine');

SELECT * FROM finish();
ROLLBACK;
