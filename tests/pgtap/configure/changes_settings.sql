-- configure changes the settings it is given and leaves the NULL ones as
-- they are; remind_before 0 turns reminders off (NULL).
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(5);

SELECT results_eq(
    $$SELECT default_timeout, grace, paying_window, precheck, late_payment, webhooks, remind_before FROM ordertimeout.settings$$,
    $$VALUES (interval '30 minutes', interval '60 seconds', interval '15 minutes', 'attempted', 'reinstate', false, NULL::interval)$$,
    'the defaults');

SELECT is((SELECT (default_timeout, grace, paying_window, precheck, late_payment, webhooks, remind_before)
             FROM ordertimeout.configure(interval '10 minutes', interval '5 seconds', interval '3 minutes',
                                         'always', 'refund', true, interval '2 minutes')),
    ROW(interval '10 minutes', interval '5 seconds', interval '3 minutes', 'always'::text, 'refund'::text, true,
        interval '2 minutes'),
    'every setting changed; the new settings returned');

SELECT test.snapshot() AS before \gset
SELECT ordertimeout.configure();
SELECT is(test.snapshot(), :'before'::jsonb, 'all NULL: nothing changes');

SELECT ordertimeout.configure(grace => interval '0');
SELECT results_eq(
    $$SELECT default_timeout, grace, precheck, remind_before FROM ordertimeout.settings$$,
    $$VALUES (interval '10 minutes', interval '0', 'always', interval '2 minutes')$$,
    'one setting given: only it changes (grace 0 is allowed)');

SELECT ordertimeout.configure(remind_before => interval '0');
SELECT is((SELECT remind_before FROM ordertimeout.settings), NULL, 'remind_before 0 turns reminders off');

SELECT * FROM finish();
ROLLBACK;
