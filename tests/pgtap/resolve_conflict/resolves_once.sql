-- A conflict is resolved exactly once: the same resolution again returns it
-- and writes nothing; another resolution raises OT133.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(4);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.cancel_order('o1');
SELECT ordertimeout.confirm_payment('o1', 'p1');
SELECT conflict_id FROM ordertimeout.conflicts \gset
SELECT ordertimeout.resolve_conflict(:conflict_id, 'reinstate');
SELECT test.snapshot() AS before \gset

SELECT is(ordertimeout.resolve_conflict(:conflict_id, 'reinstate'), 'reinstated', 'the same resolution again returns it');
SELECT throws_ok(format('SELECT ordertimeout.resolve_conflict(%s, ''refund'')', :conflict_id), 'OT133', NULL,
    'another resolution: OT133');
SELECT throws_ok(format('SELECT ordertimeout.resolve_conflict(%s, ''manual'')', :conflict_id), 'OT133', NULL,
    'manual after reinstated: OT133');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written (stock sold once)');

SELECT * FROM finish();
ROLLBACK;
