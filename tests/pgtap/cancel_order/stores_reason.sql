-- cancel_order stores its reason on the order and in the event ('requested'
-- by default); an order whose payment was started gets a gateway close job.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(5);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.create_order('o2', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.begin_payment('o2', 'p2');
SELECT ordertimeout.fail_payment('o2', 'p2');

SELECT ordertimeout.cancel_order('o1', 'buyer changed their mind');
SELECT ordertimeout.cancel_order('o2');

SELECT results_eq(
    $$SELECT order_id, cancel_reason FROM ordertimeout.orders ORDER BY order_id$$,
    $$VALUES ('o1', 'buyer changed their mind'), ('o2', 'requested')$$,
    'the reason is stored; requested by default');
SELECT is((SELECT detail ->> 'reason' FROM ordertimeout.events WHERE order_id = 'o1' AND to_status = 'CANCELLED'),
    'buyer changed their mind', 'the event carries the reason');
SELECT is((SELECT cause FROM ordertimeout.events WHERE order_id = 'o1' AND to_status = 'CANCELLED'),
    'requested', 'the cause is requested, whatever the reason');
SELECT results_eq(
    $$SELECT kind, queue, args FROM public.river_job WHERE kind = 'ordertimeout_gateway_close'$$,
    $$VALUES ('ordertimeout_gateway_close', 'ordertimeout', '{"order_id": "o2"}'::jsonb)$$,
    'a gateway close job for the order whose payment was started, only');
SELECT is_empty($$SELECT 1 FROM public.river_job WHERE queue = 'ordertimeout_expire'$$, 'both timer rows are deleted');

SELECT * FROM finish();
ROLLBACK;
