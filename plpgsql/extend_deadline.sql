CREATE FUNCTION ordertimeout.extend_deadline(
    order_id text,
    by       interval)
RETURNS ordertimeout.order_state
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_now     timestamptz := clock_timestamp();
    v_status  text;
    v_timer   bigint;
    v_version integer;
    v_job_id  bigint;
    v_expire  timestamptz;
    v_cancel  timestamptz;
BEGIN
    PERFORM ordertimeout._check_order_id(extend_deadline.order_id);
    IF extend_deadline.by IS NULL THEN
        RAISE EXCEPTION 'by must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    PERFORM ordertimeout._check_interval('by', extend_deadline.by, interval '30 days', 'OT141');

    SELECT o.status, o.timer_job_id INTO v_status, v_timer
    FROM ordertimeout._lock_order(extend_deadline.order_id) AS o;

    -- A new version: the old timer row (and any gateway check in flight) can
    -- no longer act on this order.
    UPDATE ordertimeout.orders AS o
    SET expire_at = o.expire_at + extend_deadline.by,
        cancel_at = o.cancel_at + extend_deadline.by,
        deadline_version = o.deadline_version + 1,
        timer_job_id = ordertimeout._new_job_id(),
        check_job_id = NULL
    WHERE o.order_id = extend_deadline.order_id
      AND o.status = 'PENDING'
    RETURNING o.deadline_version, o.timer_job_id, o.expire_at, o.cancel_at
    INTO v_version, v_job_id, v_expire, v_cancel;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'order "%" is %: only a PENDING order can be given more time', extend_deadline.order_id, v_status
            USING ERRCODE = 'OT123';
    END IF;

    PERFORM ordertimeout._schedule_timer(v_job_id, extend_deadline.order_id, v_version, v_cancel);
    PERFORM ordertimeout._drop_timer(v_timer);
    -- The reminder of the old version is moot now: one for the new expiry.
    PERFORM ordertimeout._schedule_reminder(extend_deadline.order_id, v_version, v_expire, s.remind_before, v_now)
    FROM ordertimeout.settings AS s
    WHERE s.webhooks;
    PERFORM ordertimeout._log_event(extend_deadline.order_id, 'PENDING', 'PENDING', 'requested', v_now,
        jsonb_build_object('extended_by_seconds', extract(epoch FROM extend_deadline.by), 'expire_at', v_expire));
    PERFORM ordertimeout._wake_if_sooner(v_cancel);

    RETURN ordertimeout._order_state(extend_deadline.order_id, false);
END
$$;

COMMENT ON FUNCTION ordertimeout.extend_deadline(text, interval) IS
    'gives a PENDING order more time; bumps its deadline version so its old timer cannot act (fencing)';
