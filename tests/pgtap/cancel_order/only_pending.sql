-- cancel_order returns false and changes nothing for a PAID or PAYING order.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(5);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('paid', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.confirm_payment('paid', 'p1');
SELECT ordertimeout.create_order('paying', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.begin_payment('paying', 'p2');
SELECT test.snapshot() AS before \gset

SELECT is(ordertimeout.cancel_order('paid'), false, 'a PAID order: false');
SELECT is(ordertimeout.cancel_order('paying'), false, 'a PAYING order: false');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');
SELECT results_eq(
    $$SELECT order_id, status::text FROM ordertimeout.orders ORDER BY order_id$$,
    $$VALUES ('paid', 'PAID'), ('paying', 'PAYING')$$,
    'statuses unchanged');
SELECT is_empty($$SELECT 1 FROM ordertimeout.releases$$, 'nothing released');

SELECT * FROM finish();
ROLLBACK;
