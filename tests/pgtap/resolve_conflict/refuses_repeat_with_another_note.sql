-- A repeat of the same resolution that brings another note than the one the
-- conflict keeps is refused with OT138 and writes nothing: answering it, as
-- before, told a second operator their note was kept when it was dropped.
-- Without a note, or with the very same note, a repeat is a retry and is
-- answered as before. The same holds for refund while the refund is under
-- way, and after it is recorded. Another resolution is still OT133 or OT134.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(21);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order(id, '[{"sku": "A", "qty": 1}]') FROM unnest(ARRAY['o1', 'o2', 'o3', 'o4']) AS id;
SELECT ordertimeout.cancel_order(id) FROM unnest(ARRAY['o1', 'o2', 'o3', 'o4']) AS id;
SELECT ordertimeout.confirm_payment(id, 'p-' || id) FROM unnest(ARRAY['o1', 'o2', 'o3', 'o4']) AS id;
SELECT conflict_id AS manual FROM ordertimeout.conflicts WHERE order_id = 'o1' \gset
SELECT conflict_id AS refunding FROM ordertimeout.conflicts WHERE order_id = 'o2' \gset
SELECT conflict_id AS refunded FROM ordertimeout.conflicts WHERE order_id = 'o3' \gset
SELECT conflict_id AS bare FROM ordertimeout.conflicts WHERE order_id = 'o4' \gset

SELECT set_config('ordertimeout.actor', 'console:ana', true);
SELECT ordertimeout.resolve_conflict(:manual, 'manual', 'the buyer keeps it; ticket 12');
SELECT ordertimeout.resolve_conflict(:refunding, 'refund', 'out of stock');
SELECT ordertimeout.resolve_conflict(:refunded, 'refund', 'sold out');
SELECT ordertimeout.resolve_conflict(:bare, 'manual');
SELECT set_config('ordertimeout.actor', 'sidecar:s1', true);
SELECT ordertimeout.finish_refund(:refunded, 'R3');

-- A second operator, with a note of their own.
SELECT set_config('ordertimeout.actor', 'console:ben', true);
SELECT test.snapshot() AS before \gset

SELECT throws_ok(format('SELECT ordertimeout.resolve_conflict(%s, ''manual'', ''a note of my own'')', :manual),
    'OT138', NULL, 'manual again with another note: OT138');
SELECT throws_like(format('SELECT ordertimeout.resolve_conflict(%s, ''manual'', ''a note of my own'')', :manual),
    format('conflict %s is already resolved the same way (manual) by console:ana: its note stays, and the note given is not kept', :manual),
    'the message names the conflict, its resolution and who resolved it');
SELECT throws_ok(format('SELECT ordertimeout.resolve_conflict(%s, ''manual'', ''a note'')', :bare),
    'OT138', NULL, 'a note on a repeat of a resolution kept without one: OT138');
SELECT throws_like(format('SELECT ordertimeout.resolve_conflict(%s, ''manual'', ''a note'')', :bare),
    '%it has no note, and the note given is not kept',
    'the message says the resolution has no note');
SELECT throws_ok(format('SELECT ordertimeout.resolve_conflict(%s, ''refund'', ''a note of my own'')', :refunding),
    'OT138', NULL, 'refund again with another note while refunding: OT138');
SELECT throws_like(format('SELECT ordertimeout.resolve_conflict(%s, ''refund'', ''a note of my own'')', :refunding),
    format('conflict %s is already claimed for a refund by console:ana: its note stays, and the note given is not kept', :refunding),
    'the message names who claimed the refund');
SELECT throws_ok(format('SELECT ordertimeout.resolve_conflict(%s, ''refund'', ''a note of my own'')', :refunded),
    'OT138', NULL, 'refund again with another note once refunded: OT138');
SELECT throws_like(format('SELECT ordertimeout.resolve_conflict(%s, ''refund'', ''a note of my own'')', :refunded),
    format('conflict %s is already resolved the same way (refunded) by sidecar:s1 (refund claimed by console:ana): its note stays%%', :refunded),
    'the message names who recorded the refund and who claimed it');
SELECT is(test.snapshot(), :'before'::jsonb, 'a refused repeat writes nothing');
SELECT results_eq(
    $$SELECT order_id, state, resolution, note, resolved_by, refund_started_by FROM ordertimeout.conflicts ORDER BY order_id$$,
    $$VALUES ('o1', 'resolved', 'manual', 'the buyer keeps it; ticket 12', 'console:ana', NULL),
             ('o2', 'refunding', NULL, 'out of stock', NULL, 'console:ana'),
             ('o3', 'resolved', 'refunded', 'sold out', 'sidecar:s1', 'console:ana'),
             ('o4', 'resolved', 'manual', NULL, 'console:ana', NULL)$$,
    'each conflict keeps its note and who resolved it');
SELECT is((SELECT count(*)::integer FROM ordertimeout.events WHERE cause = 'conflict'), 5,
    'no event for a refused repeat');

-- A retry: no note, or the very same note.
SELECT is(ordertimeout.resolve_conflict(:manual, 'manual'), 'manual', 'manual again without a note is answered');
SELECT is(ordertimeout.resolve_conflict(:manual, 'manual', 'the buyer keeps it; ticket 12'), 'manual',
    'manual again with the same note is answered');
SELECT is(ordertimeout.resolve_conflict(:bare, 'manual'), 'manual', 'manual again, neither with a note, is answered');
SELECT is(ordertimeout.resolve_conflict(:refunding, 'refund'), 'refunding', 'refund again without a note is answered while refunding');
SELECT is(ordertimeout.resolve_conflict(:refunding, 'refund', 'out of stock'), 'refunding',
    'refund again with the same note is answered while refunding');
SELECT is(ordertimeout.resolve_conflict(:refunded, 'refund', 'sold out'), 'refunded',
    'refund again with the same note is answered once refunded');
SELECT is(test.snapshot(), :'before'::jsonb, 'an answered repeat writes nothing');

-- Another resolution, with or without a note, is refused as before.
SELECT throws_ok(format('SELECT ordertimeout.resolve_conflict(%s, ''refund'', ''a note of my own'')', :manual),
    'OT133', NULL, 'another resolution with a note: still OT133');
SELECT throws_ok(format('SELECT ordertimeout.resolve_conflict(%s, ''reinstate'')', :bare),
    'OT133', NULL, 'another resolution without a note: still OT133');
SELECT throws_ok(format('SELECT ordertimeout.resolve_conflict(%s, ''manual'', ''a note of my own'')', :refunding),
    'OT134', NULL, 'manual with a note while refunding: still OT134');

SELECT * FROM finish();
ROLLBACK;
