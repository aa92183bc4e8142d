-- A conflict is open, then resolved exactly once: reinstated, refunded or
-- manual. A refund touches the outside world, so it has a state between:
-- resolve_conflict(id, 'refund') claims the conflict (state refunding) before
-- any gateway call, and from then on the refund is the only way it can end;
-- the sidecar refunds at the gateway with the payment id as idempotency key
-- and records it with finish_refund. A retry after any failure continues the
-- same refund. The note, optional, is the operator's reason: it is kept on
-- the conflict (conflicts.note) and in the event, with the actor. A repeat
-- of the same resolution is answered and writes nothing, unless it brings a
-- note of its own: that note could not be kept, so the repeat is refused
-- (OT138) rather than answered as if it had been.
CREATE FUNCTION ordertimeout.resolve_conflict(
    conflict_id bigint,
    resolution  text,
    note        text DEFAULT NULL)
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
    v_actor    text := ordertimeout._actor();
    v_conflict ordertimeout.conflicts;
    v_outcome  text;
    v_status   text;
    v_amount   numeric;
    v_currency text;
BEGIN
    IF resolve_conflict.conflict_id IS NULL THEN
        RAISE EXCEPTION 'conflict_id must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF resolve_conflict.resolution IS NULL THEN
        RAISE EXCEPTION 'resolution must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF resolve_conflict.note IS NOT NULL AND NOT ordertimeout._is_plain_text(resolve_conflict.note, 500) THEN
        RAISE EXCEPTION 'note must be 1 to 500 characters without control, format or line-separator characters (got % characters)',
            char_length(resolve_conflict.note)
            USING ERRCODE = 'OT149';
    END IF;
    v_outcome := CASE resolve_conflict.resolution
                     WHEN 'reinstate' THEN 'reinstated'
                     WHEN 'refund' THEN 'refunded'
                     WHEN 'manual' THEN 'manual'
                 END;
    IF v_outcome IS NULL THEN
        RAISE EXCEPTION 'resolution must be "reinstate", "refund" or "manual", got "%"', ordertimeout._shown(resolve_conflict.resolution, 32)
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

    -- Exactly once: a repeat of the same resolution is answered, another one
    -- refused. A repeat with another note than the one kept is refused too
    -- (OT138): the conflict keeps the note of its resolution, and an answer
    -- would tell the caller theirs was kept. Without a note, or with the same
    -- one, a repeat is a retry and answered.
    IF v_conflict.state = 'resolved' THEN
        IF v_conflict.resolution = v_outcome THEN
            IF resolve_conflict.note IS NOT NULL AND resolve_conflict.note IS DISTINCT FROM v_conflict.note THEN
                RAISE EXCEPTION 'conflict % is already resolved the same way (%) by %: %',
                    resolve_conflict.conflict_id, v_conflict.resolution,
                    coalesce(v_conflict.resolved_by, 'someone')
                        || coalesce(' (refund claimed by ' || v_conflict.refund_started_by || ')', ''),
                    CASE WHEN v_conflict.note IS NULL
                         THEN 'it has no note, and the note given is not kept'
                         ELSE 'its note stays, and the note given is not kept' END
                    USING ERRCODE = 'OT138';
            END IF;
            RETURN v_outcome;
        END IF;
        RAISE EXCEPTION 'conflict % is already resolved as %', resolve_conflict.conflict_id, v_conflict.resolution
            USING ERRCODE = 'OT133';
    END IF;
    IF v_conflict.state = 'refunding' THEN
        IF v_outcome = 'refunded' THEN
            IF resolve_conflict.note IS NOT NULL AND resolve_conflict.note IS DISTINCT FROM v_conflict.note THEN
                RAISE EXCEPTION 'conflict % is already claimed for a refund by %: %',
                    resolve_conflict.conflict_id, coalesce(v_conflict.refund_started_by, 'someone'),
                    CASE WHEN v_conflict.note IS NULL
                         THEN 'the claim has no note, and the note given is not kept'
                         ELSE 'its note stays, and the note given is not kept' END
                    USING ERRCODE = 'OT138';
            END IF;
            RETURN 'refunding';
        END IF;
        RAISE EXCEPTION 'conflict % is being refunded (since %): a refund that started is the one that finishes',
            resolve_conflict.conflict_id, v_conflict.refund_started_at
            USING ERRCODE = 'OT134';
    END IF;

    SELECT o.status, o.amount, o.currency INTO v_status, v_amount, v_currency
    FROM ordertimeout.orders AS o
    WHERE o.order_id = v_conflict.order_id
    FOR NO KEY UPDATE;

    IF v_outcome = 'refunded' THEN
        -- Claimed here, refunded by the sidecar, recorded by finish_refund.
        UPDATE ordertimeout.conflicts AS c
        SET state = 'refunding',
            refund_started_at = v_now,
            refund_started_by = v_actor,
            note = resolve_conflict.note
        WHERE c.conflict_id = resolve_conflict.conflict_id;
        PERFORM ordertimeout._log_event(v_conflict.order_id, v_status, v_status, 'conflict', v_now,
            jsonb_strip_nulls(jsonb_build_object('conflict_id', v_conflict.conflict_id, 'resolution', 'refunding',
                                                 'payment_id', v_conflict.payment_id, 'note', resolve_conflict.note)),
            webhook => true);
        PERFORM pg_notify('ordertimeout_conflict', '');
        RETURN 'refunding';
    END IF;

    IF v_outcome = 'reinstated' THEN
        IF v_conflict.kind <> 'late_payment' OR v_status NOT IN ('CANCELLED', 'CLOSED') THEN
            RAISE EXCEPTION 'conflict % cannot be reinstated: it is a % on a % order (reinstate takes back a cancelled order paid late)',
                resolve_conflict.conflict_id, v_conflict.kind, v_status
                USING ERRCODE = 'OT132';
        END IF;
        -- Money is exact: only the order's own amount in its own currency.
        IF v_amount IS NOT NULL AND v_conflict.amount IS DISTINCT FROM v_amount
           OR v_currency IS NOT NULL AND v_conflict.currency IS DISTINCT FROM v_currency THEN
            RAISE EXCEPTION 'conflict % cannot be reinstated: the payment is % %, the order % %',
                resolve_conflict.conflict_id, coalesce(v_conflict.amount::text, 'of an unknown amount'),
                coalesce(v_conflict.currency, ''), v_amount, coalesce(v_currency, '')
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
            jsonb_strip_nulls(jsonb_build_object('conflict_id', v_conflict.conflict_id, 'resolution', v_outcome,
                                                 'payment_id', v_conflict.payment_id, 'note', resolve_conflict.note)),
            webhook => true);
    ELSE
        PERFORM ordertimeout._log_event(v_conflict.order_id, v_status, v_status, 'conflict', v_now,
            jsonb_strip_nulls(jsonb_build_object('conflict_id', v_conflict.conflict_id, 'resolution', v_outcome,
                                                 'payment_id', v_conflict.payment_id, 'note', resolve_conflict.note)),
            webhook => true);
    END IF;

    UPDATE ordertimeout.conflicts AS c
    SET state = 'resolved',
        resolution = v_outcome,
        resolved_at = v_now,
        resolved_by = v_actor,
        note = resolve_conflict.note
    WHERE c.conflict_id = resolve_conflict.conflict_id;
    RETURN v_outcome;
END
$$;

COMMENT ON FUNCTION ordertimeout.resolve_conflict(bigint, text, text) IS
    'resolves a conflict exactly once: reinstate (take the stock back and mark the order paid: only a late payment of the order''s exact amount and currency; OT132 otherwise), manual (handed to a person), or refund (claims the conflict for a refund, which the sidecar makes at the gateway and records with finish_refund; returns refunding); while refunding, nothing but the refund can end it (OT134); a repeat of the same resolution returns the same result and writes nothing, but one with another note than the conflict keeps is refused (OT138); note, optional, is kept with the resolution (OT149 when not 1-500 plain characters)';
