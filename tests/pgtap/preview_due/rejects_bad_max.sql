-- preview_due's max must be between 1 and 100000 (OT140) and not NULL (OT100).
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(3);

SELECT throws_ok($$SELECT * FROM ordertimeout.preview_due(0)$$, 'OT140', NULL, 'max 0: OT140');
SELECT throws_ok($$SELECT * FROM ordertimeout.preview_due(100001)$$, 'OT140', NULL, 'max 100001: OT140');
SELECT throws_ok($$SELECT * FROM ordertimeout.preview_due(NULL)$$, 'OT100', NULL, 'max NULL: OT100');

SELECT * FROM finish();
ROLLBACK;
