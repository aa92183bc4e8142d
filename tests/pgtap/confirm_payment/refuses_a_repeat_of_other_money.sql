-- A confirmation of a payment already confirmed (or a conflict) that says
-- another amount or currency is not a repeat: refused with OT157, nothing
-- written, instead of answered as the payment stands. A payment confirmed
-- without an amount is compared with its order's. A conflict whose payment
-- came without an amount learns it while nobody has acted on it, and its
-- kind with it; a late payment of the exact amount can then be reinstated.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(22);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);

-- 1. Confirmed without an amount (unverified), for an order of 10.00 EUR.
SELECT ordertimeout.create_order('u1', '[{"sku": "A", "qty": 1}]', NULL, '{"amount": 10.00, "currency": "EUR"}');
SELECT ordertimeout.confirm_payment('u1', 'pu1');
SELECT test.snapshot() AS before \gset
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('u1', 'pu1', 0.01, 'USD')$$, 'OT157',
    'payment "pu1" of order "u1" is confirmed here, of 10.00 EUR (its order''s amount: it was confirmed without one); this confirmation says 0.01 USD: not recorded (a person checks it at the gateway)',
    'unverified, then 0.01 USD for an order of 10.00 EUR: OT157 naming both');
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('u1', 'pu1', 9.99)$$, 'OT157', NULL,
    'unverified, then 9.99 (the order''s currency): OT157');
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('u1', 'pu1', NULL, 'USD')$$, 'OT157', NULL,
    'unverified, then another currency without an amount: OT157');
SELECT is(ordertimeout.confirm_payment('u1', 'pu1', 10, 'EUR'), 'paid', 'unverified, then the order''s amount: paid');
SELECT is(test.snapshot(), :'before'::jsonb, 'none of them wrote anything');

-- 2. Confirmed with an amount.
SELECT ordertimeout.create_order('v1', '[{"sku": "A", "qty": 1}]', NULL, '{"amount": 10, "currency": "EUR"}');
SELECT ordertimeout.confirm_payment('v1', 'pv1', 10, 'EUR');
SELECT test.snapshot() AS before \gset
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('v1', 'pv1', 5, 'USD')$$, 'OT157', NULL,
    '10 EUR, then 5 USD: OT157');
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('v1', 'pv1', 5)$$, 'OT157', NULL, '10 EUR, then 5: OT157');
SELECT is(ordertimeout.confirm_payment('v1', 'pv1', 10.000, 'EUR'), 'paid', '10 EUR, then 10.000 EUR: a repeat');
SELECT is(ordertimeout.confirm_payment('v1', 'pv1'), 'paid', '10 EUR, then neither amount nor currency: a repeat');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

-- 3. A late payment without an amount, then the exact amount: learned, and
-- the conflict can be reinstated.
SELECT ordertimeout.create_order('l1', '[{"sku": "A", "qty": 1}]', NULL, '{"amount": 10, "currency": "EUR"}');
SELECT ordertimeout.cancel_order('l1');
SELECT is(ordertimeout.confirm_payment('l1', 'pl1'), 'conflict', 'late, without an amount: a conflict');
SELECT is(ordertimeout.confirm_payment('l1', 'pl1', 10, 'EUR'), 'conflict', 'again with the amount: the same answer');
SELECT results_eq($$SELECT kind, amount, currency FROM ordertimeout.conflicts WHERE payment_id = 'pl1'$$,
    $$VALUES ('late_payment', 10::numeric, 'EUR')$$, 'the conflict learned the amount');
SELECT results_eq($$SELECT amount::numeric, currency::text FROM ordertimeout.payments WHERE payment_id = 'pl1'$$,
    $$VALUES (10::numeric, 'EUR')$$, 'so did the payment');
SELECT is((SELECT count(*)::integer FROM ordertimeout.events
            WHERE order_id = 'l1' AND (detail ->> 'amount_learned')::boolean
              AND detail ->> 'amount' = '10' AND from_status = 'CANCELLED' AND to_status = 'CANCELLED'),
    1, 'one event says so');
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('l1', 'pl1', 9, 'EUR')$$, 'OT157', NULL,
    'then another amount: OT157');
SELECT is(ordertimeout.resolve_conflict((SELECT conflict_id FROM ordertimeout.conflicts WHERE payment_id = 'pl1'), 'reinstate'),
    'reinstated', 'a late payment of the exact amount is reinstated (before: OT132, an unknown amount)');

-- 4. A late payment without an amount, then another amount than the
-- order's: learned, as an amount_mismatch.
SELECT ordertimeout.create_order('l2', '[{"sku": "A", "qty": 1}]', NULL, '{"amount": 10, "currency": "EUR"}');
SELECT ordertimeout.cancel_order('l2');
SELECT ordertimeout.confirm_payment('l2', 'pl2');
SELECT is(ordertimeout.confirm_payment('l2', 'pl2', 7), 'conflict', 'again with 7: the same answer');
SELECT results_eq($$SELECT kind, amount, currency FROM ordertimeout.conflicts WHERE payment_id = 'pl2'$$,
    $$VALUES ('amount_mismatch', 7::numeric, 'EUR')$$, 'learned as an amount_mismatch');

-- 5. Once someone acted on the conflict, nothing is learned.
SELECT ordertimeout.create_order('l3', '[{"sku": "A", "qty": 1}]', NULL, '{"amount": 10, "currency": "EUR"}');
SELECT ordertimeout.cancel_order('l3');
SELECT ordertimeout.confirm_payment('l3', 'pl3');
SELECT ordertimeout.resolve_conflict((SELECT conflict_id FROM ordertimeout.conflicts WHERE payment_id = 'pl3'), 'manual');
SELECT test.snapshot() AS before \gset
SELECT is(ordertimeout.confirm_payment('l3', 'pl3', 10, 'EUR'), 'conflict', 'a resolved conflict: the same answer');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written: a resolution that has started is the one that finishes');

-- 6. An amount out of range is named in at most 40 characters.
SELECT throws_ok($$SELECT ordertimeout.confirm_payment('v1', 'pv9', '1e400')$$, 'OT126',
    'amount must be a finite number from 0 to below 10^15, got 1000000000000000000000000000000000000000...',
    'a huge amount is cut in the message');

SELECT * FROM finish();
ROLLBACK;
