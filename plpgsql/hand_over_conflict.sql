-- The sidecar hands an open conflict to a person when the gateway's answers
-- leave it nothing it may do (it did not tell, after asking again and again,
-- whether it still holds the payment; or it holds the payment in another
-- currency and amount than recorded here, which no refund of the recorded
-- amount would give back). The conflict stays open, for a person to
-- reinstate, refund or resolve as manual; the reason is kept on it
-- (handed_over_why) and in the order's events (delivered to webhooks as
-- conflict.handed_over), and conflicts_to_resolve
-- leaves it out from then on, so that the sidecar does not ask the gateway
-- about it again at every rescan. A person's claim of its refund brings it
-- back to the sidecar (state refunding). A confirmation that gives it its
-- amount later does not: the doubt it was handed over for (the gateway did
-- not tell) stays, and a refund of an amount the gateway never confirmed
-- could give back part of the payment. A repeat is answered and keeps the
-- first reason; a conflict resolved or claimed for a refund meanwhile is
-- refused as resolve_conflict refuses it (OT133, OT134).
CREATE FUNCTION ordertimeout.hand_over_conflict(
    conflict_id bigint,
    reason      text)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now      timestamptz := clock_timestamp();
    v_conflict ordertimeout.conflicts;
    v_status   text;
BEGIN
    IF hand_over_conflict.conflict_id IS NULL THEN
        RAISE EXCEPTION 'conflict_id must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF hand_over_conflict.reason IS NULL THEN
        RAISE EXCEPTION 'reason must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF NOT ordertimeout._is_plain_text(hand_over_conflict.reason, 500) THEN
        RAISE EXCEPTION 'reason must be 1 to 500 characters without control, format or line-separator characters (got % characters)',
            char_length(hand_over_conflict.reason)
            USING ERRCODE = 'OT149';
    END IF;

    SELECT c.* INTO v_conflict
    FROM ordertimeout.conflicts AS c
    WHERE c.conflict_id = hand_over_conflict.conflict_id
    FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'conflict_id % is unknown', hand_over_conflict.conflict_id
            USING ERRCODE = 'OT130';
    END IF;
    IF v_conflict.state = 'resolved' THEN
        RAISE EXCEPTION 'conflict % is already resolved as %', hand_over_conflict.conflict_id, v_conflict.resolution
            USING ERRCODE = 'OT133';
    END IF;
    IF v_conflict.state = 'refunding' THEN
        RAISE EXCEPTION 'conflict % is being refunded (since %): a refund that started is the one that finishes',
            hand_over_conflict.conflict_id, v_conflict.refund_started_at
            USING ERRCODE = 'OT134';
    END IF;
    IF v_conflict.handed_over_at IS NOT NULL THEN
        RETURN 'handed_over';
    END IF;

    SELECT o.status INTO v_status
    FROM ordertimeout.orders AS o
    WHERE o.order_id = v_conflict.order_id;
    UPDATE ordertimeout.conflicts AS c
    SET handed_over_at = v_now,
        handed_over_why = hand_over_conflict.reason
    WHERE c.conflict_id = hand_over_conflict.conflict_id;
    -- Delivered to webhooks (conflict.handed_over): a shop routes it to the
    -- people who decide about money.
    PERFORM ordertimeout._log_event(v_conflict.order_id, v_status, v_status, 'conflict', v_now,
        jsonb_build_object('conflict_id', v_conflict.conflict_id, 'payment_id', v_conflict.payment_id,
                           'handed_over_why', hand_over_conflict.reason),
        webhook => true);
    RETURN 'handed_over';
END
$$;

COMMENT ON FUNCTION ordertimeout.hand_over_conflict(bigint, text) IS
    'the sidecar hands an open conflict to a person: it stays open, keeps the reason (handed_over_why; OT149 when not 1-500 plain characters) and an event (a conflict.handed_over webhook), and conflicts_to_resolve leaves it out until a person resolves it or claims its refund; a repeat is answered and keeps the first reason; resolved: OT133, refunding: OT134; returns handed_over';
