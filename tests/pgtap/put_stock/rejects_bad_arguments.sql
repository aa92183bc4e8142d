-- put_stock's errors: OT142 bad sku, OT143 qty out of 0..10^15, OT100 NULL;
-- none writes anything.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(8);

SELECT test.snapshot() AS before \gset
SELECT throws_ok($$SELECT ordertimeout.put_stock('', 1)$$, 'OT142', NULL, 'empty sku: OT142');
SELECT throws_ok(format('SELECT ordertimeout.put_stock(%L, 1)', repeat('s', 65)), 'OT142', NULL, 'sku of 65 characters: OT142');
SELECT throws_ok($$SELECT ordertimeout.put_stock(E'A\nB', 1)$$, 'OT142', NULL, 'sku with a control character: OT142');
SELECT throws_ok($$SELECT ordertimeout.put_stock('A', -1)$$, 'OT143', NULL, 'qty -1: OT143');
SELECT throws_ok($$SELECT ordertimeout.put_stock('A', 1000000000000001)$$, 'OT143', NULL, 'qty 10^15 + 1: OT143');
SELECT throws_ok($$SELECT ordertimeout.put_stock(NULL, 1)$$, 'OT100', NULL, 'sku NULL: OT100');
SELECT throws_ok($$SELECT ordertimeout.put_stock('A', NULL)$$, 'OT100', NULL, 'qty NULL: OT100');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT * FROM finish();
ROLLBACK;
