-- One refund gives back one payment, also after purge_orders deleted the
-- conflict that recorded it: the refund ids of purged conflicts stay
-- (purged_refunds), and finish_refund refuses one for another conflict
-- (OT177), nothing written. A review reproduced the second conflict recorded
-- as refunded by the first one's refund once the first order was purged.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(9);

SELECT ordertimeout.configure(late_payment => 'manual');
INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order(o, '[{"sku":"A","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}')
FROM unnest(ARRAY['r1', 'r2']) AS o;
SELECT ordertimeout.cancel_order(o) FROM unnest(ARRAY['r1', 'r2']) AS o;
SELECT ordertimeout.confirm_payment(o, 'p' || o, 10) FROM unnest(ARRAY['r1', 'r2']) AS o;
SELECT conflict_id AS c1 FROM ordertimeout.conflicts WHERE payment_id = 'pr1' \gset
SELECT conflict_id AS c2 FROM ordertimeout.conflicts WHERE payment_id = 'pr2' \gset
SELECT ordertimeout.resolve_conflict(:c1, 'refund');
SELECT ordertimeout.resolve_conflict(:c2, 'refund');
SELECT ordertimeout.finish_refund(:c1, 'RF-1');
SELECT ordertimeout.close_cancelled('0');

SELECT is(ordertimeout.purge_orders('0', 10), 1, 'the refunded order r1 is purged (r2 has a conflict still refunding)');
SELECT results_eq($$SELECT refund_id, conflict_id, order_id, payment_id FROM ordertimeout.purged_refunds$$,
    format($$VALUES ('RF-1', %s::bigint, 'r1', 'pr1')$$, :c1), 'its conflict''s refund id is kept, with what it gave back');
SELECT throws_like(format('SELECT ordertimeout.finish_refund(%s, %L)', :c2, 'RF-1'),
    format('refund_id "RF-1" was the refund of conflict %s (payment "pr1" of order "r1", purged at %%): it cannot also be the refund of conflict %s (payment "pr2"); one of the two payments may not be refunded, not recorded (a person checks it at the gateway)', :c1, :c2),
    'the same refund for r2''s conflict: refused, the purged conflict named');
SELECT throws_ok(format('SELECT ordertimeout.finish_refund(%s, %L)', :c2, 'RF-1'), 'OT177', NULL, 'with OT177');
SELECT results_eq(format($$SELECT state, refund_id FROM ordertimeout.conflicts WHERE conflict_id = %s$$, :c2),
    $$VALUES ('refunding', NULL::text)$$, 'r2''s conflict stays refunding, without a refund');
SELECT is((SELECT status::text FROM ordertimeout.payments WHERE payment_id = 'pr2'), 'late', 'its payment is not marked refunded');
SELECT is(ordertimeout.finish_refund(:c2, 'RF-2'), 'refunded', 'its own refund is recorded');

-- A second purge of the same refund id keeps the first record.
SELECT ordertimeout.close_cancelled('0');
SELECT is(ordertimeout.purge_orders('0', 10), 1, 'r2 purged too');
SELECT results_eq($$SELECT refund_id, order_id FROM ordertimeout.purged_refunds ORDER BY 1$$,
    $$VALUES ('RF-1', 'r1'), ('RF-2', 'r2')$$, 'both refund ids kept');

SELECT * FROM finish();
ROLLBACK;
