-- The unresolved conflicts the sidecar acts on, oldest first: those claimed
-- for a refund (state refunding: the refund must be sent and recorded,
-- whoever claimed it), and the open ones whose late-payment policy is not
-- manual and that the sidecar has not handed to a person
-- (hand_over_conflict: asked again at every rescan, they would be handed
-- over again, and the gateway asked for nothing). The limit applies to
-- these only: however many older conflicts wait for a person, the ones the
-- sidecar must resolve are read.
CREATE FUNCTION ordertimeout.conflicts_to_resolve(max integer DEFAULT 1000)
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
    PERFORM ordertimeout._check_max(conflicts_to_resolve.max);
    RETURN QUERY
    SELECT c.conflict_id, c.order_id, c.payment_id, c.kind, c.amount, c.detected_at, c.currency, c.state,
           c.late_payment, c.handed_over_at, c.handed_over_why
    FROM ordertimeout._conflicts_with_policy AS c
    WHERE c.resolution IS NULL
      AND (c.state = 'refunding' OR (c.late_payment <> 'manual' AND c.handed_over_at IS NULL))
    ORDER BY c.detected_at, c.conflict_id
    LIMIT conflicts_to_resolve.max;
END
$$;

COMMENT ON FUNCTION ordertimeout.conflicts_to_resolve(integer) IS
    'the unresolved conflicts the sidecar acts on, oldest first: claimed for a refund, or open under a late-payment policy other than manual and not handed to a person (hand_over_conflict); the columns of open_conflicts';
