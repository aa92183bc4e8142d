-- create_order raises OT111 for an unknown points account and OT112 for more
-- points than the account has free, writing nothing.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(4);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
INSERT INTO ordertimeout.points_accounts (account_id, balance) VALUES ('acct', 100);
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', NULL, '{"points_account": "acct", "points": 60}');
SELECT test.snapshot() AS before \gset

SELECT throws_ok($$SELECT ordertimeout.create_order('o2', '[{"sku": "A", "qty": 1}]', NULL, '{"points_account": "nobody", "points": 1}')$$,
    'OT111', NULL, 'unknown account: OT111');
SELECT throws_ok($$SELECT ordertimeout.create_order('o2', '[{"sku": "A", "qty": 1}]', NULL, '{"points_account": "acct", "points": 41}')$$,
    'OT112', NULL, '41 points with 100 - 60 free: OT112');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');
SELECT lives_ok($$SELECT ordertimeout.create_order('o2', '[{"sku": "A", "qty": 1}]', NULL, '{"points_account": "acct", "points": 40}')$$,
    'exactly the free points are fine');

SELECT * FROM finish();
ROLLBACK;
