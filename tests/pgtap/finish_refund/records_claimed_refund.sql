-- A refund is claimed before any gateway call and is then the only way the
-- conflict can end: while refunding, reinstate and manual raise OT134,
-- refund again answers refunding; finish_refund records it (refunded, also
-- when repeated). Issue 9 reproduced: an admin's reinstate succeeded while
-- the sidecar's refund was in flight.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(13);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku":"A","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}');
SELECT ordertimeout.cancel_order('o1');
SELECT ordertimeout.confirm_payment('o1', 'p1', 10);
SELECT conflict_id AS c FROM ordertimeout.conflicts \gset

SELECT is(ordertimeout.resolve_conflict(:c, 'refund'), 'refunding', 'refund claims the conflict');
SELECT results_eq($$SELECT state, resolution, refund_started_at IS NOT NULL FROM ordertimeout.conflicts$$,
    $$VALUES ('refunding', NULL::text, true)$$, 'state refunding, not resolved yet');
SELECT is((SELECT open_conflicts FROM ordertimeout.order_info('o1')), 1, 'it still counts as open on the order');
SELECT throws_ok(format('SELECT ordertimeout.resolve_conflict(%s, %L)', :c, 'reinstate'), 'OT134', NULL,
    'reinstate while refunding: OT134');
SELECT throws_ok(format('SELECT ordertimeout.resolve_conflict(%s, %L)', :c, 'manual'), 'OT134', NULL,
    'manual while refunding: OT134');
SELECT is(ordertimeout.resolve_conflict(:c, 'refund'), 'refunding', 'refund again: refunding (the same resolution goes on)');
SELECT is((SELECT status FROM ordertimeout.orders WHERE order_id = 'o1'), 'CANCELLED', 'the order stays CANCELLED');

SELECT is(ordertimeout.finish_refund(:c, 'R1'), 'refunded', 'finish_refund records the refund');
SELECT is(ordertimeout.finish_refund(:c, 'R1'), 'refunded', 'and again: the same answer');
SELECT results_eq($$SELECT c.state, c.resolution, c.refund_id, p.status::text
                      FROM ordertimeout.conflicts AS c JOIN ordertimeout.payments AS p USING (payment_id)$$,
    $$VALUES ('resolved', 'refunded', 'R1', 'refunded')$$, 'resolved as refunded, the payment refunded');
SELECT throws_ok(format('SELECT ordertimeout.resolve_conflict(%s, %L)', :c, 'reinstate'), 'OT133', NULL,
    'reinstate after the refund: OT133');
SELECT is(ordertimeout.resolve_conflict(:c, 'refund'), 'refunded', 'refund after the refund: refunded');
SELECT results_eq(
    $$SELECT detail ->> 'resolution' FROM ordertimeout.events WHERE cause = 'conflict' ORDER BY event_id$$,
    $$VALUES ('refunding'), ('refunded')$$, 'an event when the refund starts and one when it is recorded');

SELECT * FROM finish();
ROLLBACK;
