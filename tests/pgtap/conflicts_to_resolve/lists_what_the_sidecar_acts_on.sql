-- conflicts_to_resolve lists the unresolved conflicts the sidecar acts on,
-- oldest first: those claimed for a refund whatever the policy, and the open
-- ones whose policy (the payment method's, else the settings') is not
-- manual. Its limit applies to these alone: older conflicts left to a person
-- never hide a newer one the sidecar must resolve (the listener read
-- open_conflicts(10000) and dropped the manual ones after the limit: behind
-- 10,000 of them a claimed refund was never sent). Bad max: OT100/OT140.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(7);

SELECT ordertimeout.configure(late_payment => 'manual');
SELECT ordertimeout.put_payment_method('card', interval '15 minutes', late_payment => 'refund');
INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 100);
SELECT ordertimeout.create_order(id, '[{"sku":"A","qty":1}]', NULL, '{"amount":5,"currency":"EUR"}')
FROM unnest(ARRAY['m1', 'm2', 'm3', 'r1', 'c1', 'x1']) AS id;
SELECT ordertimeout.begin_payment('c1', 'pc1', NULL, 'card');
SELECT ordertimeout.fail_payment('c1', 'pc1');
SELECT ordertimeout.cancel_order(id) FROM unnest(ARRAY['m1', 'm2', 'm3', 'r1', 'c1', 'x1']) AS id;
-- oldest first: m1, m2, m3 (manual, open), r1 (manual, claimed for a
-- refund), c1 (paid by card: refund policy), x1 (resolved)
SELECT ordertimeout.confirm_payment(id, 'p-' || id, 5)
FROM unnest(ARRAY['m1', 'm2', 'm3', 'r1', 'c1', 'x1']) AS id;
SELECT ordertimeout.resolve_conflict((SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'r1'), 'refund');
SELECT ordertimeout.resolve_conflict((SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'x1'), 'manual');

SELECT results_eq(
    $$SELECT order_id, state, late_payment FROM ordertimeout.conflicts_to_resolve()$$,
    $$VALUES ('r1', 'refunding', 'manual'), ('c1', 'open', 'refund')$$,
    'the claimed refund and the open conflict under a refund policy, oldest first; manual and resolved ones left out');
SELECT results_eq(
    $$SELECT order_id FROM ordertimeout.conflicts_to_resolve(1)$$,
    $$VALUES ('r1')$$,
    'max counts only these: the three older manual conflicts do not fill it');
SELECT results_eq(
    $$SELECT order_id FROM ordertimeout.open_conflicts(1)$$,
    $$VALUES ('m1')$$,
    'open_conflicts still lists every unresolved conflict, oldest first');
SELECT is(
    (SELECT row(c.*)::text FROM ordertimeout.conflicts_to_resolve() AS c WHERE c.order_id = 'c1'),
    (SELECT row(c.*)::text FROM ordertimeout.open_conflicts() AS c WHERE c.order_id = 'c1'),
    'the same columns as open_conflicts');
SELECT throws_ok($$SELECT * FROM ordertimeout.conflicts_to_resolve(NULL)$$, 'OT100', NULL, 'max NULL: OT100');
SELECT throws_ok($$SELECT * FROM ordertimeout.conflicts_to_resolve(0)$$, 'OT140', NULL, 'max 0: OT140');
SELECT throws_ok($$SELECT * FROM ordertimeout.conflicts_to_resolve(100001)$$, 'OT140', NULL, 'max 100001: OT140');

SELECT * FROM finish();
ROLLBACK;
