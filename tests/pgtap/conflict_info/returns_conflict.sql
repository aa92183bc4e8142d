-- conflict_info returns one conflict by id in any state, with the policy
-- that applies: the sidecar's resolve worker reads its conflict with it (it
-- read open_conflicts(100000) and took a conflict beyond the first 100,000
-- for resolved). No row for an unknown id; NULL: OT100.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(6);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order(id, '[{"sku":"A","qty":1}]', NULL, '{"amount":5,"currency":"EUR"}')
FROM unnest(ARRAY['o1', 'o2', 'o3']) AS id;
SELECT ordertimeout.cancel_order(id) FROM unnest(ARRAY['o1', 'o2', 'o3']) AS id;
SELECT ordertimeout.confirm_payment('o1', 'p1', 5);
SELECT ordertimeout.confirm_payment('o2', 'p2', 4, 'USD');
SELECT ordertimeout.confirm_payment('o3', 'p3', 5);
SELECT ordertimeout.resolve_conflict((SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'o2'), 'refund');
SELECT ordertimeout.resolve_conflict((SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'o3'), 'manual');

SELECT is(
    (SELECT row(c.*)::text FROM ordertimeout.conflict_info((SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'o1')) AS c),
    (SELECT row(c.*)::text FROM ordertimeout.open_conflicts() AS c WHERE c.order_id = 'o1'),
    'an open conflict: the row open_conflicts lists');
SELECT results_eq(
    $$SELECT order_id, kind, amount, currency, state
        FROM ordertimeout.conflict_info((SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'o2'))$$,
    $$VALUES ('o2', 'amount_mismatch', 4::numeric, 'USD', 'refunding')$$,
    'a conflict claimed for a refund');
SELECT results_eq(
    $$SELECT order_id, state, late_payment
        FROM ordertimeout.conflict_info((SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'o3'))$$,
    $$VALUES ('o3', 'resolved', 'reinstate')$$,
    'a resolved conflict, still found');
SELECT is((SELECT count(*)::integer FROM ordertimeout.conflict_info(-1)), 0, 'unknown id: no row');
SELECT throws_ok($$SELECT * FROM ordertimeout.conflict_info(NULL)$$, 'OT100', 'id must not be null', 'NULL: OT100');
SELECT is((SELECT count(*)::integer FROM ordertimeout.conflicts), 3, 'nothing written');

SELECT * FROM finish();
ROLLBACK;
