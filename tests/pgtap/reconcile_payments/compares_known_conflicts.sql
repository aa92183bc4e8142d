-- A payment that is a conflict here already (late, or refunded by its
-- conflict's refund) is checked against the gateway's record like a
-- confirmed one: the same amount and currency -> known_conflict; another
-- amount or currency -> amount_differs, for a person to look at, since the
-- conflict's refund gives back the amount recorded here, not the one the
-- gateway took. A refund known here is checked the same way. A conflict
-- recorded without an amount has none to compare. Before migration 000042
-- every known conflict was known_conflict and every known refund ok,
-- whatever the gateway settled.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(4);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 100);
SELECT ordertimeout.create_order(id, '[{"sku":"A","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}')
FROM unnest(ARRAY['same', 'more', 'dollars', 'unknown', 'refunded', 'refunded-more']) AS id;
SELECT ordertimeout.cancel_order(id)
FROM unnest(ARRAY['same', 'more', 'dollars', 'unknown', 'refunded', 'refunded-more']) AS id;
SELECT ordertimeout.confirm_payment(id, 'p-' || id, 10, 'EUR')
FROM unnest(ARRAY['same', 'more', 'dollars', 'refunded', 'refunded-more']) AS id;
SELECT ordertimeout.confirm_payment('unknown', 'p-unknown');
SELECT ordertimeout.resolve_conflict(c.conflict_id, 'refund'), ordertimeout.finish_refund(c.conflict_id, 'r-' || c.order_id)
FROM ordertimeout.conflicts AS c
WHERE c.order_id IN ('refunded', 'refunded-more');
SELECT now() - interval '1 hour' AS t0, now() AS t1 \gset

SELECT jsonb_build_array(
  jsonb_build_object('line', 2, 'payment_id', 'p-same', 'order_id', 'same', 'amount', '10.00', 'currency', 'EUR', 'status', 'paid', 'at', now()),
  jsonb_build_object('line', 3, 'payment_id', 'p-more', 'order_id', 'more', 'amount', '100', 'currency', 'EUR', 'status', 'paid', 'at', now()),
  jsonb_build_object('line', 4, 'payment_id', 'p-dollars', 'order_id', 'dollars', 'amount', '10', 'currency', 'USD', 'status', 'paid', 'at', now()),
  jsonb_build_object('line', 5, 'payment_id', 'p-unknown', 'order_id', 'unknown', 'amount', '3', 'currency', 'EUR', 'status', 'paid', 'at', now()),
  jsonb_build_object('line', 6, 'payment_id', 'p-refunded', 'order_id', 'refunded', 'amount', '10', 'currency', 'EUR', 'status', 'paid', 'at', now()),
  jsonb_build_object('line', 7, 'payment_id', 'p-refunded', 'order_id', 'refunded', 'amount', '10.0', 'currency', 'EUR', 'status', 'refunded', 'at', now()),
  jsonb_build_object('line', 8, 'payment_id', 'p-refunded-more', 'order_id', 'refunded-more', 'amount', '25', 'currency', 'EUR', 'status', 'paid', 'at', now()),
  jsonb_build_object('line', 9, 'payment_id', 'p-refunded-more', 'order_id', 'refunded-more', 'amount', '4', 'currency', 'EUR', 'status', 'refunded', 'at', now())
) AS tx \gset
SELECT test.snapshot() AS before \gset

SELECT results_eq(
    format($$SELECT line, payment_id, outcome FROM ordertimeout.reconcile_payments(%L, %L, %L)$$, :'tx', :'t0', :'t1'),
    $$VALUES (2, 'p-same', 'known_conflict'), (3, 'p-more', 'amount_differs'), (4, 'p-dollars', 'amount_differs'),
             (5, 'p-unknown', 'known_conflict'), (6, 'p-refunded', 'known_conflict'), (7, 'p-refunded', 'ok'),
             (8, 'p-refunded-more', 'amount_differs'), (9, 'p-refunded-more', 'amount_differs')$$,
    'a known conflict or refund of another amount or currency than the gateway''s is amount_differs');
SELECT results_eq(
    format($$SELECT detail FROM ordertimeout.reconcile_payments(%L, %L, %L) WHERE line IN (3, 4, 9) ORDER BY line$$,
           :'tx', :'t0', :'t1'),
    $$VALUES ('a conflict here of 10 EUR (late); the gateway settled 100 EUR'),
             ('a conflict here of 10 EUR (late); the gateway settled 10 USD'),
             ('refunded here 10 EUR; the gateway refunded 4 EUR')$$,
    'the detail says both amounts');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing is written');
SELECT is((SELECT count(*)::integer FROM ordertimeout.reconcile_payments(:'tx', :'t0', :'t1', false) WHERE outcome = 'amount_differs'), 4,
    'and the same again reports the same');

SELECT * FROM finish();
ROLLBACK;
