-- put_points's errors: OT146 bad account_id, OT143 balance out of 0..10^15,
-- OT100 NULL; none writes anything.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(8);

SELECT test.snapshot() AS before \gset
SELECT throws_ok($$SELECT ordertimeout.put_points('', 1)$$, 'OT146', NULL, 'empty account_id: OT146');
SELECT throws_ok(format('SELECT ordertimeout.put_points(%L, 1)', repeat('a', 65)), 'OT146', NULL, 'account_id of 65 characters: OT146');
SELECT throws_ok($$SELECT ordertimeout.put_points(E'a\tb', 1)$$, 'OT146', NULL, 'account_id with a control character: OT146');
SELECT throws_ok($$SELECT ordertimeout.put_points('acct', -1)$$, 'OT143', NULL, 'balance -1: OT143');
SELECT throws_ok($$SELECT ordertimeout.put_points('acct', 1000000000000001)$$, 'OT143', NULL, 'balance 10^15 + 1: OT143');
SELECT throws_ok($$SELECT ordertimeout.put_points(NULL, 1)$$, 'OT100', NULL, 'account_id NULL: OT100');
SELECT throws_ok($$SELECT ordertimeout.put_points('acct', NULL)$$, 'OT100', NULL, 'balance NULL: OT100');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT * FROM finish();
ROLLBACK;
