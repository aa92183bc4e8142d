-- Planned for index access, without JIT, like the sweep's small batches, whose
-- cached plans of _cancel_orders and _release a session shares (sweep_due.sql).
CREATE FUNCTION ordertimeout.cancel_order(
    order_id text,
    reason   text DEFAULT 'requested')
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET jit = off
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

    v_timer := (ordertimeout._lock_order(cancel_order.order_id)).timer_job_id;

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
