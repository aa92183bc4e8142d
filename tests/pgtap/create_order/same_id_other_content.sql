-- create_order with an existing order_id and other content raises OT115 and
-- writes nothing: other items, another qty, another timeout, other options.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(6);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10), ('B', 5);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', interval '10 minutes', '{"amount": 5}');
SELECT test.snapshot() AS before \gset

SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "B", "qty": 1}]', interval '10 minutes', '{"amount": 5}')$$,
    'OT115', NULL, 'another sku: OT115');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 2}]', interval '10 minutes', '{"amount": 5}')$$,
    'OT115', NULL, 'another qty: OT115');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', interval '11 minutes', '{"amount": 5}')$$,
    'OT115', NULL, 'another timeout: OT115');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', NULL, '{"amount": 5}')$$,
    'OT115', NULL, 'the default timeout instead of an explicit one: OT115');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', interval '10 minutes', '{"amount": 6}')$$,
    'OT115', NULL, 'other options: OT115');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT * FROM finish();
ROLLBACK;
