-- configure(paused => true) waits for the timeout cancels under way with a
-- lock_timeout of its own: the caller's lock_timeout is the same after it,
-- for the rest of the transaction. The pause holds advisory locks (28532, 4)
-- and (28532, 3) to its commit; a pause asked again (already paused) takes
-- them too.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(5);

SET LOCAL lock_timeout = '7s';
SELECT lives_ok($$SELECT ordertimeout.configure(paused => true)$$, 'paused');
SELECT is(current_setting('lock_timeout'), '7s', 'the caller''s lock_timeout is kept');
SELECT is((SELECT count(*)::int FROM pg_locks
            WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND classid = 28532
              AND objid IN (3, 4) AND objsubid = 2 AND mode = 'ExclusiveLock' AND granted),
    2, 'the pause holds (28532, 3) and (28532, 4) to its commit');
SELECT lives_ok($$SELECT ordertimeout.configure(paused => true)$$, 'paused again');
SELECT is(current_setting('lock_timeout'), '7s', 'still the caller''s lock_timeout');

SELECT * FROM finish();
ROLLBACK;
