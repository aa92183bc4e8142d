CREATE FUNCTION ordertimeout.cancel_due(max integer DEFAULT 1000)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT s.cancelled FROM ordertimeout.sweep_due(cancel_due.max) AS s);
END
$$;

COMMENT ON FUNCTION ordertimeout.cancel_due(integer) IS
    'cancels up to max due orders in one transaction and returns how many; safe from any number of sessions at once; runnable from pg_cron';
