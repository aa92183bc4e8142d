-- open_conflicts lists the unresolved conflicts, oldest first, with what was
-- paid and their state: open ones and those claimed for a refund; resolved
-- ones are gone. Bad max: OT100/OT140.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(5);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order(id, '[{"sku":"A","qty":1}]', NULL, '{"amount":5,"currency":"EUR"}')
FROM unnest(ARRAY['o1', 'o2', 'o3']) AS id;
SELECT ordertimeout.cancel_order(id) FROM unnest(ARRAY['o1', 'o2', 'o3']) AS id;
SELECT ordertimeout.confirm_payment('o1', 'p1', 5);
SELECT ordertimeout.confirm_payment('o2', 'p2', 4, 'USD');
SELECT ordertimeout.confirm_payment('o3', 'p3', 5);
SELECT ordertimeout.resolve_conflict((SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'o2'), 'refund');
SELECT ordertimeout.resolve_conflict((SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'o3'), 'manual');

SELECT results_eq(
    $$SELECT order_id, payment_id, kind, amount, currency, state FROM ordertimeout.open_conflicts()$$,
    $$VALUES ('o1', 'p1', 'late_payment', 5::numeric, 'EUR', 'open'),
             ('o2', 'p2', 'amount_mismatch', 4::numeric, 'USD', 'refunding')$$,
    'open and refunding conflicts, oldest first; the resolved one is gone');
SELECT is((SELECT count(*)::integer FROM ordertimeout.open_conflicts(1)), 1, 'max limits the list');
SELECT throws_ok($$SELECT * FROM ordertimeout.open_conflicts(NULL)$$, 'OT100', NULL, 'max NULL: OT100');
SELECT throws_ok($$SELECT * FROM ordertimeout.open_conflicts(0)$$, 'OT140', NULL, 'max 0: OT140');
SELECT throws_ok($$SELECT * FROM ordertimeout.open_conflicts(100001)$$, 'OT140', NULL, 'max 100001: OT140');

SELECT * FROM finish();
ROLLBACK;
