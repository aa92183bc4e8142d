-- The in-database sweep: claims due timer rows with FOR UPDATE SKIP LOCKED and
-- cancels their orders set-based, in one transaction. Any number of sessions
-- may run it at once; each due order is cancelled by exactly one of them.
-- plan_cache_mode = force_custom_plan holds for the nested helpers too: a
-- batch of a thousand orders always gets a plan made for its arrays, while
-- single-order callers of the same helpers (cancel_order, cancel_checked)
-- run with generic plans (see create_order.sql).
CREATE FUNCTION ordertimeout.sweep_due(max integer DEFAULT 1000)
RETURNS TABLE (
    claimed         integer,
    cancelled       integer,
    caught_by_sweep integer,
    checks          integer,
    moot            integer)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan
AS $$
#variable_conflict use_column
DECLARE
    v_now        timestamptz := clock_timestamp();
    v_settings   ordertimeout.settings;
    v_job_ids    bigint[];
    v_ids        text[];
    v_versions   integer[];
    v_malformed  integer;
    v_lost_ids   text[] := '{}';
    v_lost_vers  integer[] := '{}';
    v_rescued    integer := 0;
    v_timers     integer;
    v_checks     integer;
    v_cancelled  integer;
    v_caught     integer;
BEGIN
    PERFORM ordertimeout._check_max(sweep_due.max);
    SELECT s.* INTO v_settings FROM ordertimeout.settings AS s;
    -- Paused (configure(paused => true)): the timers stay, nothing is claimed.
    IF v_settings.paused THEN
        RETURN QUERY SELECT 0, 0, 0, 0, 0;
        RETURN;
    END IF;

    -- 1. Claim the due timer rows (malformed ones are set aside).
    SELECT c.job_ids, c.order_ids, c.versions, c.malformed
    INTO v_job_ids, v_ids, v_versions, v_malformed
    FROM ordertimeout._claim_due_timers(sweep_due.max, v_now) AS c;
    v_timers := cardinality(v_job_ids);

    -- 2. The fallback, only when the timer rows did not fill the batch (a
    -- backlog is never scanned twice): PENDING orders past cancel_at whose
    -- timer row is gone; and at most every 10 seconds, those whose gateway
    -- check River lost (PAYING orders whose payment check was lost get a new
    -- one).
    IF v_timers < sweep_due.max THEN
        SELECT l.order_ids, l.versions INTO v_lost_ids, v_lost_vers
        FROM ordertimeout._find_lost_timers(sweep_due.max - v_timers, v_now) AS l;
    END IF;
    IF v_timers + cardinality(v_lost_ids) < sweep_due.max THEN
        SELECT v_lost_ids || r.order_ids, v_lost_vers || r.versions, r.payment_checks
        INTO v_lost_ids, v_lost_vers, v_rescued
        FROM ordertimeout._rescue_lost_checks(sweep_due.max - v_timers - cardinality(v_lost_ids), v_now) AS r;
    END IF;

    -- 3. Orders whose policy wants the gateway asked first get a check job
    -- (worked by the sidecar) instead of a cancel; _cancel_orders leaves them.
    v_ids := v_ids || v_lost_ids;
    v_versions := v_versions || v_lost_vers;
    v_checks := ordertimeout._queue_checks(v_ids, v_versions, v_settings.precheck, v_now);

    -- 4. Every claimed timer row has done its work or can no longer act.
    PERFORM ordertimeout._delete_jobs(v_job_ids);

    -- 5. Cancel and release the rest, set-based. Last, because releasing
    -- locks the batch's stock rows until the commit.
    SELECT count(*), count(*) FILTER (WHERE c.cancelled_cause = 'sweep')
    INTO v_cancelled, v_caught
    FROM ordertimeout._cancel_orders(
        v_ids, v_versions,
        array_fill('timeout'::text, ARRAY[v_timers]) || array_fill('sweep'::text, ARRAY[cardinality(v_lost_ids)]),
        NULL, true) AS c;

    RETURN QUERY SELECT v_timers + v_malformed + cardinality(v_lost_ids), v_cancelled, cardinality(v_lost_ids),
                        v_checks + v_rescued, v_timers + v_malformed + cardinality(v_lost_ids) - v_cancelled - v_checks;
END
$$;

COMMENT ON FUNCTION ordertimeout.sweep_due(integer) IS
    'claims up to max due timeouts (FOR UPDATE SKIP LOCKED) and cancels them in one transaction; also catches PENDING orders past cancel_at whose timer row or gateway-check job was lost, and re-queues lost payment checks of PAYING orders (at most every 10 s); returns claimed, cancelled, caught_by_sweep (lost timers found), checks (gateway checks queued), moot (timer rows that could no longer act)';
