-- One refund gives back one payment: a refund_id recorded for one conflict
-- is refused for another (OT177), nothing written, the second conflict stays
-- refunding. A review reproduced both conflicts recorded as refunded by
-- "RF-1" when a gateway answered two payments with one refund.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(7);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('r1', '[{"sku":"A","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}');
SELECT ordertimeout.cancel_order('r1');
SELECT ordertimeout.confirm_payment('r1', 'pr1', 10);
SELECT ordertimeout.confirm_payment('r1', 'pr2', 99);
SELECT conflict_id AS c1 FROM ordertimeout.conflicts WHERE payment_id = 'pr1' \gset
SELECT conflict_id AS c2 FROM ordertimeout.conflicts WHERE payment_id = 'pr2' \gset
SELECT ordertimeout.resolve_conflict(:c1, 'refund');
SELECT ordertimeout.resolve_conflict(:c2, 'refund');

SELECT is(ordertimeout.finish_refund(:c1, 'RF-1'), 'refunded', 'the first conflict records RF-1');
SELECT throws_ok(format('SELECT ordertimeout.finish_refund(%s, %L)', :c2, 'RF-1'), 'OT177',
    format('refund_id "RF-1" is recorded for conflict %s (payment "pr1"): it cannot also be the refund of conflict %s (payment "pr2"); one of the two payments may not be refunded, not recorded (a person checks it at the gateway)', :c1, :c2),
    'the same refund_id for the second: OT177, both conflicts named');
SELECT results_eq(format($$SELECT state, refund_id FROM ordertimeout.conflicts WHERE conflict_id = %s$$, :c2),
    $$VALUES ('refunding', NULL::text)$$, 'the second stays refunding, without a refund');
SELECT is((SELECT status::text FROM ordertimeout.payments WHERE payment_id = 'pr2'), 'late', 'its payment is not marked refunded');
SELECT is((SELECT count(*)::int FROM ordertimeout.events WHERE detail ->> 'refund_id' = 'RF-1'), 1, 'one refund event, the first');
SELECT is(ordertimeout.finish_refund(:c2, 'RF-2'), 'refunded', 'its own refund is recorded');
SELECT col_is_unique('ordertimeout', 'conflicts', ARRAY['refund_id']::name[], 'the rule is a unique constraint');

SELECT * FROM finish();
ROLLBACK;
