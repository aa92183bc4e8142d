-- Refunds the gateway lists, against what this database knows:
-- * a payment listed as paid and then refunded in the same call, neither
--   seen here, does not pay its live order (a refunded payment never pays
--   its order): both lines are refund_unknown, for a person, and nothing is
--   written; before migration 000044 the paid line confirmed the order;
-- * the refund of a conflict claimed here (resolve_conflict(id, 'refund'))
--   and not yet recorded by finish_refund (the sidecar refunded at the
--   gateway, or is about to) is known_conflict, not refund_unknown (a false
--   alarm that made a nightly reconcile exit 2), and amount_differs when the
--   gateway refunded another amount;
-- * a payment confirmed with an amount but no currency (its order has
--   none) takes the gateway's currency, as confirm_payment did: ok, not
--   amount_differs.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(7);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 100);
SELECT ordertimeout.create_order(id, '[{"sku":"A","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}')
FROM unnest(ARRAY['live', 'claimed', 'claimed-less']) AS id;
SELECT ordertimeout.create_order('no-currency', '[{"sku":"A","qty":1}]', NULL, '{"amount":10}');
SELECT ordertimeout.confirm_payment('no-currency', 'p-no-currency', 10);
SELECT ordertimeout.cancel_order(id) FROM unnest(ARRAY['claimed', 'claimed-less']) AS id;
SELECT ordertimeout.confirm_payment(id, 'p-' || id, 10, 'EUR') FROM unnest(ARRAY['claimed', 'claimed-less']) AS id;
SELECT ordertimeout.resolve_conflict(c.conflict_id, 'refund')
FROM ordertimeout.conflicts AS c WHERE c.order_id IN ('claimed', 'claimed-less');
SELECT now() - interval '1 hour' AS t0, now() AS t1 \gset

SELECT jsonb_build_array(
  jsonb_build_object('line', 2, 'payment_id', 'p-live', 'order_id', 'live', 'amount', '10', 'currency', 'EUR', 'status', 'paid', 'at', now()),
  jsonb_build_object('line', 3, 'payment_id', 'p-live', 'order_id', 'live', 'amount', '10', 'currency', 'EUR', 'status', 'refunded', 'at', now()),
  jsonb_build_object('line', 4, 'payment_id', 'p-claimed', 'order_id', 'claimed', 'amount', '10.00', 'currency', 'EUR', 'status', 'refunded', 'at', now()),
  jsonb_build_object('line', 5, 'payment_id', 'p-claimed-less', 'order_id', 'claimed-less', 'amount', '4', 'currency', 'EUR', 'status', 'refunded', 'at', now()),
  jsonb_build_object('line', 6, 'payment_id', 'p-no-currency', 'order_id', 'no-currency', 'amount', '10', 'currency', 'EUR', 'status', 'paid', 'at', now())
) AS tx \gset
SELECT test.snapshot() AS before \gset

SELECT results_eq(
    format($$SELECT line, payment_id, outcome FROM ordertimeout.reconcile_payments(%L, %L, %L)$$, :'tx', :'t0', :'t1'),
    $$VALUES (2, 'p-live', 'refund_unknown'), (3, 'p-live', 'refund_unknown'),
             (4, 'p-claimed', 'known_conflict'), (5, 'p-claimed-less', 'amount_differs'),
             (6, 'p-no-currency', 'ok')$$,
    'paid and refunded: refund_unknown; a refund under way: known_conflict, or amount_differs; no currency here: ok');
SELECT results_eq(
    format($$SELECT detail FROM ordertimeout.reconcile_payments(%L, %L, %L) WHERE line IN (2, 4, 5) ORDER BY line$$,
           :'tx', :'t0', :'t1'),
    $$VALUES ('paid and refunded at the gateway; here the payment is unknown: not confirmed'),
             ('its conflict''s refund, claimed here, is under way: finish_refund records it'),
             ('being refunded here 10 EUR; the gateway refunded 4 EUR')$$,
    'the details say why');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing is written: the live order is not paid by a refunded payment');
SELECT is((SELECT status FROM ordertimeout.order_info('live')), 'PENDING', 'the live order is still PENDING');

-- The same payment paid in one call and refunded in the next: the first
-- confirms it (the refund is not known yet), the second reports the refund.
SELECT is((SELECT outcome FROM ordertimeout.reconcile_payments(
              jsonb_build_array(jsonb_build_object('payment_id', 'p-live', 'order_id', 'live', 'amount', '10', 'currency', 'EUR',
                                                   'status', 'paid', 'at', now())), :'t0', :'t1')),
          'confirmed', 'paid alone: a lost callback, confirmed');
SELECT is((SELECT outcome FROM ordertimeout.reconcile_payments(
              jsonb_build_array(jsonb_build_object('payment_id', 'p-live', 'order_id', 'live', 'amount', '10', 'currency', 'EUR',
                                                   'status', 'refunded', 'at', now())), :'t0', :'t1')),
          'refund_unknown', 'then its refund: refund_unknown');

-- Once finish_refund records it, the refund is ok.
SELECT ordertimeout.finish_refund(c.conflict_id, 'r-1') FROM ordertimeout.conflicts AS c WHERE c.order_id = 'claimed';
SELECT is((SELECT outcome FROM ordertimeout.reconcile_payments(:'tx', :'t0', :'t1') WHERE line = 4), 'ok',
          'the refund recorded: ok');

SELECT * FROM finish();
ROLLBACK;
