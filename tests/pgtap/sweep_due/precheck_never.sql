-- With precheck 'never', a due order whose payment was started is cancelled
-- at once, and a gateway close job is queued so the buyer cannot finish the
-- payment.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(4);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.configure(precheck => 'never');
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.begin_payment('o1', 'p1');
SELECT ordertimeout.fail_payment('o1', 'p1');
SELECT test.make_due('o1');

SELECT results_eq(
    $$SELECT claimed, cancelled, checks FROM ordertimeout.sweep_due()$$,
    $$VALUES (1, 1, 0)$$,
    'cancelled without a check');
SELECT is((SELECT (status, cancel_cause) FROM ordertimeout.order_info('o1')), ROW('CANCELLED'::text, 'timeout'::text),
    'cancelled as a timeout');
SELECT results_eq(
    $$SELECT kind, queue, state::text, args FROM public.river_job WHERE kind <> 'ordertimeout_payment_check'$$,
    $$VALUES ('ordertimeout_gateway_close', 'ordertimeout', 'available', '{"order_id": "o1"}'::jsonb)$$,
    'a gateway close job, and no timer row left');
SELECT is_empty($$SELECT 1 FROM public.river_job WHERE kind = 'ordertimeout_precancel_check'$$, 'no precancel check');

SELECT * FROM finish();
ROLLBACK;
