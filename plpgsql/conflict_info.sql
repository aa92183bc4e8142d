-- One conflict by its id (conflict_id), whatever its state (open,
-- refunding, resolved), with the late-payment policy that applies to it: the
-- columns of open_conflicts. No row when there is no such conflict.
CREATE FUNCTION ordertimeout.conflict_info(id bigint)
RETURNS TABLE (
    conflict_id  bigint,
    order_id     text,
    payment_id   text,
    kind         text,
    amount       numeric,
    detected_at  timestamptz,
    currency     text,
    state        text,
    late_payment text,
    handed_over_at  timestamptz,
    handed_over_why text)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF conflict_info.id IS NULL THEN
        RAISE EXCEPTION 'id must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    RETURN QUERY
    SELECT c.conflict_id, c.order_id, c.payment_id, c.kind, c.amount, c.detected_at, c.currency, c.state,
           c.late_payment, c.handed_over_at, c.handed_over_why
    FROM ordertimeout._conflicts_with_policy AS c
    WHERE c.conflict_id = conflict_info.id;
END
$$;

COMMENT ON FUNCTION ordertimeout.conflict_info(bigint) IS
    'one conflict by id, in any state (open, refunding, resolved), with the late-payment policy that applies: the columns of open_conflicts; no row when unknown';
