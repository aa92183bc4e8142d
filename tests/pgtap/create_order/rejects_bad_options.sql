-- create_order raises OT114 for options that are not an object, have an
-- unknown key or a bad value, writing nothing.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(17);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
INSERT INTO ordertimeout.points_accounts (account_id, balance) VALUES ('acct', 100);
SELECT test.snapshot() AS before \gset

SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', NULL, '[]')$$,
    'OT114', NULL, 'options an array: OT114');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', NULL, '"coupon"')$$,
    'OT114', NULL, 'options a string: OT114');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', NULL, '{"discount": 5}')$$,
    'OT114', NULL, 'unknown key: OT114');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', NULL, '{"coupon": 5}')$$,
    'OT114', NULL, 'coupon a number: OT114');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', NULL, '{"coupon": ""}')$$,
    'OT114', NULL, 'coupon empty: OT114');
SELECT throws_ok(format('SELECT ordertimeout.create_order(''o1'', ''[{"sku": "A", "qty": 1}]'', NULL, %L)',
                        jsonb_build_object('coupon', repeat('c', 65))),
    'OT114', NULL, 'coupon of 65 characters: OT114');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', NULL, '{"points": 5}')$$,
    'OT114', NULL, 'points without points_account: OT114');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', NULL, '{"points_account": "acct"}')$$,
    'OT114', NULL, 'points_account without points: OT114');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', NULL, '{"points_account": "acct", "points": 0}')$$,
    'OT114', NULL, 'points 0: OT114');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', NULL, '{"points_account": "acct", "points": 1.5}')$$,
    'OT114', NULL, 'points 1.5: OT114');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', NULL, '{"points_account": "acct", "points": "5"}')$$,
    'OT114', NULL, 'points a string: OT114');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', NULL, '{"amount": -1}')$$,
    'OT126', NULL, 'amount negative: OT126');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', NULL, '{"amount": "10.00"}')$$,
    'OT126', NULL, 'amount a string: OT126');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', NULL, '{"currency": "eur"}')$$,
    'OT114', NULL, 'currency lowercase: OT114');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', NULL, '{"currency": "EURO"}')$$,
    'OT114', NULL, 'currency of 4 letters: OT114');
SELECT throws_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]', NULL, '{"precheck": "sometimes"}')$$,
    'OT114', NULL, 'precheck unknown: OT114');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written');

SELECT * FROM finish();
ROLLBACK;
