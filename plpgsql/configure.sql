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
BEGIN
    PERFORM ordertimeout._check_interval('default_timeout', configure.default_timeout, interval '30 days', 'OT145');
    PERFORM ordertimeout._check_interval('grace', configure.grace, interval '1 day', 'OT145', allow_zero => true);
    PERFORM ordertimeout._check_interval('paying_window', configure.paying_window, interval '30 days', 'OT145');
    IF configure.precheck NOT IN ('attempted', 'always', 'never') THEN
        RAISE EXCEPTION 'precheck must be "attempted", "always" or "never", got "%"', ordertimeout._shown(configure.precheck, 32)
            USING ERRCODE = 'OT145';
    END IF;
    IF configure.late_payment NOT IN ('reinstate', 'refund', 'manual') THEN
        RAISE EXCEPTION 'late_payment must be "reinstate", "refund" or "manual", got "%"', ordertimeout._shown(configure.late_payment, 32)
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
    IF configure.paused THEN
        -- Also when already paused: a pause that warned, asked again, says
        -- whether those cancels have committed since.
        PERFORM ordertimeout._wait_for_cancels_under_way();
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
