-- The hold of a coupon that an order spent outlives the order (purge_orders
-- keeps it, under the order's id). create_order refuses that id with OT116
-- and writes nothing, with or without a coupon: before migration 000026 a new
-- coupon raised a raw 23505 on coupon_holds_pkey, the same coupon OT110, and
-- no coupon created an order that the checks read as holding the old one.
-- The ids of purged orders that spent no coupon stay free, and an order that
-- exists is still answered by its id as before (a live hold under the id is
-- its own). _reclaim takes back only a hold that the cancel released.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(11);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 100);
SELECT ordertimeout.create_order('spent', '[{"sku": "A", "qty": 1}]', NULL, '{"coupon": "C1"}');
SELECT ordertimeout.confirm_payment('spent', 'p-spent');
SELECT ordertimeout.create_order('released', '[{"sku": "A", "qty": 1}]', NULL, '{"coupon": "C2"}');
SELECT ordertimeout.cancel_order('released');
SELECT ordertimeout.close_cancelled(interval '0');
SELECT ordertimeout.create_order('plain', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.confirm_payment('plain', 'p-plain');
SELECT is(ordertimeout.purge_orders(interval '0', 1000, interval '0'), 3, 'the three orders are purged');
SELECT test.snapshot() AS before \gset

SELECT throws_ok(
    $$SELECT ordertimeout.create_order('spent', '[{"sku": "A", "qty": 1}]')$$,
    'OT116', 'order_id "spent" belonged to an order that purge_orders deleted after it spent coupon "C1": the hold is kept under that id, use another one',
    'no coupon: OT116, naming the id and the coupon');
SELECT throws_ok(
    $$SELECT ordertimeout.create_order('spent', '[{"sku": "A", "qty": 1}]', NULL, '{"coupon": "C3"}')$$,
    'OT116', NULL, 'another coupon: OT116 (was a raw 23505)');
SELECT throws_ok(
    $$SELECT ordertimeout.create_order('spent', '[{"sku": "A", "qty": 1}]', NULL, '{"coupon": "C1"}')$$,
    'OT116', NULL, 'the spent coupon again: OT116');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT is((ordertimeout.create_order('released', '[{"sku": "A", "qty": 1}]', NULL, '{"coupon": "C2"}')).created, true,
    'the id of a purged order whose coupon was released is free, and so is its coupon');
SELECT is((ordertimeout.create_order('plain', '[{"sku": "A", "qty": 1}]')).created, true,
    'the id of a purged order without a coupon is free');
SELECT is((ordertimeout.create_order('released', '[{"sku": "A", "qty": 1}]', NULL, '{"coupon": "C2"}')).created, false,
    'an order that exists with a coupon: the same call answers it, not created');
SELECT throws_ok(
    $$SELECT ordertimeout.create_order('released', '[{"sku": "A", "qty": 2}]', NULL, '{"coupon": "C2"}')$$,
    'OT115', NULL, 'and other content under its id is still OT115');

-- A database from before 000026 may hold an order under such an id (made
-- here by hand: the spent hold of a predecessor under a cancelled order's
-- id). A late payment of it, reinstated, leaves the old hold as it was.
SELECT ordertimeout.create_order('legacy', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.cancel_order('legacy');
INSERT INTO ordertimeout.coupon_holds (order_id, coupon_id, held_at, used_at)
VALUES ('legacy', 'C9', timestamptz '2026-01-01 00:00Z', timestamptz '2026-01-02 00:00Z');
SELECT ordertimeout.confirm_payment('legacy', 'p-legacy');
SELECT is(ordertimeout.resolve_conflict((SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'legacy'), 'reinstate'),
    'reinstated', 'the late payment is reinstated');
SELECT results_eq(
    $$SELECT coupon_id, used_at, released_at FROM ordertimeout.coupon_holds WHERE order_id = 'legacy'$$,
    $$VALUES ('C9', timestamptz '2026-01-02 00:00Z', NULL::timestamptz)$$,
    'the old hold is untouched: its used_at is not rewritten');

SELECT * FROM finish();
ROLLBACK;
