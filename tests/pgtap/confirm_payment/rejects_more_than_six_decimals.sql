-- An amount has at most 6 decimal places (trailing zeros aside), the grammar
-- of every gateway amount (_parse_amount; the sidecar's gateway client and
-- reconcile files): an order of 10.0000001 could never be matched by a
-- payment check or a reconciliation, and 1e-400 was stored as a number of
-- 400 decimal places. Refused with OT126 wherever an amount enters, field
-- named, nothing written; 6 places and trailing zeros are amounts.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(13);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku":"A","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}');
SELECT ordertimeout.create_order('o2', '[{"sku":"A","qty":1}]');
SELECT ordertimeout.cancel_order('o2');

SELECT test.snapshot() AS before \gset
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('o1', 'p1', 10.0000001, 'EUR')$$, 'OT126',
    'amount must have at most 6 decimal places, got 10.0000001', '7 places: OT126, amount named');
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('o1', 'p1', 1e-400, 'EUR')$$, 'OT126',
    'amount must have at most 6 decimal places, got 0.00000000000000000000000000000000000000...',
    '1e-400: OT126, the value cut short in the message');
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('o2', 'p2', 10.0000001, 'EUR')$$, 'OT126', NULL,
    '7 places on a cancelled order: OT126, not a conflict');
SELECT throws_ok($$SELECT ordertimeout.create_order('o3', '[{"sku":"A","qty":1}]', NULL, '{"amount":0.1234567}')$$,
    'OT126', 'options.amount must have at most 6 decimal places, got 0.1234567', 'options.amount 7 places: OT126');
SELECT throws_ok($$SELECT ordertimeout.create_order('o3', '[{"sku":"A","qty":1}]', NULL, '{"amount":1e-400}')$$,
    'OT126', NULL, 'options.amount 1e-400: OT126');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT lives_ok($$SELECT ordertimeout.create_order('o4', '[{"sku":"A","qty":1}]', NULL,
                                                   '{"amount":10.500000000,"currency":"EUR"}')$$,
    'trailing zeros are not places');
SELECT is(ordertimeout.confirm_payment('o4', 'p4', 10.5, 'EUR'), 'paid', '10.5 pays 10.500000000');
SELECT lives_ok($$SELECT ordertimeout.create_order('o5', '[{"sku":"A","qty":1}]', NULL,
                                                   '{"amount":0.123456,"currency":"EUR"}')$$,
    '6 places: an amount');
SELECT is(ordertimeout.confirm_payment('o5', 'p5', 0.123456, 'EUR'), 'paid', '0.123456 pays 0.123456');
SELECT is(ordertimeout.confirm_payment('o1', 'p1', 10.000000000, 'EUR'), 'paid', '10.000000000 pays 10');
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('o2', 'p2', 0.0000001)$$, 'OT126', NULL,
    'without a currency too');
SELECT is((SELECT count(*)::integer FROM ordertimeout.conflicts), 0, 'no conflict recorded');

SELECT * FROM finish();
ROLLBACK;
