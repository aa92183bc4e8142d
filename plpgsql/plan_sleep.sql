-- The form sidecars before migration 000050 call: the wake_at of
-- plan_next_sweep(max_sleep) (plan_next_sweep.sql).
CREATE FUNCTION ordertimeout.plan_sleep(max_sleep interval)
RETURNS timestamptz
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT p.wake_at FROM ordertimeout.plan_next_sweep(plan_sleep.max_sleep) AS p);
END
$$;

COMMENT ON FUNCTION ordertimeout.plan_sleep(interval) IS
    'for the sidecar: the moment to sweep next (the earliest due timer, at most max_sleep away), recorded so that an order due sooner sends a wake-up on channel ordertimeout_wake; the wake_at of plan_next_sweep(max_sleep)';
