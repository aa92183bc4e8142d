CREATE FUNCTION ordertimeout.plan_sleep(max_sleep interval)
RETURNS timestamptz
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_wake timestamptz;
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
    -- While paused, due timers are not worth waking for: sleep the longest.
    v_wake := CASE WHEN (SELECT s.paused FROM ordertimeout.settings AS s)
                   THEN clock_timestamp() + plan_sleep.max_sleep
                   ELSE least(ordertimeout.next_due(), clock_timestamp() + plan_sleep.max_sleep)
              END;
    -- An upsert: sweep_state is unlogged, and empty after a crash.
    INSERT INTO ordertimeout.sweep_state AS s (singleton, wake_at)
    VALUES (true, v_wake)
    ON CONFLICT ON CONSTRAINT sweep_state_single_row DO UPDATE SET wake_at = excluded.wake_at;
    RETURN v_wake;
END
$$;

COMMENT ON FUNCTION ordertimeout.plan_sleep(interval) IS
    'for the sidecar: the moment to sweep next (the earliest due timer, at most max_sleep away), recorded so that an order due sooner sends a wake-up on channel ordertimeout_wake';
