-- fail_payment while another attempt of the order is still started keeps the
-- order PAYING and returns paying; failing the last one returns pending.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(5);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.begin_payment('o1', 'p1');
SELECT ordertimeout.begin_payment('o1', 'p2');

SELECT is(ordertimeout.fail_payment('o1', 'p1'), 'paying', 'returns paying');
SELECT is((SELECT status FROM ordertimeout.order_info('o1')), 'PAYING', 'the order stays PAYING');
SELECT is_empty($$SELECT 1 FROM public.river_job WHERE queue = 'ordertimeout_expire'$$, 'no timer row yet');

SELECT is(ordertimeout.fail_payment('o1', 'p2'), 'pending', 'failing the last attempt returns pending');
SELECT is((SELECT status FROM ordertimeout.order_info('o1')), 'PENDING', 'the order is PENDING');

SELECT * FROM finish();
ROLLBACK;
