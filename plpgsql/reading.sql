CREATE FUNCTION ordertimeout.order_info(order_id text)
RETURNS ordertimeout.order_state
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM ordertimeout._require_order(order_info.order_id);
    RETURN ordertimeout._order_state(order_info.order_id, false);
END
$$;

COMMENT ON FUNCTION ordertimeout.order_info(text) IS 'one order: status, deadlines, items, holds, open conflicts';

CREATE FUNCTION ordertimeout.order_events(order_id text)
RETURNS TABLE (
    event_id    bigint,
    from_status text,
    to_status   text,
    cause       text,
    actor       text,
    lateness    interval,
    at          timestamptz,
    detail      jsonb)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM ordertimeout._require_order(order_events.order_id);
    RETURN QUERY
    SELECT e.event_id, e.from_status, e.to_status, e.cause, e.actor, e.lateness, e.at, e.detail
    FROM ordertimeout.events AS e
    WHERE e.order_id = order_events.order_id
    ORDER BY e.event_id;
END
$$;

COMMENT ON FUNCTION ordertimeout.order_events(text) IS 'the history of one order, oldest first: why it is in the state it is in';

CREATE FUNCTION ordertimeout.order_payments(order_id text)
RETURNS TABLE (
    payment_id   text,
    status       text,
    amount       numeric,
    started_at   timestamptz,
    confirmed_at timestamptz,
    failed_at    timestamptz)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM ordertimeout._require_order(order_payments.order_id);
    RETURN QUERY
    SELECT p.payment_id, p.status, p.amount, p.started_at, p.confirmed_at, p.failed_at
    FROM ordertimeout.payments AS p
    WHERE p.order_id = order_payments.order_id
    ORDER BY coalesce(p.started_at, p.confirmed_at), p.payment_id;
END
$$;

COMMENT ON FUNCTION ordertimeout.order_payments(text) IS 'the payment attempts of one order';
