-- plan_next_sweep(max_sleep, held_due_by, retry_held_in): the moment to
-- sweep next, recorded in sweep_state for create_order's wake-ups.
-- plan_sleep(max_sleep) (plan_sleep.sql), which sidecars before migration
-- 000050 call, is its wake_at with neither of the other two.
--
-- held_due_by is the now() of the sweep just made, when it did not claim a
-- full batch: every timer row due by then that is still there was passed
-- over by it, because another transaction holds a lock its cancel needs
-- (the sweep deferred it) or holds the timer row itself (another sweep, or
-- one left open); or, rarely, because it was committed after the sweep's
-- claim. held says that some exist. They are woken for again after a pause
-- as long as the newest of them has been due (at least 1 ms), at most
-- retry_held_in (the sidecar passes as long as its current run of sweeps
-- that passed rows over has lasted, at most 1 s): so the pauses double while
-- a row stays held, and one that only just came due (held by a create or a
-- payment about to commit) is tried again within milliseconds whatever
-- other row is held for long. Every row due after held_due_by is woken for
-- at its moment, as usual. Without this, one due order held for minutes (a payment's
-- transaction left open, a sweep left open in psql) stayed the earliest due
-- timer, every plan named a moment already past, and the sidecar swept
-- every few milliseconds for as long as it was held: 188 sweeps a second,
-- 0.39 cores with its server (tests/bench/held-order.sh; migration 000050).
CREATE FUNCTION ordertimeout.plan_next_sweep(
    max_sleep     interval,
    held_due_by   timestamptz DEFAULT NULL,
    retry_held_in interval DEFAULT NULL)
RETURNS TABLE (wake_at timestamptz, held boolean)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now       timestamptz := clock_timestamp();
    v_scan_from timestamptz;
    v_first     timestamptz;
    v_next      timestamptz;
    v_wake      timestamptz;
    v_held      boolean;
    v_newest    timestamptz;
    v_retry     interval;
BEGIN
    IF plan_next_sweep.max_sleep IS NULL THEN
        RAISE EXCEPTION 'max_sleep must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF plan_next_sweep.max_sleep < interval '0' OR plan_next_sweep.max_sleep > interval '1 hour'
       OR ordertimeout._has_negative_part(plan_next_sweep.max_sleep) THEN
        RAISE EXCEPTION 'max_sleep must be between 0 and 1 hour, with no negative part, got %', plan_next_sweep.max_sleep
            USING ERRCODE = 'OT141';
    END IF;
    IF (plan_next_sweep.held_due_by IS NULL) <> (plan_next_sweep.retry_held_in IS NULL) THEN
        RAISE EXCEPTION 'held_due_by and retry_held_in go together: both NULL or neither, got % and %',
            coalesce(plan_next_sweep.held_due_by::text, 'NULL'), coalesce(plan_next_sweep.retry_held_in::text, 'NULL')
            USING ERRCODE = 'OT100';
    END IF;
    -- Not 0: with held rows, a caller would be told to sweep again at once.
    IF plan_next_sweep.retry_held_in <= interval '0' OR plan_next_sweep.retry_held_in > interval '1 hour'
       OR ordertimeout._has_negative_part(plan_next_sweep.retry_held_in) THEN
        RAISE EXCEPTION 'retry_held_in must be more than 0 and at most 1 hour, with no negative part, got %', plan_next_sweep.retry_held_in
            USING ERRCODE = 'OT141';
    END IF;
    IF plan_next_sweep.held_due_by > v_now THEN
        RAISE EXCEPTION 'held_due_by must not be later than the database''s clock (%), got %', v_now, plan_next_sweep.held_due_by
            USING ERRCODE = 'OT156';
    END IF;
    -- While paused, due timers are not worth waking for: sleep the longest;
    -- while a pause is being committed (sweep_due claims nothing then), a
    -- second at most.
    -- Otherwise the earliest timer row, looked for among those due in the
    -- last seconds when sweep_due may look there only (_scan_from, whose
    -- comment says why); when that finds nothing within a second, every
    -- timer row is looked at, so that a sleep longer than a second is always
    -- planned from them all (a row due before the window is then due now: a
    -- sweep whose window is empty looks at every row). If it is due by
    -- held_due_by, it is held: then the newest held row sets the pause, and
    -- the earliest row due after held_due_by is looked for the same way.
    IF (SELECT s.paused FROM ordertimeout.settings AS s) THEN
        v_wake := v_now + plan_next_sweep.max_sleep;
    ELSIF ordertimeout._pause_pending() THEN
        -- A pause that rolls back sends no wake-up: a second at most.
        v_wake := v_now + least(plan_next_sweep.max_sleep, interval '1 second');
    ELSE
        v_scan_from := ordertimeout._scan_from(v_now);
        IF v_scan_from IS NOT NULL THEN
            v_first := (SELECT t.due_at FROM ordertimeout._timers AS t
                         WHERE t.due_at >= v_scan_from
                         ORDER BY t.due_at LIMIT 1);
        END IF;
        IF v_first IS NULL OR v_first > v_now + ordertimeout._full_look_every() THEN
            v_first := (SELECT t.due_at FROM ordertimeout._timers AS t ORDER BY t.due_at LIMIT 1);
        END IF;
        v_held := v_first <= plan_next_sweep.held_due_by;
        IF NOT v_held OR v_held IS NULL THEN
            v_next := v_first;
        ELSE
            -- Between v_first and held_due_by, so it finds v_first's row at
            -- worst.
            v_newest := (SELECT t.due_at FROM ordertimeout._timers AS t
                          WHERE t.due_at >= v_first AND t.due_at <= plan_next_sweep.held_due_by
                          ORDER BY t.due_at DESC LIMIT 1);
            v_retry := least(plan_next_sweep.retry_held_in,
                             greatest(v_now - coalesce(v_newest, v_first), interval '1 millisecond'));
            IF v_scan_from IS NOT NULL THEN
                v_next := (SELECT t.due_at FROM ordertimeout._timers AS t
                            WHERE t.due_at >= v_scan_from AND t.due_at > plan_next_sweep.held_due_by
                            ORDER BY t.due_at LIMIT 1);
            END IF;
            IF v_next IS NULL OR v_next > v_now + ordertimeout._full_look_every() THEN
                v_next := (SELECT t.due_at FROM ordertimeout._timers AS t
                            WHERE t.due_at > plan_next_sweep.held_due_by
                            ORDER BY t.due_at LIMIT 1);
            END IF;
        END IF;
        -- least() ignores NULLs: no timer row; no held one.
        v_wake := least(v_next, v_now + plan_next_sweep.max_sleep, v_now + v_retry);
    END IF;
    -- An upsert: sweep_state is unlogged, and empty after a crash.
    INSERT INTO ordertimeout.sweep_state AS s (singleton, wake_at)
    VALUES (true, v_wake)
    ON CONFLICT ON CONSTRAINT sweep_state_single_row DO UPDATE SET wake_at = excluded.wake_at;
    RETURN QUERY SELECT v_wake, coalesce(v_held, false);
END
$$;

COMMENT ON FUNCTION ordertimeout.plan_next_sweep(interval, timestamptz, interval) IS
    'for the sidecar: the moment to sweep next (the earliest due timer, at most max_sleep away; timer rows due by held_due_by, the now() of a sweep that passed them over, only after a pause as long as the newest of them has been due, at most retry_held_in, and held says there are such rows), recorded so that an order due sooner sends a wake-up on channel ordertimeout_wake';
