-- resolve_conflict's note, the operator's reason, is kept on the conflict and
-- in its event, with the actor; a refund keeps the note of its claim. A bad
-- note (empty, over 500 characters, control or format characters) is OT149
-- and writes nothing.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(8);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order(id, '[{"sku": "A", "qty": 1}]') FROM unnest(ARRAY['o1', 'o2', 'o3']) AS id;
SELECT ordertimeout.cancel_order(id) FROM unnest(ARRAY['o1', 'o2', 'o3']) AS id;
SELECT ordertimeout.confirm_payment(id, 'p-' || id) FROM unnest(ARRAY['o1', 'o2', 'o3']) AS id;
SELECT set_config('ordertimeout.actor', 'console:ana', true);

SELECT test.snapshot() AS before \gset
SELECT throws_ok($$SELECT ordertimeout.resolve_conflict((SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'o1'), 'manual', '')$$,
    'OT149', NULL, 'an empty note: OT149');
SELECT throws_ok($$SELECT ordertimeout.resolve_conflict((SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'o1'), 'manual', repeat('x', 501))$$,
    'OT149', NULL, 'a note of 501 characters: OT149');
SELECT throws_ok($$SELECT ordertimeout.resolve_conflict((SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'o1'), 'manual', E'ok\u202Eevil')$$,
    'OT149', NULL, 'a bidi override in the note: OT149');
SELECT is(test.snapshot(), :'before', 'a refused note writes nothing');

SELECT ordertimeout.resolve_conflict((SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'o1'), 'manual', 'the buyer asked to keep it; the bank confirmed');
SELECT ordertimeout.resolve_conflict((SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'o2'), 'refund', 'out of stock since');
SELECT ordertimeout.finish_refund((SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'o2'), 'R2');
SELECT ordertimeout.resolve_conflict((SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'o3'), 'manual');

SELECT results_eq(
    $$SELECT order_id, resolution, note, resolved_by FROM ordertimeout.conflicts ORDER BY order_id$$,
    $$VALUES ('o1', 'manual', 'the buyer asked to keep it; the bank confirmed', 'console:ana'),
             ('o2', 'refunded', 'out of stock since', 'console:ana'),
             ('o3', 'manual', NULL, 'console:ana')$$,
    'the note is kept on the conflict; a refund keeps the note of its claim');
SELECT results_eq(
    $$SELECT order_id, detail ->> 'resolution', detail ->> 'note', actor FROM ordertimeout.events
       WHERE cause = 'conflict' AND detail ? 'note' ORDER BY event_id$$,
    $$VALUES ('o1', 'manual', 'the buyer asked to keep it; the bank confirmed', 'console:ana'),
             ('o2', 'refunding', 'out of stock since', 'console:ana')$$,
    'and in the event of the decision, with the actor');
SELECT is((SELECT count(*)::integer FROM ordertimeout.events WHERE order_id = 'o3' AND cause = 'conflict' AND detail ? 'note'),
    0, 'no note: no note key');
SELECT is(ordertimeout.resolve_conflict((SELECT conflict_id FROM ordertimeout.conflicts WHERE order_id = 'o1'), 'manual', 'the buyer asked to keep it; the bank confirmed'),
    'manual', 'a repeat with the same note is answered (another note: OT138, refuses_repeat_with_another_note.sql)');

SELECT * FROM finish();
ROLLBACK;
