-- With a source, the watermark says "reconciled up to here": continuous
-- reconciliation asks the gateway only from a little before it. So a call
-- with a source must continue the source's periods: a period that starts
-- after the watermark (a day's file left out, a --from typed wrong) is
-- refused with OT174, and one that ends in the future (the watermark would
-- claim what the gateway cannot have listed yet) with OT175; nothing is
-- written, the watermark stays. Before migration 000042 both moved the
-- watermark past payments never reconciled. A period that starts at or
-- before the watermark, a new source, and a call without a source are free.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(10);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('live', '[{"sku":"A","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}');
SELECT now() - interval '3 hours' AS t3, now() - interval '2 hours' AS t2, now() - interval '1 hour' AS t1,
       now() + interval '1 hour' AS later \gset
-- The order was placed before the period; the buyer paid in it.
UPDATE ordertimeout.orders SET created_at = now() - interval '4 hours' WHERE order_id = 'live';
SELECT jsonb_build_array(jsonb_build_object('line', 2, 'payment_id', 'p-live', 'order_id', 'live', 'amount', '10',
    'currency', 'EUR', 'status', 'paid', 'at', :'t1'::timestamptz - interval '1 minute')) AS tx \gset

SELECT count(*) FROM ordertimeout.reconcile_payments('[]', :'t3', :'t2', false, 'csv:psp');
SELECT test.snapshot() AS before \gset

SELECT throws_ok(format($$SELECT * FROM ordertimeout.reconcile_payments(%L, %L, %L, false, 'csv:psp')$$, :'tx', :'t1', now()),
    'OT174', NULL, 'a period that starts after the watermark: OT174');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written: the lost callback is not confirmed either');
SELECT is(ordertimeout.reconcile_watermark('csv:psp'), :'t2'::timestamptz, 'the watermark stays');

SELECT throws_ok(format($$SELECT * FROM ordertimeout.reconcile_payments(%L, %L, %L, false, 'csv:psp')$$, :'tx', :'t2', :'later'),
    'OT175', NULL, 'a period that ends in the future: OT175');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');
SELECT throws_ok(format($$SELECT * FROM ordertimeout.reconcile_payments('[]', %L, %L, false, 'csv:new')$$, :'t3', :'later'),
    'OT175', NULL, 'also for a new source');

SELECT lives_ok(format($$SELECT * FROM ordertimeout.reconcile_payments('[]', %L, %L, true)$$, :'t1', :'later'),
    'without a source a period may end in the future (it only bounds missing_at_gateway)');
SELECT lives_ok(format($$SELECT * FROM ordertimeout.reconcile_payments('[]', %L, %L, false, 'csv:other')$$, :'t1', now()),
    'a new source may start anywhere');

SELECT is((SELECT outcome FROM ordertimeout.reconcile_payments(:'tx', :'t2'::timestamptz - interval '2 minutes', :'t1', false, 'csv:psp')),
    'confirmed', 'a period that starts before the watermark (an overlap) is applied');
SELECT is(ordertimeout.reconcile_watermark('csv:psp'), :'t1'::timestamptz, 'and moves the watermark');

SELECT * FROM finish();
ROLLBACK;
