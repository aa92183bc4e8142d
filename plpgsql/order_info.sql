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
