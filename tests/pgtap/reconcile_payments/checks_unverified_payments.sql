-- A payment confirmed here without an amount (an app caller that did not
-- know it: unverified) is checked against the order's amount and currency
-- when the gateway's record comes: the same -> ok; another amount or another
-- currency -> amount_differs, for a person to look at. An order without an
-- amount has nothing to compare: ok, with what the gateway settled in the
-- detail, and so has an order of an amount without a currency as to the
-- currency. Before migration 000028 every unverified payment was ok,
-- whatever the gateway settled.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(3);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 100);
SELECT ordertimeout.create_order(id, '[{"sku":"A","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}')
FROM unnest(ARRAY['same', 'less', 'dollars']) AS id;
SELECT ordertimeout.create_order('no-amount', '[{"sku":"A","qty":1}]');
SELECT ordertimeout.create_order('no-currency', '[{"sku":"A","qty":1}]', NULL, '{"amount":10}');
SELECT ordertimeout.confirm_payment(id, 'p-' || id)
FROM unnest(ARRAY['same', 'less', 'dollars', 'no-amount', 'no-currency']) AS id;
SELECT now() - interval '1 hour' AS t0, now() + interval '1 hour' AS t1 \gset

SELECT jsonb_build_array(
  jsonb_build_object('line', 2, 'payment_id', 'p-same', 'order_id', 'same', 'amount', '10.00', 'currency', 'EUR', 'status', 'paid', 'at', now()),
  jsonb_build_object('line', 3, 'payment_id', 'p-less', 'order_id', 'less', 'amount', '0.01', 'currency', 'EUR', 'status', 'paid', 'at', now()),
  jsonb_build_object('line', 4, 'payment_id', 'p-dollars', 'order_id', 'dollars', 'amount', '10', 'currency', 'USD', 'status', 'paid', 'at', now()),
  jsonb_build_object('line', 5, 'payment_id', 'p-no-amount', 'order_id', 'no-amount', 'amount', '3', 'currency', 'USD', 'status', 'paid', 'at', now()),
  jsonb_build_object('line', 6, 'payment_id', 'p-no-currency', 'order_id', 'no-currency', 'amount', '10', 'currency', 'EUR', 'status', 'paid', 'at', now())
) AS tx \gset
SELECT test.snapshot() AS before \gset

SELECT results_eq(
    format($$SELECT line, payment_id, outcome FROM ordertimeout.reconcile_payments(%L, %L, %L)$$, :'tx', :'t0', :'t1'),
    $$VALUES (2, 'p-same', 'ok'), (3, 'p-less', 'amount_differs'), (4, 'p-dollars', 'amount_differs'),
             (5, 'p-no-amount', 'ok'), (6, 'p-no-currency', 'ok')$$,
    'the gateway''s amount against the order''s; an order of an amount without a currency takes any, as confirm_payment does');
SELECT results_eq(
    format($$SELECT detail FROM ordertimeout.reconcile_payments(%L, %L, %L) WHERE line IN (3, 5) ORDER BY line$$,
           :'tx', :'t0', :'t1'),
    $$VALUES ('confirmed here without an amount for an order of 10 EUR; the gateway settled 0.01 EUR'),
             ('confirmed here without an amount; the gateway settled 3 USD')$$,
    'the detail says what was compared');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written: the order stays PAID, for a person to look at');

SELECT * FROM finish();
ROLLBACK;
