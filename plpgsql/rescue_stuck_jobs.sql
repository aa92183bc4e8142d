-- River's rescuer decides that a job is stuck by the client's wall clock
-- (running since before client_now - RescueStuckJobsAfter): a sidecar whose
-- clock is fast would hand a running gateway check to a second worker. The
-- sidecar therefore sets River's rescuer far back and rescues the jobs of
-- its queues (ordertimeout, ordertimeout_webhook) here, by the database's
-- clock. Mirrors what River's rescuer does to a stuck job: cancelled if a
-- cancel was asked, discarded on its last attempt, otherwise available again
-- at once; an error is recorded on it.
CREATE FUNCTION ordertimeout.rescue_stuck_jobs(running_for interval, max integer DEFAULT 1000)
RETURNS TABLE (
    retried   integer,
    discarded integer,
    cancelled integer)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := clock_timestamp();
BEGIN
    IF rescue_stuck_jobs.running_for IS NULL THEN
        RAISE EXCEPTION 'running_for must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF rescue_stuck_jobs.running_for < interval '1 second'
       OR rescue_stuck_jobs.running_for > interval '1 day'
       OR ordertimeout._has_negative_part(rescue_stuck_jobs.running_for) THEN
        RAISE EXCEPTION 'running_for must be between 1 second and 1 day, with no negative part, got %',
            rescue_stuck_jobs.running_for
            USING ERRCODE = 'OT141';
    END IF;
    PERFORM ordertimeout._check_max(rescue_stuck_jobs.max);

    RETURN QUERY SELECT * FROM ordertimeout._rescue_stuck_jobs(rescue_stuck_jobs.running_for, rescue_stuck_jobs.max, v_now);
END
$$;

COMMENT ON FUNCTION ordertimeout.rescue_stuck_jobs(interval, integer) IS
    'for the sidecar: hands back up to max jobs of queues ordertimeout and ordertimeout_webhook that have been running longer than running_for by the database clock (their sidecar died): available again at once, discarded on their last attempt, cancelled if a cancel was asked; returns retried, discarded, cancelled';
