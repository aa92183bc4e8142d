-- resolve_conflict reinstate raises OT132 when the order's coupon is now held
-- by another order or its points are no longer free, and changes nothing.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(4);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
INSERT INTO ordertimeout.points_accounts (account_id, balance) VALUES ('acct', 100);

SELECT ordertimeout.create_order('coupon', '[{"sku": "A", "qty": 1}]', NULL, '{"coupon": "C1"}');
SELECT ordertimeout.cancel_order('coupon');
SELECT ordertimeout.create_order('other', '[{"sku": "A", "qty": 1}]', NULL, '{"coupon": "C1"}');
SELECT ordertimeout.confirm_payment('coupon', 'p1');

SELECT ordertimeout.create_order('points', '[{"sku": "A", "qty": 1}]', NULL, '{"points_account": "acct", "points": 80}');
SELECT ordertimeout.cancel_order('points');
SELECT ordertimeout.create_order('other2', '[{"sku": "A", "qty": 1}]', NULL, '{"points_account": "acct", "points": 30}');
SELECT ordertimeout.confirm_payment('points', 'p2');
SELECT test.snapshot() AS before \gset

SELECT throws_ok(format('SELECT ordertimeout.resolve_conflict(%s, ''reinstate'')',
                        (SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'coupon')),
    'OT132', NULL, 'the coupon is held by another order: OT132');
SELECT throws_ok(format('SELECT ordertimeout.resolve_conflict(%s, ''reinstate'')',
                        (SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'points')),
    'OT132', NULL, '80 points needed, 70 free: OT132');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing changed');
SELECT is((SELECT count(*)::integer FROM ordertimeout.conflicts WHERE resolution IS NULL), 2, 'both conflicts stay open');

SELECT * FROM finish();
ROLLBACK;
