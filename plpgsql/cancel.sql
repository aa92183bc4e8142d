CREATE FUNCTION ordertimeout.cancel_order(
    order_id text,
    reason   text DEFAULT 'requested')
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_timer     bigint;
    v_cancelled boolean;
BEGIN
    PERFORM ordertimeout._check_order_id(cancel_order.order_id);
    IF cancel_order.reason IS NULL THEN
        RAISE EXCEPTION 'reason must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF NOT ordertimeout._is_plain_text(cancel_order.reason, 200) THEN
        RAISE EXCEPTION 'reason must be 1 to 200 characters without control, format or line-separator characters (got % characters)',
            char_length(cancel_order.reason)
            USING ERRCODE = 'OT144';
    END IF;

    SELECT o.timer_job_id INTO v_timer
    FROM ordertimeout.orders AS o
    WHERE o.order_id = cancel_order.order_id
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'order_id "%" is unknown', cancel_order.order_id
            USING ERRCODE = 'OT120';
    END IF;

    SELECT count(*) > 0 INTO v_cancelled
    FROM ordertimeout._cancel_orders(ARRAY[cancel_order.order_id], NULL, ARRAY['requested'],
                                     cancel_order.reason, false);
    IF v_cancelled THEN
        PERFORM ordertimeout._drop_timer(v_timer);
    END IF;
    RETURN v_cancelled;
END
$$;

COMMENT ON FUNCTION ordertimeout.cancel_order(text, text) IS
    'PENDING -> CANCELLED and release, in one transaction; returns whether this call cancelled the order';

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
    FROM ordertimeout.orders AS o
    WHERE o.order_id = extend_deadline.order_id
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'order_id "%" is unknown', extend_deadline.order_id
            USING ERRCODE = 'OT120';
    END IF;

    -- A new version: the old timer row (and any gateway check in flight) can
    -- no longer act on this order.
    UPDATE ordertimeout.orders AS o
    SET expire_at = o.expire_at + extend_deadline.by,
        cancel_at = o.cancel_at + extend_deadline.by,
        deadline_version = o.deadline_version + 1,
        timer_job_id = nextval('public.river_job_id_seq'),
        check_job_id = NULL
    WHERE o.order_id = extend_deadline.order_id
      AND o.status = 'PENDING'
    RETURNING o.deadline_version, o.timer_job_id, o.expire_at, o.cancel_at
    INTO v_version, v_job_id, v_expire, v_cancel;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'order "%" is %: only a PENDING order can be given more time', extend_deadline.order_id, v_status
            USING ERRCODE = 'OT123';
    END IF;

    INSERT INTO public.river_job (id, kind, args, queue, state, scheduled_at)
    VALUES (v_job_id, 'ordertimeout_expire',
            jsonb_build_object('order_id', extend_deadline.order_id, 'version', v_version),
            'ordertimeout_expire', 'available', v_cancel);
    PERFORM ordertimeout._drop_timer(v_timer);
    PERFORM ordertimeout._log_event(extend_deadline.order_id, 'PENDING', 'PENDING', 'requested', v_now,
        jsonb_build_object('extended_by_seconds', extract(epoch FROM extend_deadline.by), 'expire_at', v_expire));
    PERFORM ordertimeout._wake_if_sooner(v_cancel);

    RETURN ordertimeout._order_state(extend_deadline.order_id, false);
END
$$;

COMMENT ON FUNCTION ordertimeout.extend_deadline(text, interval) IS
    'gives a PENDING order more time; bumps its deadline version so its old timer cannot act (fencing)';

CREATE FUNCTION ordertimeout.close_cancelled(
    older_than interval,
    max        integer DEFAULT 1000)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now    timestamptz := clock_timestamp();
    v_actor  text := ordertimeout._actor();
    v_ids    text[];
    v_closed integer;
BEGIN
    IF close_cancelled.older_than IS NULL THEN
        RAISE EXCEPTION 'older_than must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    -- Compared before the subtraction below, which would overflow a
    -- timestamp (22008) for a huge interval.
    IF close_cancelled.older_than < interval '0' OR close_cancelled.older_than > interval '100 years' THEN
        RAISE EXCEPTION 'older_than must be between 0 and 100 years, got %', close_cancelled.older_than
            USING ERRCODE = 'OT141';
    END IF;
    PERFORM ordertimeout._check_max(close_cancelled.max);

    -- 1. Lock the candidates. The open-conflict test here only keeps orders
    -- with a conflict from filling the batch: it reads the snapshot taken
    -- before the locks, which may miss a late payment committed since.
    SELECT array_agg(c.order_id) INTO v_ids
    FROM (SELECT o.order_id
            FROM ordertimeout.orders AS o
           WHERE o.status = 'CANCELLED'
             AND o.cancelled_at < v_now - close_cancelled.older_than
             AND NOT EXISTS (SELECT 1 FROM ordertimeout.conflicts AS k
                              WHERE k.order_id = o.order_id AND k.resolution IS NULL)
           ORDER BY o.cancelled_at
           LIMIT close_cancelled.max
             FOR NO KEY UPDATE SKIP LOCKED) AS c;
    IF v_ids IS NULL THEN
        RETURN 0;
    END IF;

    -- 2. Decide under the locks, in a statement of its own: confirm_payment
    -- records a conflict only while holding the order row, so every conflict
    -- of these orders has committed before this statement's snapshot or
    -- waits for this transaction. (Under REPEATABLE READ the snapshot is the
    -- transaction's; confirm_payment touches the order row, so the lock
    -- above fails with 40001 instead.)
    WITH closed AS (
        UPDATE ordertimeout.orders AS o
        SET status = 'CLOSED',
            closed_at = v_now,
            deadline_version = o.deadline_version + 1
        WHERE o.order_id = ANY (v_ids)
          AND o.status = 'CANCELLED'
          AND NOT EXISTS (SELECT 1 FROM ordertimeout.conflicts AS k
                           WHERE k.order_id = o.order_id AND k.resolution IS NULL)
        RETURNING o.order_id
    )
    INSERT INTO ordertimeout.events (order_id, from_status, to_status, cause, actor, at)
    SELECT c.order_id, 'CANCELLED', 'CLOSED', 'admin', v_actor, v_now
    FROM closed AS c;
    GET DIAGNOSTICS v_closed = ROW_COUNT;
    RETURN v_closed;
END
$$;

COMMENT ON FUNCTION ordertimeout.close_cancelled(interval, integer) IS
    'CANCELLED -> CLOSED for orders cancelled longer ago than older_than and with no open conflict, at most max of them; returns how many';
