-- The unresolved conflicts the sidecar acts on, oldest first: those claimed
-- for a refund (state refunding: the refund must be sent and recorded,
-- whoever claimed it), and the open ones whose late-payment policy is not
-- manual. The limit applies to these only: however many older conflicts wait
-- for a person, the ones the sidecar must resolve are read.
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
    late_payment text)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM ordertimeout._check_max(conflicts_to_resolve.max);
    RETURN QUERY
    SELECT c.conflict_id, c.order_id, c.payment_id, c.kind, c.amount, c.detected_at, c.currency, c.state,
           c.late_payment
    FROM ordertimeout._conflicts_with_policy AS c
    WHERE c.resolution IS NULL
      AND (c.state = 'refunding' OR c.late_payment <> 'manual')
    ORDER BY c.detected_at, c.conflict_id
    LIMIT conflicts_to_resolve.max;
END
$$;

COMMENT ON FUNCTION ordertimeout.conflicts_to_resolve(integer) IS
    'the unresolved conflicts the sidecar acts on, oldest first: claimed for a refund, or open under a late-payment policy other than manual; the columns of open_conflicts';
