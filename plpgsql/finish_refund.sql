CREATE FUNCTION ordertimeout.finish_refund(
    conflict_id bigint,
    refund_id   text)
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
    v_status   text;
    v_other    bigint;
    v_other_payment text;
    v_purged   record;
BEGIN
    IF finish_refund.conflict_id IS NULL THEN
        RAISE EXCEPTION 'conflict_id must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF finish_refund.refund_id IS NULL THEN
        RAISE EXCEPTION 'refund_id must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF NOT ordertimeout._is_identifier(finish_refund.refund_id, 128) THEN
        RAISE EXCEPTION 'refund_id must be 1 to 128 characters, not "." or "..", without control, format or line-separator characters (got % characters)',
            char_length(finish_refund.refund_id)
            USING ERRCODE = 'OT136';
    END IF;
    -- The refund ids a purge keeps (purged_refunds, read below) are seen by
    -- a fresh snapshot only: under an older one, a purge committed since the
    -- transaction began, or while this call waited for it, would let one
    -- refund be recorded as two conflicts'.
    IF current_setting('transaction_isolation') NOT IN ('read committed', 'read uncommitted') THEN
        RAISE EXCEPTION 'finish_refund must run in a READ COMMITTED transaction, not %: under an older snapshot it would not see a refund id that a purge has just kept',
            upper(current_setting('transaction_isolation'))
            USING ERRCODE = 'OT154';
    END IF;

    SELECT c.* INTO v_conflict
    FROM ordertimeout.conflicts AS c
    WHERE c.conflict_id = finish_refund.conflict_id
    FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'conflict_id % is unknown', finish_refund.conflict_id
            USING ERRCODE = 'OT130';
    END IF;
    IF v_conflict.resolution = 'refunded' THEN
        -- Recorded already: the same refund again is a retry, answered. The
        -- gateway makes one refund per idempotency key (the payment id), so
        -- another refund_id means the payment may have been refunded twice:
        -- refused (OT139), never answered as if it had been recorded.
        IF finish_refund.refund_id IS DISTINCT FROM v_conflict.refund_id THEN
            RAISE EXCEPTION 'conflict % was refunded by refund "%": refund_id "%" is another refund of payment "%", not recorded',
                finish_refund.conflict_id, v_conflict.refund_id, finish_refund.refund_id, v_conflict.payment_id
                USING ERRCODE = 'OT139';
        END IF;
        RETURN 'refunded';
    END IF;
    IF v_conflict.state <> 'refunding' THEN
        RAISE EXCEPTION 'conflict % is %, not being refunded: claim it with resolve_conflict(%, ''refund'') first',
            finish_refund.conflict_id,
            CASE WHEN v_conflict.state = 'resolved' THEN 'resolved as ' || v_conflict.resolution ELSE v_conflict.state END,
            finish_refund.conflict_id
            USING ERRCODE = 'OT135';
    END IF;

    SELECT o.status INTO v_status
    FROM ordertimeout.orders AS o
    WHERE o.order_id = v_conflict.order_id
    FOR NO KEY UPDATE;

    UPDATE ordertimeout.payments AS p
    SET status = 'refunded'
    WHERE p.payment_id = v_conflict.payment_id;
    -- One refund gives back one payment (conflicts_one_per_refund): a
    -- refund_id recorded for another conflict means the gateway answered two
    -- payments with the same refund, and at most one of them was refunded.
    -- Refused (OT177), nothing written (the raise rolls back the payment's
    -- update above); the conflict stays refunding for a person.
    BEGIN
        UPDATE ordertimeout.conflicts AS c
        SET state = 'resolved',
            resolution = 'refunded',
            resolved_at = v_now,
            resolved_by = ordertimeout._actor(),
            refund_id = finish_refund.refund_id
        WHERE c.conflict_id = finish_refund.conflict_id;
    EXCEPTION
        WHEN unique_violation THEN
            SELECT c.conflict_id, c.payment_id INTO v_other, v_other_payment
            FROM ordertimeout.conflicts AS c
            WHERE c.refund_id = finish_refund.refund_id;
            IF NOT FOUND THEN
                -- Recorded by a transaction that committed after this one's
                -- snapshot (REPEATABLE READ or SERIALIZABLE): called again,
                -- the call sees it and names it.
                RAISE EXCEPTION 'refund_id "%" was recorded for another conflict by a transaction this one cannot see: call again',
                    finish_refund.refund_id
                    USING ERRCODE = 'serialization_failure';
            END IF;
            RAISE EXCEPTION 'refund_id "%" is recorded for conflict % (payment "%"): it cannot also be the refund of conflict % (payment "%"); one of the two payments may not be refunded, not recorded (a person checks it at the gateway)',
                finish_refund.refund_id, v_other, v_other_payment, finish_refund.conflict_id, v_conflict.payment_id
                USING ERRCODE = 'OT177';
    END;
    -- The same for a refund recorded for a conflict that purge_orders has
    -- deleted with its order (purged_refunds). Read after the update above:
    -- a purge deleting that conflict meanwhile made the update's unique
    -- check wait for its commit, so this statement's snapshot (READ
    -- COMMITTED) sees what it kept.
    SELECT g.conflict_id, g.payment_id, g.order_id, g.purged_at
    INTO v_purged
    FROM ordertimeout.purged_refunds AS g
    WHERE g.refund_id = finish_refund.refund_id;
    IF FOUND THEN
        RAISE EXCEPTION 'refund_id "%" was the refund of conflict % (payment "%" of order "%", purged at %): it cannot also be the refund of conflict % (payment "%"); one of the two payments may not be refunded, not recorded (a person checks it at the gateway)',
            finish_refund.refund_id, v_purged.conflict_id, v_purged.payment_id, v_purged.order_id, v_purged.purged_at,
            finish_refund.conflict_id, v_conflict.payment_id
            USING ERRCODE = 'OT177';
    END IF;
    PERFORM ordertimeout._log_event(v_conflict.order_id, v_status, v_status, 'conflict', v_now,
        jsonb_build_object('conflict_id', v_conflict.conflict_id, 'resolution', 'refunded',
                           'payment_id', v_conflict.payment_id, 'refund_id', finish_refund.refund_id),
        webhook => true);
    RETURN 'refunded';
END
$$;

COMMENT ON FUNCTION ordertimeout.finish_refund(bigint, text) IS
    'for the sidecar: records that the gateway refunded the payment of a conflict claimed with resolve_conflict(id, ''refund''); returns refunded, also when repeated with the refund it recorded; OT139 with another refund_id (a second refund of the payment); OT177 with a refund_id recorded for another conflict, also one purged with its order; OT135 when the conflict is not being refunded; READ COMMITTED only (OT154)';
