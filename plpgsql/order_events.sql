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
    SELECT e.event_id, e.from_status, e.to_status, e.cause::text, e.actor, e.lateness, e.at, e.detail
    FROM ordertimeout.events AS e
    WHERE e.order_id = order_events.order_id
    ORDER BY e.event_id;
END
$$;

COMMENT ON FUNCTION ordertimeout.order_events(text) IS 'the history of one order, oldest first: why it is in the state it is in';
