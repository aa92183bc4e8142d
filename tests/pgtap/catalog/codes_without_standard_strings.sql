-- A session with standard_conforming_strings off (an old client library's
-- default) gets the same refusals, with their own codes, as any other:
-- before migration 000057 the '\u' literals of _shown made every refusal
-- that quotes the caller's input raise 22025 (invalid Unicode escape), and
-- the '\.' of the amount and time grammars matched any character.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SET LOCAL standard_conforming_strings = off;
SET LOCAL escape_string_warning = off;
SELECT plan(6);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('m1', '[{"sku":"A","qty":1}]', NULL, '{"amount":25,"currency":"EUR"}');

SELECT throws_ok($$SELECT ordertimeout.confirm_payment('m1', 'pm1', 25, 'eurx')$$, 'OT128', NULL,
    'a bad currency: OT128');
SELECT throws_ok($$SELECT ordertimeout.resolve_conflict(1, 'bogus')$$, 'OT131', NULL,
    'a bad resolution: OT131');
SELECT throws_like($$SELECT ordertimeout.resolve_conflict(1, E'bo\ngus')$$,
    '%"bo_u000agus"%', 'a refused value is quoted with its line break escaped');
SELECT throws_ok($$SELECT * FROM ordertimeout.reconcile_payments(
    '[{"payment_id": "p", "order_id": "m1", "amount": "1x5", "currency": "EUR", "status": "paid", "at": "2026-12-01T10:00:00Z"}]',
    '2026-11-30Z', '2026-12-02Z')$$, 'OT171', NULL, 'the amount grammar: "1x5" is no amount');
SELECT throws_ok($$SELECT * FROM ordertimeout.reconcile_payments(
    '[{"payment_id": "p", "order_id": "m1", "amount": "1", "currency": "EUR", "status": "paid", "at": "2026-12-01T10:00:00x5Z"}]',
    '2026-11-30Z', '2026-12-02Z')$$, 'OT171', NULL, 'the time grammar: "00x5" is no fraction of a second');
SELECT is((SELECT status FROM ordertimeout.orders WHERE order_id = 'm1'), 'PENDING', 'nothing paid');

SELECT * FROM finish();
ROLLBACK;
