CREATE FUNCTION ordertimeout.next_due()
RETURNS timestamptz
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT t.due_at FROM ordertimeout._timers AS t ORDER BY t.due_at LIMIT 1);
END
$$;

COMMENT ON FUNCTION ordertimeout.next_due() IS 'when the earliest timer row comes due (NULL when there is none)';
