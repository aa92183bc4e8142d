-- put_points creates an account or sets its balance, never below what live
-- orders hold (OT147).
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(5);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT is((SELECT (account_id, balance, held) FROM ordertimeout.put_points('acct', 500)),
    ROW('acct'::text, 500::bigint, 0::bigint), 'creates the account and returns its row');
SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', NULL, '{"points_account": "acct", "points": 200}');

SELECT is((SELECT (balance, held) FROM ordertimeout.put_points('acct', 300)), ROW(300::bigint, 200::bigint),
    'sets the balance; held stays');
SELECT is((ordertimeout.put_points('acct', 200)).balance, 200::bigint, 'the balance may equal what is held');
SELECT throws_ok($$SELECT ordertimeout.put_points('acct', 199)$$, 'OT147', NULL, 'below the 200 held: OT147');
SELECT is((SELECT balance FROM ordertimeout.points_accounts), 200::bigint, 'the balance is unchanged');

SELECT * FROM finish();
ROLLBACK;
