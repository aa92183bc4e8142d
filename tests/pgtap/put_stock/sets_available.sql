-- put_stock creates a sku or sets its available units; reserved and sold are
-- not touched; a repeat changes nothing.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(5);

SELECT is((SELECT (sku, available::bigint, reserved::bigint, sold::bigint) FROM ordertimeout.put_stock('A', 10)),
    ROW('A'::text, 10::bigint, 0::bigint, 0::bigint), 'creates the sku and returns its row');
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 3}]');
SELECT ordertimeout.create_order('o2', '[{"sku": "A", "qty": 2}]');
SELECT ordertimeout.confirm_payment('o2', 'p2');

SELECT is((SELECT (available::bigint, reserved::bigint, sold::bigint) FROM ordertimeout.put_stock('A', 50)),
    ROW(50::bigint, 3::bigint, 2::bigint), 'sets available; reserved and sold stay');
SELECT test.snapshot() AS before \gset
SELECT ordertimeout.put_stock('A', 50);
SELECT is(test.snapshot(), :'before'::jsonb, 'a repeat changes nothing');
SELECT is((ordertimeout.put_stock('A', 0)).available::bigint, 0::bigint, 'available may be set to 0');
SELECT is(ordertimeout.cancel_order('o1'), true, 'an order placed before still cancels');

SELECT * FROM finish();
ROLLBACK;
