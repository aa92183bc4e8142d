-- No CLOSED order has an open conflict: a late payment on a CLOSED order
-- records the conflict and moves the order back to CANCELLED; close_cancelled
-- closes it again once the conflict is resolved. A huge older_than is OT141,
-- not a timestamp overflow (22008).
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(7);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku":"A","qty":1}]');
SELECT ordertimeout.cancel_order('o1');
SELECT ordertimeout.close_cancelled(interval '0');
SELECT is((SELECT status FROM ordertimeout.orders WHERE order_id = 'o1'), 'CLOSED', 'closed');

SELECT is(ordertimeout.confirm_payment('o1', 'p1'), 'conflict', 'a late payment on the CLOSED order is a conflict');
SELECT results_eq($$SELECT status::text, closed_at FROM ordertimeout.orders WHERE order_id = 'o1'$$,
    $$VALUES ('CANCELLED', NULL::timestamptz)$$, 'the order is CANCELLED again');
SELECT results_eq(
    $$SELECT from_status, to_status, cause::text, detail ->> 'kind' FROM ordertimeout.events ORDER BY event_id DESC LIMIT 1$$,
    $$VALUES ('CLOSED', 'CANCELLED', 'payment', 'late_payment')$$, 'the event says why');
SELECT is(ordertimeout.close_cancelled(interval '0'), 0, 'not closed while the conflict is open');
SELECT ordertimeout.resolve_conflict((SELECT conflict_id FROM ordertimeout.conflicts), 'manual');
SELECT is(ordertimeout.close_cancelled(interval '0'), 1, 'closed again once resolved');

SELECT throws_ok($$SELECT ordertimeout.close_cancelled(interval '300000 years')$$, 'OT141', NULL,
    '300000 years: OT141');

SELECT * FROM finish();
ROLLBACK;
