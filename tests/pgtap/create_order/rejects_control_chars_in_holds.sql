-- options.coupon and options.points_account follow the rule of every other
-- identifier: no control characters (OT114), and nothing written.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(3);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
INSERT INTO ordertimeout.points_accounts (account_id, balance) VALUES (E'u\t1', 100);
SELECT test.snapshot() AS before \gset

SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', NULL, '{"coupon": "C\u0001"}')$$,
    'OT114', NULL, 'a control character in options.coupon: OT114');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', NULL,
                                                    '{"points_account": "u\t1", "points": 1}')$$,
    'OT114', NULL, 'a control character in options.points_account: OT114');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT * FROM finish();
ROLLBACK;
