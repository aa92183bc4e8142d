-- create_order raises OT102 when items is not a JSON array and OT103 when it
-- has no entry or more than 100, writing nothing.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(6);

INSERT INTO ordertimeout.stock (sku, available)
SELECT 'S' || i, 10 FROM generate_series(1, 101) AS i;
SELECT test.snapshot() AS before \gset

SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '{"sku": "S1", "qty": 1}')$$,
    'OT102', NULL, 'an object instead of an array: OT102');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '"S1"')$$,
    'OT102', NULL, 'a string instead of an array: OT102');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[]')$$,
    'OT103', NULL, 'an empty array: OT103');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1',
        (SELECT jsonb_agg(jsonb_build_object('sku', 'S' || i, 'qty', 1)) FROM generate_series(1, 101) AS i))$$,
    'OT103', NULL, '101 items: OT103');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT lives_ok($$SELECT ordertimeout.create_order('o1',
        (SELECT jsonb_agg(jsonb_build_object('sku', 'S' || i, 'qty', 1)) FROM generate_series(1, 100) AS i))$$,
    '100 items are fine');

SELECT * FROM finish();
ROLLBACK;
