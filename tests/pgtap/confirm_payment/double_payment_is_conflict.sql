-- confirm_payment with a second payment_id on a PAID order records a
-- double_payment conflict and returns conflict.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(4);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.confirm_payment('o1', 'p1');

SELECT is(ordertimeout.confirm_payment('o1', 'p2', 7), 'conflict', 'returns conflict');
SELECT results_eq(
    $$SELECT payment_id, kind, amount FROM ordertimeout.conflicts$$,
    $$VALUES ('p2', 'double_payment', 7::numeric)$$,
    'one double_payment conflict for the second payment');
SELECT results_eq(
    $$SELECT payment_id, status::text FROM ordertimeout.payments ORDER BY payment_id$$,
    $$VALUES ('p1', 'confirmed'), ('p2', 'late')$$,
    'the first payment stays confirmed, the second is late');
SELECT results_eq(
    $$SELECT status::text, sold::bigint FROM ordertimeout.orders, ordertimeout.stock$$,
    $$VALUES ('PAID', 1::bigint)$$,
    'the order stays PAID; nothing is sold twice');

SELECT * FROM finish();
ROLLBACK;
