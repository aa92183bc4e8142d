CREATE FUNCTION ordertimeout.next_due()
RETURNS timestamptz
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT r.scheduled_at
              FROM public.river_job AS r
             WHERE r.state = 'available'
               AND r.queue = 'ordertimeout_expire'
               AND r.priority = 1
             ORDER BY r.scheduled_at
             LIMIT 1);
END
$$;

COMMENT ON FUNCTION ordertimeout.next_due() IS 'when the earliest timer row comes due (NULL when there is none)';
