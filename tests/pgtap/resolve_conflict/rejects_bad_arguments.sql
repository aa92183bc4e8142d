-- resolve_conflict's errors: OT130 unknown conflict, OT131 unknown
-- resolution, OT100 NULL, OT132 reinstating a double payment; none writes
-- anything.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(6);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]');
SELECT ordertimeout.confirm_payment('o1', 'p1');
SELECT ordertimeout.confirm_payment('o1', 'p2');      -- a double payment
SELECT conflict_id FROM ordertimeout.conflicts \gset
SELECT test.snapshot() AS before \gset

SELECT throws_ok($$SELECT ordertimeout.resolve_conflict(-1, 'refund')$$, 'OT130', NULL, 'unknown conflict: OT130');
SELECT throws_ok(format('SELECT ordertimeout.resolve_conflict(%s, ''refunded'')', :conflict_id), 'OT131', NULL,
    'resolution "refunded" (an outcome, not a resolution): OT131');
SELECT throws_ok($$SELECT ordertimeout.resolve_conflict(NULL, 'refund')$$, 'OT100', NULL, 'conflict_id NULL: OT100');
SELECT throws_ok(format('SELECT ordertimeout.resolve_conflict(%s, NULL)', :conflict_id), 'OT100', NULL, 'resolution NULL: OT100');
SELECT throws_ok(format('SELECT ordertimeout.resolve_conflict(%s, ''reinstate'')', :conflict_id), 'OT132', NULL,
    'reinstating a double payment on a PAID order: OT132');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT * FROM finish();
ROLLBACK;
