-- confirm_payment on a CANCELLED order records a late-payment conflict and
-- returns conflict; the order stays CANCELLED. A repeat writes nothing.
-- (The NOTIFY it sends is delivered on commit only: the Go tests cover it.)
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(8);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 2}]', NULL, '{"amount": 5}');
SELECT ordertimeout.begin_payment('o1', 'p1');
SELECT ordertimeout.fail_payment('o1', 'p1');
SELECT ordertimeout.cancel_order('o1');

SELECT is(ordertimeout.confirm_payment('o1', 'p1', 5), 'conflict', 'returns conflict');
SELECT results_eq(
    $$SELECT order_id, payment_id, kind, amount, resolution FROM ordertimeout.conflicts$$,
    $$VALUES ('o1', 'p1', 'late_payment', 5::numeric, NULL::text)$$,
    'one open late_payment conflict');
SELECT results_eq(
    $$SELECT payment_id, status::text, amount::numeric FROM ordertimeout.payments$$,
    $$VALUES ('p1', 'late', 5::numeric)$$,
    'the payment is recorded as late');
SELECT is((SELECT (status, open_conflicts) FROM ordertimeout.order_info('o1')), ROW('CANCELLED'::text, 1),
    'the order stays CANCELLED with one open conflict');
SELECT results_eq(
    $$SELECT available::bigint, reserved::bigint, sold::bigint FROM ordertimeout.stock$$,
    $$VALUES (10::bigint, 0::bigint, 0::bigint)$$,
    'the stock stays released');
SELECT results_eq(
    $$SELECT from_status, to_status, cause::text, detail ->> 'kind' FROM ordertimeout.events ORDER BY event_id DESC LIMIT 1$$,
    $$VALUES ('CANCELLED', 'CANCELLED', 'payment', 'late_payment')$$,
    'an event records the conflict');

SELECT test.snapshot() AS before \gset
SELECT is(ordertimeout.confirm_payment('o1', 'p1', 5), 'conflict', 'the repeat returns conflict');
SELECT is(test.snapshot(), :'before'::jsonb, 'the repeat wrote nothing (still one conflict)');

SELECT * FROM finish();
ROLLBACK;
