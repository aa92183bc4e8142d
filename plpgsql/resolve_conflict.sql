CREATE FUNCTION ordertimeout.resolve_conflict(
    conflict_id bigint,
    resolution  text)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_now      timestamptz := clock_timestamp();
    v_conflict ordertimeout.conflicts;
    v_outcome  text;
    v_status   text;
BEGIN
    IF resolve_conflict.conflict_id IS NULL THEN
        RAISE EXCEPTION 'conflict_id must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF resolve_conflict.resolution IS NULL THEN
        RAISE EXCEPTION 'resolution must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    v_outcome := CASE resolve_conflict.resolution
                     WHEN 'reinstate' THEN 'reinstated'
                     WHEN 'refund' THEN 'refunded'
                     WHEN 'manual' THEN 'manual'
                 END;
    IF v_outcome IS NULL THEN
        RAISE EXCEPTION 'resolution must be "reinstate", "refund" or "manual", got "%"', resolve_conflict.resolution
            USING ERRCODE = 'OT131';
    END IF;

    SELECT c.* INTO v_conflict
    FROM ordertimeout.conflicts AS c
    WHERE c.conflict_id = resolve_conflict.conflict_id
    FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'conflict_id % is unknown', resolve_conflict.conflict_id
            USING ERRCODE = 'OT130';
    END IF;

    -- Exactly once: a repeat of the same resolution is answered, another one refused.
    IF v_conflict.resolution IS NOT NULL THEN
        IF v_conflict.resolution = v_outcome THEN
            RETURN v_outcome;
        END IF;
        RAISE EXCEPTION 'conflict % is already resolved as %', resolve_conflict.conflict_id, v_conflict.resolution
            USING ERRCODE = 'OT133';
    END IF;

    SELECT o.status INTO v_status
    FROM ordertimeout.orders AS o
    WHERE o.order_id = v_conflict.order_id
    FOR NO KEY UPDATE;

    IF v_outcome = 'reinstated' THEN
        IF v_conflict.kind <> 'late_payment' OR v_status NOT IN ('CANCELLED', 'CLOSED') THEN
            RAISE EXCEPTION 'conflict % cannot be reinstated: it is a % on a % order (reinstate takes back a cancelled order paid late)',
                resolve_conflict.conflict_id, v_conflict.kind, v_status
                USING ERRCODE = 'OT132';
        END IF;
        PERFORM ordertimeout._reclaim(v_conflict.order_id, v_now);
        UPDATE ordertimeout.orders AS o
        SET status = 'PAID',
            paid_at = v_now,
            cancelled_at = NULL,
            cancel_cause = NULL,
            cancel_reason = NULL,
            closed_at = NULL,
            deadline_version = o.deadline_version + 1
        WHERE o.order_id = v_conflict.order_id
          AND o.status IN ('CANCELLED', 'CLOSED');
        UPDATE ordertimeout.payments AS p
        SET status = 'confirmed'
        WHERE p.payment_id = v_conflict.payment_id;
        PERFORM ordertimeout._log_event(v_conflict.order_id, v_status, 'PAID', 'conflict', v_now,
            jsonb_build_object('conflict_id', v_conflict.conflict_id, 'resolution', v_outcome,
                               'payment_id', v_conflict.payment_id),
            webhook => true);
    ELSE
        IF v_outcome = 'refunded' THEN
            UPDATE ordertimeout.payments AS p
            SET status = 'refunded'
            WHERE p.payment_id = v_conflict.payment_id;
        END IF;
        PERFORM ordertimeout._log_event(v_conflict.order_id, v_status, v_status, 'conflict', v_now,
            jsonb_build_object('conflict_id', v_conflict.conflict_id, 'resolution', v_outcome,
                               'payment_id', v_conflict.payment_id),
            webhook => true);
    END IF;

    UPDATE ordertimeout.conflicts AS c
    SET resolution = v_outcome,
        resolved_at = v_now,
        resolved_by = ordertimeout._actor()
    WHERE c.conflict_id = resolve_conflict.conflict_id
      AND c.resolution IS NULL;
    RETURN v_outcome;
END
$$;

COMMENT ON FUNCTION ordertimeout.resolve_conflict(bigint, text) IS
    'resolves a late or double payment exactly once: reinstate (take the stock back and mark the order paid; OT132 when not possible), refund (the money was returned at the gateway) or manual; returns reinstated, refunded or manual';

CREATE FUNCTION ordertimeout.open_conflicts(max integer DEFAULT 1000)
RETURNS TABLE (
    conflict_id bigint,
    order_id    text,
    payment_id  text,
    kind        text,
    amount      numeric,
    detected_at timestamptz)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM ordertimeout._check_max(open_conflicts.max);
    RETURN QUERY
    SELECT c.conflict_id, c.order_id, c.payment_id, c.kind, c.amount, c.detected_at
    FROM ordertimeout.conflicts AS c
    WHERE c.resolution IS NULL
    ORDER BY c.detected_at, c.conflict_id
    LIMIT open_conflicts.max;
END
$$;

COMMENT ON FUNCTION ordertimeout.open_conflicts(integer) IS
    'unresolved late or double payments, oldest first: what the sidecar picks up after every (re)connect of its LISTEN';
