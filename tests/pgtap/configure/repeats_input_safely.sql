-- The administration functions repeat a bad value safely too (see
-- create_order/repeats_input_safely.sql).
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(3);

SELECT throws_ok($$SELECT ordertimeout.configure(precheck => E'x\nLOG:  fake entry')$$,
    'OT145', 'precheck must be "attempted", "always" or "never", got "x\u000aLOG:  fake entry"',
    'configure: a line break written out');
SELECT throws_ok($$SELECT ordertimeout.put_payment_method(E'x\u202eevil', interval '1 hour')$$,
    'OT161', 'method must be 1 to 32 lower-case letters, digits or _, starting with a letter, got "x\u202eevil"',
    'put_payment_method: a bidi override written out');
SELECT throws_ok(format($$SELECT ordertimeout.configure(late_payment => %L)$$, repeat('z', 1000)),
    'OT145', format('late_payment must be "reinstate", "refund" or "manual", got "%s…"', repeat('z', 32)),
    'a long value: cut at 32 characters');

SELECT * FROM finish();
ROLLBACK;
