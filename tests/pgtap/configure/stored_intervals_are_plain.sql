-- The stored intervals of settings and payment_methods follow the rule the
-- functions check: days, hours, minutes, seconds; no month part, no negative
-- part (a value written by hand, or configured before migration 000029, is
-- refused by the table itself since 000033).
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(7);

SELECT throws_ok($$UPDATE ordertimeout.settings SET grace = '1 day -23:30:00'$$, '23514', NULL,
    'a grace with a negative part: refused by the table');
SELECT throws_ok($$UPDATE ordertimeout.settings SET default_timeout = '1 mon -29 days'$$, '23514', NULL,
    'a timeout with a month part: refused by the table');
SELECT throws_ok($$UPDATE ordertimeout.settings SET paying_window = '2 days -47:00:00'$$, '23514', NULL,
    'a paying window with a negative part: refused by the table');
SELECT throws_ok($$UPDATE ordertimeout.settings SET remind_before = '1 day -00:00:01'$$, '23514', NULL,
    'a reminder with a negative part: refused by the table');
SELECT throws_ok($$UPDATE ordertimeout.payment_methods SET paying_window = '1 day -23:00:00' WHERE method = 'card'$$, '23514', NULL,
    'a method''s window with a negative part: refused by the table');
SELECT lives_ok($$UPDATE ordertimeout.settings SET grace = '1 day', default_timeout = '2 days 03:00:00', remind_before = NULL$$,
    'days and hours: accepted');
SELECT lives_ok($$UPDATE ordertimeout.payment_methods SET paying_window = '3 days' WHERE method = 'card'$$,
    'a method''s window of three days: accepted');

SELECT * FROM finish();
ROLLBACK;
