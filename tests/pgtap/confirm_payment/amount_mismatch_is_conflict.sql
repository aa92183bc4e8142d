-- A confirmed payment of the wrong amount is money received: it is recorded
-- as a conflict of kind amount_mismatch (never an error that drops it), the
-- order is not paid, and a PAYING order whose only attempt it was returns to
-- PENDING so that its timeout applies again. The same amount written otherwise
-- (10.00 for 10) pays.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(8);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', NULL, '{"amount": 10}');
SELECT ordertimeout.begin_payment('o1', 'p1');

SELECT is(ordertimeout.confirm_payment('o1', 'p1', 9.99), 'conflict', 'amount 9.99 for an order of 10: conflict');
SELECT results_eq(
    $$SELECT order_id, payment_id, kind, amount FROM ordertimeout.conflicts$$,
    $$VALUES ('o1', 'p1', 'amount_mismatch', 9.99::numeric)$$,
    'one conflict row of kind amount_mismatch with the amount received');
SELECT is((SELECT status FROM ordertimeout.payments WHERE payment_id = 'p1'), 'late', 'the payment is recorded, as a conflict');
SELECT is((SELECT status FROM ordertimeout.orders WHERE order_id = 'o1'), 'PENDING',
    'the PAYING order returns to PENDING: its only attempt is over');
SELECT is((SELECT count(*)::integer FROM public.river_job
            WHERE queue = 'ordertimeout_expire' AND args ->> 'order_id' = 'o1'
              AND (args ->> 'version')::integer = (SELECT deadline_version FROM ordertimeout.orders WHERE order_id = 'o1')),
    1, 'with a timer row for its new version');
SELECT is((SELECT reserved::bigint FROM ordertimeout.stock WHERE sku = 'A'), 1::bigint, 'the stock stays reserved, not sold');
SELECT is(ordertimeout.confirm_payment('o1', 'p1', 9.99), 'conflict', 'a repeat gives the same answer');

SELECT is(ordertimeout.confirm_payment('o1', 'p2', 10.00), 'paid', 'the same amount written otherwise (10.00) pays');

SELECT * FROM finish();
ROLLBACK;
