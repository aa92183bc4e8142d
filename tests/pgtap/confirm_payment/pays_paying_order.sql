-- confirm_payment on a PAYING order marks it PAID and its payment confirmed.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(5);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 3}]');
SELECT ordertimeout.begin_payment('o1', 'p1');

SELECT is(ordertimeout.confirm_payment('o1', 'p1'), 'paid', 'returns paid');
SELECT is((SELECT (status, deadline_version, paying_until) FROM ordertimeout.order_info('o1')),
          ROW('PAID'::text, 3, NULL::timestamptz), 'PAYING -> PAID, version bumped, paying_until cleared');
SELECT results_eq(
    $$SELECT payment_id, status::text, started_at IS NOT NULL, confirmed_at IS NOT NULL FROM ordertimeout.payments$$,
    $$VALUES ('p1', 'confirmed', true, true)$$,
    'the started payment is confirmed');
SELECT results_eq(
    $$SELECT available::bigint, reserved::bigint, sold::bigint FROM ordertimeout.stock$$,
    $$VALUES (7::bigint, 0::bigint, 3::bigint)$$,
    'reserved stock is sold');
SELECT results_eq(
    $$SELECT from_status, to_status, cause::text FROM ordertimeout.events ORDER BY event_id DESC LIMIT 1$$,
    $$VALUES ('PAYING', 'PAID', 'payment')$$,
    'an event PAYING -> PAID');

SELECT * FROM finish();
ROLLBACK;
