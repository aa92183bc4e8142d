-- cancel_checked cancels a PENDING order as a timeout when its deadline
-- version still matches the one the gateway check was made for and its
-- cancel_at has come (a check is queued only then); otherwise it returns
-- false and changes nothing.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(10);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.create_order('o2', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.create_order('paid', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.confirm_payment('paid', 'p1');
SELECT test.snapshot() AS before \gset

SELECT is(ordertimeout.cancel_checked('o2', 2), false, 'version mismatch: false');
SELECT is(ordertimeout.cancel_checked('paid', 2), false, 'a PAID order: false');
SELECT is(ordertimeout.cancel_checked('o1', 1), false, 'before its cancel_at: false');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

-- o1's deadline passes (its times moved back, as its owner may).
UPDATE ordertimeout.orders
SET created_at = created_at - interval '2 days', expire_at = expire_at - interval '2 days',
    cancel_at = cancel_at - interval '2 days'
WHERE order_id = 'o1';

SELECT is(ordertimeout.cancel_checked('o1', 1), true, 'version match: true');
SELECT results_eq(
    $$SELECT status::text, cancel_cause::text, cancel_reason FROM ordertimeout.orders WHERE order_id = 'o1'$$,
    $$VALUES ('CANCELLED', 'timeout', 'gateway check: not paid')$$,
    'cancelled as a timeout after the gateway check');
SELECT is((SELECT reserved::bigint FROM ordertimeout.stock), 1::bigint, 'its stock is released: only o2 still holds a unit');
SELECT is(ordertimeout.cancel_checked('o1', 2), false, 'a second call (version now 2): false');

SELECT throws_ok($$SELECT ordertimeout.cancel_checked('nope', 1)$$, 'OT120', NULL, 'unknown order: OT120');
SELECT throws_ok($$SELECT ordertimeout.cancel_checked('o1', NULL)$$, 'OT100', NULL, 'version NULL: OT100');

SELECT * FROM finish();
ROLLBACK;
