-- create_order raises OT105 when an item's qty is missing or not an integer
-- and OT106 when it is out of 1..1000000, writing nothing.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(10);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 2000000);
SELECT test.snapshot() AS before \gset

SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A"}]')$$,
    'OT105', NULL, 'a missing qty: OT105');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": "2"}]')$$,
    'OT105', NULL, 'qty "2", a string: OT105');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": "two"}]')$$,
    'OT105', NULL, 'qty "two": OT105 (not a cast error)');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 2.5}]')$$,
    'OT105', NULL, 'qty 2.5: OT105');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": null}]')$$,
    'OT105', NULL, 'qty null: OT105');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 0}]')$$,
    'OT106', NULL, 'qty 0: OT106');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": -1}]')$$,
    'OT106', NULL, 'qty -1: OT106');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1000001}]')$$,
    'OT106', NULL, 'qty 1000001: OT106');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT lives_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1000000}]')$$,
    'qty 1000000 is fine');

SELECT * FROM finish();
ROLLBACK;
