CREATE FUNCTION ordertimeout.open_conflicts(max integer DEFAULT 1000)
RETURNS TABLE (
    conflict_id bigint,
    order_id    text,
    payment_id  text,
    kind        text,
    amount      numeric,
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
    PERFORM ordertimeout._check_max(open_conflicts.max);
    RETURN QUERY
    SELECT c.conflict_id, c.order_id, c.payment_id, c.kind, c.amount, c.detected_at, c.currency, c.state,
           c.late_payment, c.handed_over_at, c.handed_over_why
    FROM ordertimeout._conflicts_with_policy AS c
    WHERE c.resolution IS NULL
    ORDER BY c.detected_at, c.conflict_id
    LIMIT open_conflicts.max;
END
$$;

COMMENT ON FUNCTION ordertimeout.open_conflicts(integer) IS
    'unresolved conflicts (open, or refunding: claimed for a refund not yet recorded), oldest first, with the late-payment policy that applies (the payment method''s, else the settings''), and when and why the sidecar handed one to a person (hand_over_conflict); the sidecar reads conflicts_to_resolve';
