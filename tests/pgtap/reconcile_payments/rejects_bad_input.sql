-- A bad file is refused whole: the error names the line and the field, and
-- nothing of the file is applied (the good rows before the bad one neither).
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(23);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('live', '[{"sku":"A","qty":1}]');
SELECT test.snapshot() AS before \gset

CREATE FUNCTION test.rec(tx jsonb) RETURNS SETOF record LANGUAGE sql AS $$
    SELECT line, outcome FROM ordertimeout.reconcile_payments(tx, '2026-11-30Z', '2026-12-02Z') $$;
CREATE FUNCTION test.row(extra jsonb) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_array(
        '{"line": 2, "payment_id": "p-live", "order_id": "live", "amount": "1", "currency": "EUR", "status": "paid", "at": "2026-12-01T10:00:00Z"}'::jsonb,
        '{"line": 3, "payment_id": "p-x", "order_id": "live", "amount": "1", "currency": "EUR", "status": "paid", "at": "2026-12-01T10:00:00Z"}'::jsonb || extra) $$;

SELECT throws_ok($$SELECT * FROM ordertimeout.reconcile_payments(NULL, now(), now())$$, 'OT100', NULL, 'NULL: OT100');
SELECT throws_ok($$SELECT * FROM ordertimeout.reconcile_payments('{}', now() - interval '1 day', now())$$, 'OT170', NULL, 'not an array: OT170');
SELECT throws_ok($$SELECT * FROM ordertimeout.reconcile_payments('[]', now(), now() - interval '1 day')$$, 'OT172', NULL,
    'a period that ends before it starts: OT172');
SELECT throws_ok($$SELECT * FROM ordertimeout.reconcile_payments('[]', now() - interval '2 years', now())$$, 'OT172', NULL,
    'a period over 400 days: OT172');
SELECT throws_ok($$SELECT * FROM ordertimeout.reconcile_payments('[]', now(), 'infinity')$$, 'OT172', NULL,
    'an infinite end: OT172 (was a raw 22008)');
SELECT throws_ok($$SELECT * FROM ordertimeout.reconcile_payments('[]', '-infinity', now())$$, 'OT172', NULL,
    'an infinite start: OT172 (was a raw 22008)');
SELECT throws_ok($$SELECT * FROM ordertimeout.reconcile_payments('[]', '4713-01-01 BC', '294276-12-31')$$, 'OT172', NULL,
    'a span of 299,000 years: OT172 (the interval wrapped around and it was accepted)');
SELECT throws_ok($$SELECT * FROM ordertimeout.reconcile_payments('[]', '2026-01-01Z', '2027-02-05 00:00:01Z')$$, 'OT172', NULL,
    '400 days and a second: OT172');
SELECT throws_ok($$SELECT * FROM ordertimeout.reconcile_payments('[]', now() - interval '1 day', now(), true, 'Bad Source')$$,
    'OT173', NULL, 'a bad source: OT173');
SELECT throws_ok($$SELECT * FROM test.rec(test.row('{"amount": "NaN"}')) AS (line integer, outcome text)$$, 'OT171',
    'line 3: amount must be a decimal number from 0 to below 10^15 with at most 6 decimals, got NaN', 'amount NaN: line and field named');
SELECT throws_ok($$SELECT * FROM test.rec(test.row('{"amount": "0x1p3"}')) AS (line integer, outcome text)$$, 'OT171', NULL, 'a hex amount');
SELECT throws_ok($$SELECT * FROM test.rec(test.row('{"amount": "-1"}')) AS (line integer, outcome text)$$, 'OT171', NULL, 'a negative amount');
SELECT throws_ok($$SELECT * FROM test.rec(test.row('{"amount": "1e3"}')) AS (line integer, outcome text)$$, 'OT171', NULL, 'an exponent');
SELECT throws_ok($$SELECT * FROM test.rec(test.row('{"currency": "eur"}')) AS (line integer, outcome text)$$, 'OT171', NULL, 'a bad currency');
SELECT throws_ok($$SELECT * FROM test.rec(test.row('{"status": "success"}')) AS (line integer, outcome text)$$, 'OT171', NULL, 'an unknown status');
SELECT throws_ok($$SELECT * FROM test.rec(test.row('{"at": "2026-13-45T10:00:00Z"}')) AS (line integer, outcome text)$$, 'OT171',
    'line 3: at must be an ISO 8601 time with a zone, such as 2026-12-01T10:00:00Z', 'an impossible date');
SELECT throws_ok($$SELECT * FROM test.rec(test.row('{"at": "2026-12-01 10:00"}')) AS (line integer, outcome text)$$, 'OT171', NULL, 'a time without a zone');
SELECT throws_ok($$SELECT * FROM test.rec(test.row('{"at": "2026-12-01T10:00:00+16:00"}')) AS (line integer, outcome text)$$, 'OT171',
    'line 3: at must be an ISO 8601 time with a zone, such as 2026-12-01T10:00:00Z', 'an offset beyond 15:59: line and field named (was a raw 22009)');
SELECT throws_ok($$SELECT * FROM test.rec(test.row('{"line": 0}')) AS (line integer, outcome text)$$, 'OT171',
    'line 2: line must be a positive integer', 'line 0 is not a line number');
SELECT throws_ok($$SELECT * FROM test.rec(test.row('{"payment_id": ".."}')) AS (line integer, outcome text)$$, 'OT171', NULL, 'a dot-segment id');
SELECT throws_ok($$SELECT * FROM test.rec(test.row('{"surprise": 1}')) AS (line integer, outcome text)$$, 'OT171', NULL, 'an unknown field');
SELECT throws_ok($$SELECT * FROM test.rec(test.row('{"payment_id": "p-live"}')) AS (line integer, outcome text)$$, 'OT171', NULL,
    'the same payment twice');
SELECT is(test.snapshot(), :'before'::jsonb, 'nothing written: the good line 2 was not applied either');

SELECT * FROM finish();
ROLLBACK;
