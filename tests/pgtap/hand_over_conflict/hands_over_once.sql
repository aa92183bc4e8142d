-- hand_over_conflict hands an open conflict to a person: it stays open,
-- keeps when and why (handed_over_at, handed_over_why: in open_conflicts and
-- conflict_info too) and an event, and conflicts_to_resolve leaves it out,
-- so that the sidecar does not ask the gateway about it again at every
-- rescan. A repeat is answered and keeps the first reason. A person can
-- still resolve it; a person's claim of its refund brings it back to the
-- sidecar; a confirmation that gives it its amount later does not (the
-- doubt stays: a refund of an amount the gateway never confirmed could give
-- back part of the payment). A conflict resolved or being refunded is refused (OT133, OT134),
-- an unknown one OT130, a bad reason OT149 or OT100, each writing nothing.
-- The app role may not call it; the sidecar may.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(22);

SELECT ordertimeout.configure(late_payment => 'reinstate');
INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order(id, '[{"sku": "A", "qty": 1}]', NULL, '{"amount": 5, "currency": "EUR"}')
FROM unnest(ARRAY['o1', 'o2', 'o3', 'o4']) AS id;
SELECT ordertimeout.cancel_order(id) FROM unnest(ARRAY['o1', 'o2', 'o3', 'o4']) AS id;
SELECT ordertimeout.confirm_payment(id, 'p-' || id, 5, 'EUR') FROM unnest(ARRAY['o1', 'o2', 'o3', 'o4']) AS id;
SELECT conflict_id AS c1 FROM ordertimeout.conflicts WHERE order_id = 'o1' \gset
SELECT conflict_id AS c2 FROM ordertimeout.conflicts WHERE order_id = 'o2' \gset
SELECT conflict_id AS c3 FROM ordertimeout.conflicts WHERE order_id = 'o3' \gset
SELECT conflict_id AS c4 FROM ordertimeout.conflicts WHERE order_id = 'o4' \gset
SELECT ordertimeout.resolve_conflict(:c3, 'manual');
SELECT ordertimeout.resolve_conflict(:c4, 'refund');

-- Bad input writes nothing.
SELECT test.snapshot() AS before \gset
SELECT throws_ok(format('SELECT ordertimeout.hand_over_conflict(%s, %L)', :c1, ''), 'OT149', NULL, 'an empty reason: OT149');
SELECT throws_ok(format('SELECT ordertimeout.hand_over_conflict(%s, %L)', :c1, repeat('x', 501)), 'OT149', NULL, 'a reason of 501 characters: OT149');
SELECT throws_ok(format('SELECT ordertimeout.hand_over_conflict(%s, %L)', :c1, E'two\nlines'), 'OT149', NULL, 'a line break in the reason: OT149');
SELECT throws_ok(format('SELECT ordertimeout.hand_over_conflict(%s, NULL)', :c1), 'OT100', NULL, 'a null reason: OT100');
SELECT throws_ok($$SELECT ordertimeout.hand_over_conflict(NULL, 'why')$$, 'OT100', NULL, 'a null conflict_id: OT100');
SELECT throws_ok($$SELECT ordertimeout.hand_over_conflict(-1, 'why')$$, 'OT130', NULL, 'an unknown conflict: OT130');
SELECT throws_ok(format('SELECT ordertimeout.hand_over_conflict(%s, %L)', :c3, 'why'), 'OT133', NULL, 'a resolved conflict: OT133');
SELECT throws_ok(format('SELECT ordertimeout.hand_over_conflict(%s, %L)', :c4, 'why'), 'OT134', NULL, 'a conflict being refunded: OT134');
SELECT is(test.snapshot(), :'before', 'a refused call writes nothing');

SELECT is(ordertimeout.hand_over_conflict(:c1, 'sidecar: the gateway did not tell'), 'handed_over', 'handed over');
SELECT is(ordertimeout.hand_over_conflict(:c1, 'another reason'), 'handed_over', 'a repeat is answered');
SELECT results_eq(
    format('SELECT state, handed_over_why, handed_over_at IS NOT NULL FROM ordertimeout.conflict_info(%s)', :c1),
    $$VALUES ('open', 'sidecar: the gateway did not tell', true)$$,
    'it stays open and keeps the first reason, shown by conflict_info');
SELECT results_eq(
    $$SELECT order_id, handed_over_why FROM ordertimeout.open_conflicts() ORDER BY conflict_id$$,
    $$VALUES ('o1', 'sidecar: the gateway did not tell'), ('o2', NULL), ('o4', NULL)$$,
    'open_conflicts lists it with its reason');
SELECT results_eq(
    $$SELECT order_id FROM ordertimeout.conflicts_to_resolve() ORDER BY conflict_id$$,
    $$VALUES ('o2'), ('o4')$$,
    'conflicts_to_resolve leaves it out');
SELECT results_eq(
    $$SELECT order_id, cause::text, detail ->> 'handed_over_why', detail ? 'resolution' FROM ordertimeout.events
       WHERE detail ? 'handed_over_why' AND order_id = 'o1'$$,
    $$VALUES ('o1', 'conflict', 'sidecar: the gateway did not tell', false)$$,
    'one event, with the reason and no resolution');

-- With webhooks on, the hand-over is delivered (conflict.handed_over).
SELECT ordertimeout.configure(webhooks => true);
SELECT ordertimeout.hand_over_conflict(:c2, 'sidecar: held in USD');
SELECT is(
    (SELECT count(*)::int FROM public.river_job AS j
      WHERE j.kind = 'ordertimeout_webhook'
        AND (j.args ->> 'event_id')::bigint = (SELECT max(event_id) FROM ordertimeout.events WHERE detail ? 'handed_over_why')),
    1, 'with webhooks on, the hand-over''s event is queued for delivery');
SELECT ordertimeout.configure(webhooks => false);

-- A person's refund claim brings it back to the sidecar; a person resolves.
SELECT ordertimeout.resolve_conflict(:c1, 'refund', 'the bank confirmed the money');
SELECT results_eq(
    $$SELECT order_id, state FROM ordertimeout.conflicts_to_resolve() ORDER BY conflict_id$$,
    $$VALUES ('o1', 'refunding'), ('o4', 'refunding')$$,
    'claimed for a refund by a person, it is the sidecar''s again (o2, handed over above, is not)');
SELECT is(ordertimeout.resolve_conflict(:c2, 'reinstate'), 'reinstated', 'a person can still reinstate one handed over');
SELECT is((SELECT status::text FROM ordertimeout.orders WHERE order_id = 'o2'), 'PAID', 'and the order is paid');

-- A conflict handed over without its amount stays handed over when the
-- amount is learned.
SELECT ordertimeout.create_order('o5', '[{"sku": "A", "qty": 1}]', NULL, '{"amount": 5, "currency": "EUR"}');
SELECT ordertimeout.cancel_order('o5');
SELECT ordertimeout.confirm_payment('o5', 'p-o5');
SELECT ordertimeout.hand_over_conflict((SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'o5'), 'sidecar: pending');
SELECT is(ordertimeout.confirm_payment('o5', 'p-o5', 7, 'EUR'), 'conflict', 'the amount learned');
SELECT results_eq(
    $$SELECT kind, handed_over_why, order_id IN (SELECT order_id FROM ordertimeout.conflicts_to_resolve())
        FROM ordertimeout.conflicts WHERE order_id = 'o5'$$,
    $$VALUES ('amount_mismatch', 'sidecar: pending', false)$$,
    'with its amount, it is still the person''s');

SET LOCAL ROLE ordertimeout_app;
SELECT throws_ok(format('SELECT ordertimeout.hand_over_conflict(%s, %L)', :c1, 'why'), '42501', NULL, 'the app role may not hand over');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
