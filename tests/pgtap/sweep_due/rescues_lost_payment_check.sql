-- A PAYING order whose payment check River lost would stay PAYING forever:
-- past paying_until, sweep_due's rescue gives it a new payment check job for
-- its latest started payment.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(4);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.begin_payment('o1', 'p1', interval '1 minute');
UPDATE ordertimeout.orders SET paying_until = clock_timestamp() - interval '1 second' WHERE order_id = 'o1';
DELETE FROM public.river_job WHERE kind = 'ordertimeout_payment_check';

UPDATE ordertimeout.rescue_state SET rescued_at = '-infinity';
SELECT results_eq($$SELECT claimed, cancelled, checks FROM ordertimeout.sweep_due()$$, $$VALUES (0, 0, 1)$$,
    'one payment check queued, nothing cancelled');
SELECT results_eq(
    $$SELECT kind, queue, args FROM public.river_job WHERE id = (SELECT timer_job_id FROM ordertimeout.orders)$$,
    $$VALUES ('ordertimeout_payment_check', 'ordertimeout', '{"order_id": "o1", "payment_id": "p1"}'::jsonb)$$,
    'the order points to a new payment check for its started payment');
SELECT is((SELECT status FROM ordertimeout.orders), 'PAYING', 'the order stays PAYING');

UPDATE ordertimeout.rescue_state SET rescued_at = '-infinity';
SELECT results_eq($$SELECT checks FROM ordertimeout.sweep_due()$$, $$VALUES (0)$$,
    'a live payment check is left alone');

SELECT * FROM finish();
ROLLBACK;
