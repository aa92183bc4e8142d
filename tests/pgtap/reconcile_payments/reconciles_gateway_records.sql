-- Each gateway transaction is judged against what the database knows:
-- paid here by that payment -> ok; a lost callback on a live order ->
-- confirmed (PAID now); on a cancelled order -> a late_payment conflict with
-- cause reconcile; paid here by another payment -> double_payment; another
-- amount -> amount_mismatch; unknown order -> reported; a refund not known
-- here -> reported; a payment confirmed here that the gateway does not list
-- -> reported. The same transactions again change nothing.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(11);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 100);
SELECT ordertimeout.create_order(id, '[{"sku":"A","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}')
FROM unnest(ARRAY['paid', 'live', 'gone', 'twice', 'wrong', 'here-only', 'refund']) AS id;
SELECT ordertimeout.confirm_payment('paid', 'p-paid', 10, 'EUR');
SELECT ordertimeout.confirm_payment('twice', 'p-twice', 10);
SELECT ordertimeout.confirm_payment('here-only', 'p-here-only', 10);
SELECT ordertimeout.confirm_payment('refund', 'p-refund', 10);
SELECT ordertimeout.cancel_order('gone');
SELECT now() - interval '1 hour' AS t0, now() + interval '1 hour' AS t1 \gset

SELECT jsonb_build_array(
  jsonb_build_object('line', 2, 'payment_id', 'p-paid', 'order_id', 'paid', 'amount', '10.00', 'currency', 'EUR', 'status', 'paid', 'at', now()),
  jsonb_build_object('line', 3, 'payment_id', 'p-live', 'order_id', 'live', 'amount', 10, 'currency', 'EUR', 'status', 'paid', 'at', now()),
  jsonb_build_object('line', 4, 'payment_id', 'p-gone', 'order_id', 'gone', 'amount', '10', 'currency', 'EUR', 'status', 'paid', 'at', to_char(now() AT TIME ZONE 'Asia/Shanghai', 'YYYY-MM-DD"T"HH24:MI:SS.US') || '+08:00'),
  jsonb_build_object('line', 5, 'payment_id', 'p-twice-2', 'order_id', 'twice', 'amount', '10', 'currency', 'EUR', 'status', 'paid', 'at', now()),
  jsonb_build_object('line', 6, 'payment_id', 'p-wrong', 'order_id', 'wrong', 'amount', '9.99', 'currency', 'EUR', 'status', 'paid', 'at', now()),
  jsonb_build_object('line', 7, 'payment_id', 'p-nobody', 'order_id', 'nobody', 'amount', '1', 'currency', 'EUR', 'status', 'paid', 'at', now()),
  jsonb_build_object('line', 8, 'payment_id', 'p-refund', 'order_id', 'refund', 'amount', '10', 'currency', 'EUR', 'status', 'paid', 'at', now()),
  jsonb_build_object('line', 9, 'payment_id', 'p-refund', 'order_id', 'refund', 'amount', '10', 'currency', 'EUR', 'status', 'refunded', 'at', now())
) AS tx \gset

SELECT results_eq(
    format($$SELECT line, payment_id, outcome FROM ordertimeout.reconcile_payments(%L, %L, %L)$$, :'tx', :'t0', :'t1'),
    $$VALUES (2, 'p-paid', 'ok'), (3, 'p-live', 'confirmed'), (4, 'p-gone', 'late_payment'),
             (5, 'p-twice-2', 'double_payment'), (6, 'p-wrong', 'amount_mismatch'), (7, 'p-nobody', 'unknown_order'),
             (8, 'p-refund', 'ok'), (9, 'p-refund', 'refund_unknown'),
             (NULL, 'p-twice', 'missing_at_gateway'), (NULL, 'p-here-only', 'missing_at_gateway')$$,
    'every transaction judged, and what the gateway does not list is reported');
SELECT is((SELECT status FROM ordertimeout.orders WHERE order_id = 'live'), 'PAID', 'the lost callback paid the live order');
SELECT is((SELECT cause FROM ordertimeout.events WHERE order_id = 'live' AND to_status = 'PAID'), 'reconcile',
    'with cause reconcile');
SELECT results_eq($$SELECT order_id, kind, cause FROM ordertimeout.conflicts ORDER BY order_id$$,
    $$VALUES ('gone', 'late_payment', 'reconcile'), ('twice', 'double_payment', 'reconcile'),
             ('wrong', 'amount_mismatch', 'reconcile')$$,
    'the conflicts found in the gateway''s records, counted apart (cause reconcile)');
SELECT is((SELECT status FROM ordertimeout.orders WHERE order_id = 'gone'), 'CANCELLED', 'the cancelled order stays cancelled');

SELECT test.snapshot() AS before \gset
SELECT results_eq(
    format($$SELECT line, outcome FROM ordertimeout.reconcile_payments(%L, %L, %L) WHERE line IS NOT NULL$$, :'tx', :'t0', :'t1'),
    $$VALUES (2, 'ok'), (3, 'ok'), (4, 'known_conflict'), (5, 'known_conflict'), (6, 'known_conflict'),
             (7, 'unknown_order'), (8, 'ok'), (9, 'refund_unknown')$$,
    'the same file again: what was found is known now');
SELECT is(test.snapshot(), :'before'::jsonb, 'and nothing is written the second time');

-- A watermark per source moves with the call, forward only.
SELECT is(ordertimeout.reconcile_watermark('gateway:test'), NULL, 'no watermark before');
SELECT count(*) FROM ordertimeout.reconcile_payments('[]', :'t0', now(), false, 'gateway:test');
SELECT is(ordertimeout.reconcile_watermark('gateway:test'), now(), 'the watermark is the period''s end');
SELECT count(*) FROM ordertimeout.reconcile_payments('[]', :'t0'::timestamptz - interval '1 day', :'t0', false, 'gateway:test');
SELECT is(ordertimeout.reconcile_watermark('gateway:test'), now(), 'an older period does not move it back');
SELECT is((SELECT count(*)::integer FROM ordertimeout.reconcile_payments('[]', :'t0', :'t1', false)), 0,
    'report_missing false: nothing reported');

SELECT * FROM finish();
ROLLBACK;
