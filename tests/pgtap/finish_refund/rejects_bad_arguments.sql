-- finish_refund refuses what it cannot record, and writes nothing: NULLs
-- (OT100), an unknown conflict (OT130), a conflict that was not claimed for a
-- refund or was resolved otherwise (OT135), a bad refund id (OT136).
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(9);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order(id, '[{"sku":"A","qty":1}]') FROM unnest(ARRAY['o1', 'o2']) AS id;
SELECT ordertimeout.cancel_order(id) FROM unnest(ARRAY['o1', 'o2']) AS id;
SELECT ordertimeout.confirm_payment('o1', 'p1');
SELECT ordertimeout.confirm_payment('o2', 'p2');
SELECT conflict_id AS c1 FROM ordertimeout.conflicts WHERE order_id = 'o1' \gset
SELECT conflict_id AS c2 FROM ordertimeout.conflicts WHERE order_id = 'o2' \gset
SELECT ordertimeout.resolve_conflict(:c2, 'manual');
SELECT test.snapshot() AS before \gset

SELECT throws_ok($$SELECT ordertimeout.finish_refund(NULL, 'R1')$$, 'OT100', NULL, 'conflict_id NULL: OT100');
SELECT throws_ok(format('SELECT ordertimeout.finish_refund(%s, NULL)', :c1), 'OT100', NULL, 'refund_id NULL: OT100');
SELECT throws_ok($$SELECT ordertimeout.finish_refund(-1, 'R1')$$, 'OT130', NULL, 'unknown conflict: OT130');
SELECT throws_ok(format('SELECT ordertimeout.finish_refund(%s, %L)', :c1, 'R1'), 'OT135', NULL,
    'an open conflict, not claimed for a refund: OT135');
SELECT throws_ok(format('SELECT ordertimeout.finish_refund(%s, %L)', :c2, 'R1'), 'OT135', NULL,
    'a conflict resolved as manual: OT135');
SELECT throws_ok(format('SELECT ordertimeout.finish_refund(%s, %L)', :c1, ''), 'OT136', NULL, 'empty refund_id: OT136');
SELECT throws_ok(format('SELECT ordertimeout.finish_refund(%s, %L)', :c1, repeat('r', 129)), 'OT136', NULL,
    '129 characters: OT136');
SELECT throws_ok(format('SELECT ordertimeout.finish_refund(%s, %L)', :c1, E'R\u202e1'), 'OT136', NULL,
    'a bidi override: OT136');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT * FROM finish();
ROLLBACK;
