-- resolve_conflict reinstate takes a late-paid cancelled order back: it is
-- PAID again, its released stock goes straight from available to sold, its
-- coupon is used and its points spent, the ledger rows are marked reclaimed
-- and the conflict is resolved.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SET LOCAL ordertimeout.actor = 'sidecar-1';
SELECT plan(11);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10), ('B', 10);
INSERT INTO ordertimeout.points_accounts (account_id, balance) VALUES ('acct', 1000);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 2}, {"sku": "B", "qty": 1}]', NULL,
    '{"coupon": "C1", "points_account": "acct", "points": 300}');
SELECT ordertimeout.cancel_order('o1');
SELECT ordertimeout.confirm_payment('o1', 'p1');
SELECT conflict_id FROM ordertimeout.conflicts \gset

SELECT is(ordertimeout.resolve_conflict(:conflict_id, 'reinstate'), 'reinstated', 'returns reinstated');
SELECT results_eq(
    $$SELECT status::text, paid_at IS NOT NULL, cancelled_at, cancel_cause::text FROM ordertimeout.orders$$,
    $$VALUES ('PAID', true, NULL::timestamptz, NULL::text)$$,
    'the order is PAID again; the cancel is cleared');
SELECT results_eq(
    $$SELECT sku, available::bigint, reserved::bigint, sold::bigint FROM ordertimeout.stock ORDER BY sku$$,
    $$VALUES ('A', 8::bigint, 0::bigint, 2::bigint), ('B', 9, 0, 1)$$,
    'stock moved from available to sold');
SELECT results_eq(
    $$SELECT released_at, used_at IS NOT NULL FROM ordertimeout.coupon_holds$$,
    $$VALUES (NULL::timestamptz, true)$$,
    'the coupon is used');
SELECT results_eq(
    $$SELECT balance, held FROM ordertimeout.points_accounts$$,
    $$VALUES (700::bigint, 0::bigint)$$,
    'the points are spent');
SELECT results_eq(
    $$SELECT released_at, used_at IS NOT NULL FROM ordertimeout.points_holds$$,
    $$VALUES (NULL::timestamptz, true)$$,
    'the points hold is used');
SELECT is((SELECT count(*)::integer FROM ordertimeout.releases WHERE reclaimed_at IS NOT NULL), 4,
    'all four ledger rows are marked reclaimed');
SELECT results_eq(
    $$SELECT resolution, resolved_at IS NOT NULL, resolved_by FROM ordertimeout.conflicts$$,
    $$VALUES ('reinstated', true, 'sidecar-1')$$,
    'the conflict is resolved, by the session''s actor');
SELECT is((SELECT status FROM ordertimeout.payments), 'confirmed', 'the payment is confirmed');
SELECT results_eq(
    $$SELECT from_status, to_status, cause::text, actor FROM ordertimeout.events ORDER BY event_id DESC LIMIT 1$$,
    $$VALUES ('CANCELLED', 'PAID', 'conflict', 'sidecar-1')$$,
    'an event CANCELLED -> PAID, cause conflict');
SELECT is(ordertimeout.confirm_payment('o1', 'p1'), 'paid', 'the gateway''s repeat of the confirmation now returns paid');

SELECT * FROM finish();
ROLLBACK;
