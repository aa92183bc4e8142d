-- resolve_conflict reinstate raises OT132 when what the order released is
-- gone (the stock sold to someone else) and changes nothing; refund is then
-- the way out.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(5);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10), ('B', 2);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}]');
SELECT ordertimeout.cancel_order('o1');
SELECT ordertimeout.create_order('o2', '[{"sku": "B", "qty": 1}]');   -- takes one of the two B
SELECT ordertimeout.confirm_payment('o1', 'p1');
SELECT conflict_id FROM ordertimeout.conflicts \gset
SELECT test.snapshot() AS before \gset

SELECT throws_ok(format('SELECT ordertimeout.resolve_conflict(%s, ''reinstate'')', :conflict_id), 'OT132', NULL,
    'B has 1 available, 2 needed: OT132');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing changed: A is not taken either');
SELECT is((SELECT resolution FROM ordertimeout.conflicts), NULL, 'the conflict stays open');

SELECT is(ordertimeout.resolve_conflict(:conflict_id, 'refund'), 'refunding', 'refund still works');
SELECT is((SELECT status FROM ordertimeout.orders WHERE order_id = 'o1'), 'CANCELLED', 'the order stays CANCELLED');

SELECT * FROM finish();
ROLLBACK;
