-- An error message that repeats the caller's input repeats it safely: cut
-- (with "…") and with control, format and line-separator characters written
-- as \uXXXX, so a message cannot forge a log line, hide text behind a bidi
-- override or copy 100,000 characters into a log. A review found all three.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(5);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT throws_ok($$SELECT ordertimeout.create_order('k1', '[{"sku":"A","qty":1}]', NULL, E'{"x\\nLOG:  injected \\u202e":1}')$$,
    'OT114', 'options has unknown key "x\u000aLOG:  injected \u202e" (allowed: coupon, points_account, points, amount, currency, precheck, method)',
    'an unknown option key: its line break and bidi override written out');
SELECT throws_ok($$SELECT ordertimeout.create_order('k2', E'[{"sku":"A","qty":1,"y\\r\\nERROR: fake":1}]')$$,
    'OT104', 'items[0] has unknown key "y\u000d\u000aERROR: fake" (allowed: sku, qty)',
    'an unknown item key: the same');
SELECT throws_ok(format($$SELECT ordertimeout.create_order('k3', '[{"sku":"A","qty":1%s}]')$$, repeat('0', 100000)),
    'OT106', 'items[0].qty must be between 1 and 1000000, got 1000000000000000000000000000000000000000…',
    'a quantity of 100,001 digits: cut at 40 characters');
SELECT throws_ok($$SELECT ordertimeout.create_order('k4', '[{"sku":"A","qty":1}]', NULL, jsonb_build_object('currency', E'EU\u202eR'))$$,
    'OT114', 'options.currency must be a three-letter ISO 4217 code such as "EUR", got "EU\u202eR"',
    'a currency with a bidi override');
SELECT is((SELECT count(*)::int FROM ordertimeout.orders), 0, 'nothing written');

SELECT * FROM finish();
ROLLBACK;
