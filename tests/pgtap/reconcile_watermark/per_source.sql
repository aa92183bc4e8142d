-- reconcile_watermark returns the end of the last period reconciled for one
-- source: NULL before the first, the latest end after, never moved back by an
-- older period, and each source has its own.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(6);

SELECT is(ordertimeout.reconcile_watermark('gateway:a'), NULL, 'never reconciled: NULL');

SELECT ordertimeout.reconcile_payments('[]', '2026-12-01 10:00+00', '2026-12-01 11:00+00', false, 'gateway:a');
SELECT is(ordertimeout.reconcile_watermark('gateway:a'), '2026-12-01 11:00+00'::timestamptz,
    'the end of the period reconciled');
SELECT is(ordertimeout.reconcile_watermark('gateway:b'), NULL, 'another source has its own watermark');

SELECT ordertimeout.reconcile_payments('[]', '2026-12-01 09:00+00', '2026-12-01 10:00+00', false, 'gateway:a');
SELECT is(ordertimeout.reconcile_watermark('gateway:a'), '2026-12-01 11:00+00'::timestamptz,
    'an older period does not move it back');

SELECT ordertimeout.reconcile_payments('[]', '2026-12-01 11:00+00', '2026-12-01 12:00+00', false, 'gateway:b');
SELECT is(ordertimeout.reconcile_watermark('gateway:b'), '2026-12-01 12:00+00'::timestamptz, 'source b moved');
SELECT is(ordertimeout.reconcile_watermark('gateway:a'), '2026-12-01 11:00+00'::timestamptz, 'source a did not');

SELECT * FROM finish();
ROLLBACK;
