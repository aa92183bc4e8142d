CREATE FUNCTION ordertimeout.configure(
    default_timeout interval DEFAULT NULL,
    grace           interval DEFAULT NULL,
    paying_window   interval DEFAULT NULL,
    precheck        text DEFAULT NULL,
    late_payment    text DEFAULT NULL,
    webhooks        boolean DEFAULT NULL,
    remind_before   interval DEFAULT NULL,
    paused          boolean DEFAULT NULL)
RETURNS ordertimeout.settings
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_row   ordertimeout.settings;
    v_now   timestamptz := clock_timestamp();
    v_actor text := ordertimeout._actor();
    v_holders integer[];
BEGIN
    PERFORM ordertimeout._check_interval('default_timeout', configure.default_timeout, interval '30 days', 'OT145');
    PERFORM ordertimeout._check_interval('grace', configure.grace, interval '1 day', 'OT145', allow_zero => true);
    PERFORM ordertimeout._check_interval('paying_window', configure.paying_window, interval '30 days', 'OT145');
    IF configure.precheck NOT IN ('attempted', 'always', 'never') THEN
        RAISE EXCEPTION 'precheck must be "attempted", "always" or "never", got "%"', configure.precheck
            USING ERRCODE = 'OT145';
    END IF;
    IF configure.late_payment NOT IN ('reinstate', 'refund', 'manual') THEN
        RAISE EXCEPTION 'late_payment must be "reinstate", "refund" or "manual", got "%"', configure.late_payment
            USING ERRCODE = 'OT145';
    END IF;
    -- 0 turns reminders off.
    PERFORM ordertimeout._check_interval('remind_before', configure.remind_before, interval '30 days', 'OT145',
                                         allow_zero => true);

    UPDATE ordertimeout.settings AS s
    SET default_timeout = coalesce(configure.default_timeout, s.default_timeout),
        grace = coalesce(configure.grace, s.grace),
        paying_window = coalesce(configure.paying_window, s.paying_window),
        precheck = coalesce(configure.precheck, s.precheck),
        late_payment = coalesce(configure.late_payment, s.late_payment),
        webhooks = coalesce(configure.webhooks, s.webhooks),
        remind_before = CASE
                            WHEN configure.remind_before IS NULL THEN s.remind_before
                            WHEN configure.remind_before = interval '0' THEN NULL
                            ELSE configure.remind_before
                        END,
        paused = coalesce(configure.paused, s.paused),
        paused_at = CASE WHEN configure.paused AND NOT s.paused THEN v_now ELSE s.paused_at END,
        paused_by = CASE WHEN configure.paused AND NOT s.paused THEN v_actor ELSE s.paused_by END,
        resumed_at = CASE WHEN NOT configure.paused AND s.paused THEN v_now ELSE s.resumed_at END
    RETURNING s.* INTO v_row;
    IF configure.paused AND v_row.paused_at = v_now THEN
        -- A pause begins: wait for the timeout cancels already past their
        -- last look at the settings, which hold the advisory lock (28532, 3)
        -- shared until they commit; those that come after roll back
        -- (_refuse_if_paused). A call left open in a transaction would hold
        -- the pause for good: after 2 seconds it is named in a warning.
        PERFORM set_config('lock_timeout', '2s', true);
        BEGIN
            PERFORM pg_advisory_xact_lock(28532, 3);
        EXCEPTION
            WHEN lock_not_available THEN
                SELECT coalesce(array_agg(l.pid ORDER BY l.pid), '{}') INTO v_holders
                FROM pg_locks AS l
                WHERE l.locktype = 'advisory'
                  AND l.database = (SELECT d.oid FROM pg_database AS d WHERE d.datname = current_database())
                  AND l.classid = 28532 AND l.objid = 3 AND l.objsubid = 2
                  AND l.granted
                  AND l.pid <> pg_backend_pid();
                RAISE WARNING 'paused, but timeout cancels made before the pause are still not committed after 2 seconds (backend pid %): they are kept if their transaction commits',
                    array_to_string(v_holders, ', ');
        END;
    END IF;
    IF configure.paused IS FALSE THEN
        -- The backlog is due now: wake the sleeping sweepers.
        PERFORM pg_notify('ordertimeout_wake', '');
    END IF;
    RETURN v_row;
END
$$;

COMMENT ON FUNCTION ordertimeout.configure(interval, interval, interval, text, text, boolean, interval, boolean) IS
    'changes settings; a NULL argument leaves that setting as it is; paused => true stops every timeout cancel until paused => false, and waits (at most 2 s, then warns) for the timeout cancels already made to commit; returns the settings';
