-- create_order raises OT104 for an item that is not an object, has an
-- unknown key, or lacks a valid sku, writing nothing.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(9);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT test.snapshot() AS before \gset

SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '["A"]')$$,
    'OT104', NULL, 'an item that is a string: OT104');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}, null]')$$,
    'OT104', NULL, 'an item that is null: OT104');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1, "price": 3}]')$$,
    'OT104', NULL, 'an unknown key: OT104');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"qty": 1}]')$$,
    'OT104', NULL, 'a missing sku: OT104');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": 7, "qty": 1}]')$$,
    'OT104', NULL, 'a sku that is a number: OT104');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "", "qty": 1}]')$$,
    'OT104', NULL, 'an empty sku: OT104');
SELECT throws_ok(format('SELECT ordertimeout.create_order(''o1'', %L)',
                        jsonb_build_array(jsonb_build_object('sku', repeat('A', 65), 'qty', 1))),
    'OT104', NULL, 'a sku of 65 characters: OT104');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A\u0007", "qty": 1}]')$$,
    'OT104', NULL, 'a sku with a control character: OT104');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT * FROM finish();
ROLLBACK;
