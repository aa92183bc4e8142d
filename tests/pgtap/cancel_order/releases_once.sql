-- cancel_order cancels a PENDING order and releases its stock, coupon and
-- points exactly once, with one ledger row per released thing; a second call
-- returns false and writes nothing.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(11);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10), ('B', 10);
INSERT INTO ordertimeout.points_accounts (account_id, balance) VALUES ('acct', 1000);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 2}, {"sku": "B", "qty": 3}]', NULL,
    '{"coupon": "C1", "points_account": "acct", "points": 300}');

SELECT is(ordertimeout.cancel_order('o1'), true, 'returns true');
SELECT is((SELECT (status, cancel_cause, deadline_version) FROM ordertimeout.order_info('o1')),
          ROW('CANCELLED'::text, 'requested'::text, 2), 'CANCELLED, cause requested, version bumped');
SELECT isnt((SELECT cancelled_at FROM ordertimeout.orders), NULL, 'cancelled_at is set');
SELECT results_eq(
    $$SELECT sku, available::bigint, reserved::bigint, sold::bigint FROM ordertimeout.stock ORDER BY sku$$,
    $$VALUES ('A', 10::bigint, 0::bigint, 0::bigint), ('B', 10, 0, 0)$$,
    'the stock is available again');
SELECT isnt((SELECT released_at FROM ordertimeout.coupon_holds), NULL, 'the coupon hold is released');
SELECT results_eq(
    $$SELECT balance, held FROM ordertimeout.points_accounts$$,
    $$VALUES (1000::bigint, 0::bigint)$$,
    'the points are free again, the balance untouched');
SELECT results_eq(
    $$SELECT kind, resource_id, qty, cause FROM ordertimeout.releases WHERE order_id = 'o1' ORDER BY kind, resource_id$$,
    $$VALUES ('coupon', 'C1', 1::bigint, 'requested'), ('points', 'acct', 300, 'requested'),
             ('stock', 'A', 2, 'requested'), ('stock', 'B', 3, 'requested')$$,
    'one ledger row per sku, coupon and points');
SELECT is_empty($$SELECT 1 FROM public.river_job$$, 'the timer row is deleted; no gateway close without a payment attempt');
SELECT results_eq(
    $$SELECT from_status, to_status, cause::text, lateness FROM ordertimeout.events ORDER BY event_id DESC LIMIT 1$$,
    $$VALUES ('PENDING', 'CANCELLED', 'requested', NULL::interval)$$,
    'an event PENDING -> CANCELLED, cause requested, no lateness');

SELECT test.snapshot() AS before \gset
SELECT is(ordertimeout.cancel_order('o1'), false, 'a second call returns false');
SELECT is(test.snapshot(), :'before'::jsonb, 'the second call wrote nothing (released once)');

SELECT * FROM finish();
ROLLBACK;
