-- Money is exact. An order with an amount and a currency is PAID only by a
-- payment of that amount (numeric equality: 100 pays 100.00) in that
-- currency; another amount or currency is an amount_mismatch conflict, on a
-- live order as on a cancelled one, and such a late payment is never
-- reinstated (OT132). Issue 9 reproduced: a late payment of 0.01 for an order
-- of 100.00 EUR was reinstated and the order PAID for 0.01.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(14);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('LP', 10);
SELECT ordertimeout.create_order(id, '[{"sku":"LP","qty":1}]', '1 hour', '{"amount":100.00,"currency":"EUR"}')
FROM unnest(ARRAY['LP-1', 'LP-2', 'LP-3', 'LP-4', 'LP-5']) AS id;

-- The reproduction.
SELECT ordertimeout.cancel_order('LP-1');
SELECT is(ordertimeout.confirm_payment('LP-1', 'plp-1', 0.01), 'conflict', 'a late payment of 0.01 is a conflict');
SELECT is((SELECT kind FROM ordertimeout.conflicts WHERE order_id = 'LP-1'), 'amount_mismatch',
    'of kind amount_mismatch, not late_payment');
SELECT throws_ok(
    $$SELECT ordertimeout.resolve_conflict((SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'LP-1'), 'reinstate')$$,
    'OT132', NULL, 'reinstate refuses it: OT132');
SELECT is((SELECT status FROM ordertimeout.orders WHERE order_id = 'LP-1'), 'CANCELLED', 'the order stays CANCELLED');

-- A late payment of the right amount in another currency is no better.
SELECT ordertimeout.cancel_order('LP-2');
SELECT is(ordertimeout.confirm_payment('LP-2', 'plp-2', 100, 'USD'), 'conflict', 'a late 100 USD is a conflict');
SELECT throws_ok(
    $$SELECT ordertimeout.resolve_conflict((SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'LP-2'), 'reinstate')$$,
    'OT132', NULL, 'and is not reinstated');

-- On a live order: the wrong amount or currency pays nothing.
SELECT is(ordertimeout.confirm_payment('LP-3', 'plp-3', 99.99), 'conflict', '99.99 for 100.00 is a conflict');
SELECT is(ordertimeout.confirm_payment('LP-3', 'plp-3b', 100.00, 'GBP'), 'conflict', '100.00 GBP for 100.00 EUR is a conflict');
SELECT results_eq($$SELECT kind, amount, currency FROM ordertimeout.conflicts WHERE order_id = 'LP-3' ORDER BY conflict_id$$,
    $$VALUES ('amount_mismatch', 99.99::numeric, 'EUR'), ('amount_mismatch', 100.00::numeric, 'GBP')$$,
    'both recorded as amount_mismatch with what was paid');
SELECT is((SELECT status FROM ordertimeout.orders WHERE order_id = 'LP-3'), 'PENDING', 'the order is still PENDING');

-- The exact amount pays: 100 equals 100.00, no currency means the order's.
SELECT is(ordertimeout.confirm_payment('LP-3', 'plp-3c', 100), 'paid', '100 pays 100.00');
SELECT results_eq($$SELECT amount::numeric, currency::text FROM ordertimeout.payments WHERE payment_id = 'plp-3c'$$,
    $$VALUES (100::numeric, 'EUR')$$, 'the payment is recorded in the order''s currency');

-- A late payment of the exact amount is a late_payment and can be reinstated.
SELECT ordertimeout.cancel_order('LP-4');
SELECT ordertimeout.confirm_payment('LP-4', 'plp-4', 100.00, 'EUR');
SELECT is(ordertimeout.resolve_conflict((SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'LP-4'), 'reinstate'),
    'reinstated', 'the exact late payment is reinstated');

-- An app caller without the amount: paid, recorded as unverified.
SELECT ordertimeout.confirm_payment('LP-5', 'plp-5');
SELECT is((SELECT detail -> 'unverified' FROM ordertimeout.events WHERE order_id = 'LP-5' AND to_status = 'PAID'),
    'true'::jsonb, 'a confirmation without the amount is recorded as unverified');

SELECT * FROM finish();
ROLLBACK;
