-- create_order raises OT113 for a timeout that is not more than 0 and at most
-- 30 days, writing nothing.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(5);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT test.snapshot() AS before \gset

SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', interval '0')$$,
    'OT113', NULL, 'timeout 0: OT113');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', interval '-5 minutes')$$,
    'OT113', NULL, 'negative timeout: OT113');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', interval '31 days')$$,
    'OT113', NULL, 'timeout 31 days: OT113');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');
SELECT lives_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', interval '30 days')$$,
    'timeout 30 days is fine');

SELECT * FROM finish();
ROLLBACK;
