-- For the sidecar's gateway check: cancels the order as a timeout if it is
-- still PENDING at the version the check was made for.
-- Planned for index access, without JIT, like the sweep's small batches, whose
-- cached plans of _cancel_orders and _release a session shares (sweep_due.sql).
CREATE FUNCTION ordertimeout.cancel_checked(
    order_id         text,
    deadline_version integer)
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
    v_cancelled boolean;
    v_paused_at timestamptz;
BEGIN
    PERFORM ordertimeout._require_order(cancel_checked.order_id);
    IF cancel_checked.deadline_version IS NULL THEN
        RAISE EXCEPTION 'deadline_version must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    PERFORM ordertimeout._require_read_committed('cancel_checked');
    SELECT s.paused_at INTO v_paused_at FROM ordertimeout.settings AS s WHERE s.paused;
    IF FOUND THEN
        RAISE EXCEPTION 'timeout cancels are paused (since %): ask again after configure(paused => false)', v_paused_at
            USING ERRCODE = 'OT137';
    END IF;
    SELECT count(*) > 0 INTO v_cancelled
    FROM ordertimeout._cancel_orders(ARRAY[cancel_checked.order_id], ARRAY[cancel_checked.deadline_version],
                                     ARRAY['timeout'], 'gateway check: not paid', false);
    -- The order's lock is taken: a pause that began while this call waited
    -- for it rolls the cancel back (OT137), as a sweep's (_refuse_if_paused).
    IF v_cancelled THEN
        PERFORM ordertimeout._refuse_if_paused();
    END IF;
    RETURN v_cancelled;
END
$$;

COMMENT ON FUNCTION ordertimeout.cancel_checked(text, integer) IS
    'for the sidecar: after the gateway said the order is not paid, cancels it as a timeout if it is still PENDING at deadline_version and its cancel_at has come; OT137 while timeout cancels are paused, also when the pause began while it ran; READ COMMITTED only (OT154)';
