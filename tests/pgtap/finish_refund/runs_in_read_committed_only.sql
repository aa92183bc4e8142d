-- finish_refund refuses to run under REPEATABLE READ or SERIALIZABLE
-- (OT154), writing nothing: its snapshot would not show a refund id that a
-- purge committed after the transaction began has kept (purged_refunds), and
-- one refund would be recorded as two conflicts'. A review reproduced that
-- under both levels.
BEGIN ISOLATION LEVEL REPEATABLE READ;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(3);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('r1', '[{"sku":"A","qty":1}]', NULL, '{"amount":10,"currency":"EUR"}');
SELECT ordertimeout.cancel_order('r1');
SELECT ordertimeout.confirm_payment('r1', 'pr1', 10);
SELECT conflict_id AS c1 FROM ordertimeout.conflicts WHERE payment_id = 'pr1' \gset
SELECT ordertimeout.resolve_conflict(:c1, 'refund');
SELECT test.snapshot() AS before \gset

SELECT throws_ok(format('SELECT ordertimeout.finish_refund(%s, %L)', :c1, 'RF-1'), 'OT154',
    'finish_refund must run in a READ COMMITTED transaction, not REPEATABLE READ: under an older snapshot it would not see a refund id that a purge has just kept',
    'REPEATABLE READ: OT154');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');
SELECT is((SELECT state FROM ordertimeout.conflicts WHERE conflict_id = :c1), 'refunding', 'the conflict stays refunding');

SELECT * FROM finish();
ROLLBACK;
