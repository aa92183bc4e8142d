-- begin_payment raises OT122 once expire_at has passed, even while the order
-- is still PENDING (inside the grace window, before any sweep).
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(3);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', interval '10 minutes');
-- expire_at a second ago; cancel_at (expire_at + 60 s grace) still ahead.
UPDATE ordertimeout.orders
SET created_at = clock_timestamp() - interval '10 minutes 1 second',
    expire_at = clock_timestamp() - interval '1 second',
    cancel_at = clock_timestamp() + interval '59 seconds'
WHERE order_id = 'o1';
SELECT test.snapshot() AS before \gset

SELECT throws_ok($$SELECT ordertimeout.begin_payment('o1', 'p1')$$, 'OT122', NULL, 'expired PENDING order: OT122');
SELECT is((SELECT status FROM ordertimeout.order_info('o1')), 'PENDING', 'the order is still PENDING');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT * FROM finish();
ROLLBACK;
