-- River's rescuer decides that a job is stuck by the client's wall clock
-- (running since before client_now - RescueStuckJobsAfter): a sidecar whose
-- clock is fast would hand a running gateway check to a second worker. The
-- sidecar therefore sets River's rescuer far back and rescues the jobs of
-- its queue here, by the database's clock. Mirrors what River's rescuer does
-- to a stuck job: cancelled if a cancel was asked, discarded on its last
-- attempt, otherwise available again at once; an error is recorded on it.
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
       OR rescue_stuck_jobs.running_for > interval '1 day' THEN
        RAISE EXCEPTION 'running_for must be between 1 second and 1 day, got %', rescue_stuck_jobs.running_for
            USING ERRCODE = 'OT141';
    END IF;
    PERFORM ordertimeout._check_max(rescue_stuck_jobs.max);

    RETURN QUERY
    WITH stuck AS (
        SELECT r.id,
               CASE
                   WHEN r.metadata ? 'cancel_attempted_at' THEN 'cancelled'
                   WHEN r.attempt >= r.max_attempts THEN 'discarded'
                   ELSE 'available'
               END::public.river_job_state AS next_state
        FROM public.river_job AS r
        WHERE r.state = 'running'
          AND r.queue = 'ordertimeout'
          AND r.attempted_at < v_now - rescue_stuck_jobs.running_for
        ORDER BY r.id
        LIMIT rescue_stuck_jobs.max
        FOR UPDATE SKIP LOCKED
    ), rescued AS (
        UPDATE public.river_job AS r
        SET state = s.next_state,
            scheduled_at = CASE WHEN s.next_state = 'available' THEN v_now ELSE r.scheduled_at END,
            finalized_at = CASE WHEN s.next_state = 'available' THEN NULL ELSE v_now END,
            errors = array_append(r.errors, jsonb_build_object(
                'at', v_now,
                'attempt', greatest(r.attempt, 0),
                'error', format('Stuck job rescued by ordertimeout.rescue_stuck_jobs: running since %s, over %s by the database clock',
                                r.attempted_at, rescue_stuck_jobs.running_for),
                'trace', ''))
        FROM stuck AS s
        WHERE r.id = s.id
        RETURNING r.state
    )
    SELECT count(*) FILTER (WHERE x.state = 'available')::integer,
           count(*) FILTER (WHERE x.state = 'discarded')::integer,
           count(*) FILTER (WHERE x.state = 'cancelled')::integer
    FROM rescued AS x;
END
$$;

COMMENT ON FUNCTION ordertimeout.rescue_stuck_jobs(interval, integer) IS
    'for the sidecar: hands back up to max jobs of queue ordertimeout that have been running longer than running_for by the database clock (their sidecar died): available again at once, discarded on their last attempt, cancelled if a cancel was asked; returns retried, discarded, cancelled';
