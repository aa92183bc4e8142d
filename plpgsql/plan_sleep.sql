CREATE FUNCTION ordertimeout.plan_sleep(max_sleep interval)
RETURNS timestamptz
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now       timestamptz := clock_timestamp();
    v_scan_from timestamptz;
    v_next      timestamptz;
    v_wake      timestamptz;
BEGIN
    IF plan_sleep.max_sleep IS NULL THEN
        RAISE EXCEPTION 'max_sleep must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF plan_sleep.max_sleep < interval '0' OR plan_sleep.max_sleep > interval '1 hour'
       OR ordertimeout._has_negative_part(plan_sleep.max_sleep) THEN
        RAISE EXCEPTION 'max_sleep must be between 0 and 1 hour, with no negative part, got %', plan_sleep.max_sleep
            USING ERRCODE = 'OT141';
    END IF;
    -- While paused, due timers are not worth waking for: sleep the longest;
    -- while a pause is being committed (sweep_due claims nothing then), a
    -- second at most.
    -- Otherwise the earliest timer row, looked for among those due in the
    -- last seconds when sweep_due may look there only (_scan_from, whose
    -- comment says why); when that finds nothing within a second, every
    -- timer row is looked at (next_due), so that a sleep longer than a
    -- second is always planned from them all (a row due before the window
    -- is then due now: a sweep whose window is empty looks at every row).
    IF (SELECT s.paused FROM ordertimeout.settings AS s) THEN
        v_wake := v_now + plan_sleep.max_sleep;
    ELSIF ordertimeout._pause_pending() THEN
        -- A pause that rolls back sends no wake-up: a second at most.
        v_wake := v_now + least(plan_sleep.max_sleep, interval '1 second');
    ELSE
        v_scan_from := ordertimeout._scan_from(v_now);
        IF v_scan_from IS NOT NULL THEN
            v_next := (SELECT t.due_at FROM ordertimeout._timers AS t
                        WHERE t.due_at >= v_scan_from
                        ORDER BY t.due_at LIMIT 1);
        END IF;
        IF v_next IS NULL OR v_next > v_now + ordertimeout._full_look_every() THEN
            v_next := ordertimeout.next_due();
        END IF;
        v_wake := least(v_next, v_now + plan_sleep.max_sleep);
    END IF;
    -- An upsert: sweep_state is unlogged, and empty after a crash.
    INSERT INTO ordertimeout.sweep_state AS s (singleton, wake_at)
    VALUES (true, v_wake)
    ON CONFLICT ON CONSTRAINT sweep_state_single_row DO UPDATE SET wake_at = excluded.wake_at;
    RETURN v_wake;
END
$$;

COMMENT ON FUNCTION ordertimeout.plan_sleep(interval) IS
    'for the sidecar: the moment to sweep next (the earliest due timer, at most max_sleep away), recorded so that an order due sooner sends a wake-up on channel ordertimeout_wake';
