-- The in-database sweep: claims due timer rows with FOR UPDATE SKIP LOCKED and
-- cancels their orders set-based, in one transaction. Any number of sessions
-- may run it at once; each due order is cancelled by exactly one of them.
-- Plans: a sweep that claims 100 timer rows or more (a backlog) plans every
-- later statement for its arrays (plan_cache_mode = force_custom_plan, set
-- for the rest of the call, nested helpers included); a smaller one, what a
-- sweep finds at steady rates, runs cached generic plans. Re-planning the 15
-- statements of every sweep was most of a steady-state sweep's time
-- (pg_stat_statements with track_planning, 500 orders/s: 4 s of planning in
-- a 20-second run). A generic plan is kept until a table it reads gets new
-- statistics (autovacuum's analyze), so it is made for index access, without
-- sequential scans, hash or merge joins: one made while the tables were
-- small, as when a sidecar starts on a fresh database, scanned River's table
-- and order_items whole on every sweep of the steady benchmark. The single-
-- order functions that share these helpers' cached plans in a session
-- (cancel_order, cancel_checked) plan the same way. jit is off: a plan that
-- keeps a sequential scan where no index serves (the one-row settings
-- table) carries the disabled path's cost of 10^10, and would be compiled
-- on every execution (80 ms each, seen once).
CREATE FUNCTION ordertimeout.sweep_due(max integer DEFAULT 1000)
RETURNS TABLE (
    claimed         integer,
    cancelled       integer,
    caught_by_sweep integer,
    checks          integer,
    moot            integer,
    deferred        integer)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET jit = off
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
    v_causes     text[];
    v_timer_ids  text[];
    v_scan_from  timestamptz;
    v_full       boolean;
    v_record     boolean;
    v_deferred   text[];
    v_timers     integer;
    v_checks     integer;
    v_cancelled  integer;
BEGIN
    PERFORM ordertimeout._check_max(sweep_due.max);
    PERFORM ordertimeout._require_read_committed('sweep_due');
    SELECT s.* INTO v_settings FROM ordertimeout.settings AS s;
    -- Paused (configure(paused => true)), or a pause not committed yet: the
    -- timers stay, nothing is claimed.
    IF v_settings.paused OR ordertimeout._pause_pending() THEN
        RETURN QUERY SELECT 0, 0, 0, 0, 0, 0;
        RETURN;
    END IF;

    -- 1. Claim the due timer rows (malformed ones are set aside): those due
    -- in the last seconds, or every one (_scan_from). When the last seconds
    -- hold none, every due row is looked at: a call that claims nothing
    -- means that nothing it could take is due, which callers that sweep
    -- until a call comes back empty rely on.
    v_scan_from := ordertimeout._scan_from(v_now);
    SELECT c.job_ids, c.order_ids, c.versions, c.malformed
    INTO v_job_ids, v_ids, v_versions, v_malformed
    FROM ordertimeout._claim_due_timers(sweep_due.max, v_now, v_scan_from) AS c;
    IF v_scan_from IS NOT NULL AND cardinality(v_job_ids) + v_malformed = 0 THEN
        v_scan_from := NULL;
        SELECT c.job_ids, c.order_ids, c.versions, c.malformed
        INTO v_job_ids, v_ids, v_versions, v_malformed
        FROM ordertimeout._claim_due_timers(sweep_due.max, v_now, NULL) AS c;
    END IF;
    v_timers := cardinality(v_job_ids);
    IF v_timers >= 100 THEN
        PERFORM set_config('plan_cache_mode', 'force_custom_plan', true),
                set_config('enable_seqscan', 'on', true),
                set_config('enable_hashjoin', 'on', true),
                set_config('enable_mergejoin', 'on', true);
    END IF;

    -- 2. The fallback, only when the timer rows did not fill the batch (a
    -- backlog is never scanned twice): PENDING orders past cancel_at whose
    -- timer row is gone; and at most every 10 seconds, those whose gateway
    -- check River lost (PAYING orders whose payment check was lost get a new
    -- one).
    IF v_timers < sweep_due.max THEN
        SELECT l.order_ids, l.versions INTO v_lost_ids, v_lost_vers
        FROM ordertimeout._find_lost_timers(sweep_due.max - v_timers, v_now, v_job_ids, v_scan_from) AS l;
    END IF;
    IF v_timers + cardinality(v_lost_ids) < sweep_due.max THEN
        SELECT v_lost_ids || r.order_ids, v_lost_vers || r.versions, r.payment_checks
        INTO v_lost_ids, v_lost_vers, v_rescued
        FROM ordertimeout._rescue_lost_checks(sweep_due.max - v_timers - cardinality(v_lost_ids), v_now) AS r;
    END IF;

    -- 3. Unless the batch is full (a backlog), lock what its cancels need
    -- without waiting: orders whose row, stock or points another transaction
    -- holds are deferred to the next sweep, with their timer rows.
    v_timer_ids := v_ids;
    v_ids := v_ids || v_lost_ids;
    v_versions := v_versions || v_lost_vers;
    v_causes := array_fill('timeout'::text, ARRAY[v_timers]) || array_fill('sweep'::text, ARRAY[cardinality(v_lost_ids)]);
    -- Full: every row the batch could take was taken (timer rows, lost
    -- timers, malformed rows set aside), a backlog.
    v_full := cardinality(v_ids) + v_malformed >= sweep_due.max;
    v_deferred := ordertimeout._lock_sweep_batch(v_ids, v_versions, v_full);
    IF cardinality(v_deferred) > 0 THEN
        SELECT coalesce(array_agg(t.order_id ORDER BY t.n), '{}'), coalesce(array_agg(t.version ORDER BY t.n), '{}'),
               coalesce(array_agg(t.cause ORDER BY t.n), '{}')
        INTO v_ids, v_versions, v_causes
        FROM unnest(v_ids, v_versions, v_causes) WITH ORDINALITY AS t(order_id, version, cause, n)
        WHERE NOT t.order_id = ANY (v_deferred);
        SELECT coalesce(array_agg(t.job_id), '{}') INTO v_job_ids
        FROM unnest(v_job_ids, v_timer_ids) AS t(job_id, order_id)
        WHERE NOT t.order_id = ANY (v_deferred);
    END IF;

    -- 4. Every timer row still claimed has done its work or can no longer act.
    PERFORM ordertimeout._delete_jobs(v_job_ids);

    -- 5. Cancel and release, set-based; orders whose policy wants the
    -- gateway asked first get a check job (worked by the sidecar) instead.
    SELECT count(*) FILTER (WHERE c.cancelled_cause <> 'check'), count(*) FILTER (WHERE c.cancelled_cause = 'check')
    INTO v_cancelled, v_checks
    FROM ordertimeout._cancel_orders(v_ids, v_versions, v_causes, NULL, true) AS c;
    -- Every lock is taken: a pause that began since the settings were read
    -- above rolls this call back (OT137), and one that begins from here on
    -- waits for its commit (_refuse_if_paused).
    IF v_cancelled > 0 THEN
        PERFORM ordertimeout._refuse_if_paused();
    END IF;

    -- Record a full look, or a full batch (of timer rows or lost timers:
    -- the next sweeps look at every row until one comes back short). A
    -- full look that left an order due before the window to another
    -- transaction is not recorded: the next sweep, a millisecond later,
    -- looks at every row again rather than a second later.
    v_record := v_full OR v_scan_from IS NULL;
    IF v_record AND cardinality(v_deferred) > 0 THEN
        v_record := NOT EXISTS (SELECT 1 FROM ordertimeout.orders AS o
                                 WHERE o.order_id = ANY (v_deferred)
                                   AND o.cancel_at < v_now - ordertimeout._scan_window());
    END IF;
    IF v_record THEN
        PERFORM ordertimeout._record_scan(v_now, v_full);
    END IF;

    -- Deferred orders are not claimed: their timer rows go back at the
    -- commit, and the caller may sweep again soon (the sidecar does, within
    -- milliseconds: the holder is usually a create or a payment about to
    -- commit).
    RETURN QUERY SELECT cardinality(v_ids) + v_malformed, v_cancelled,
                        (SELECT count(*)::integer FROM unnest(v_causes) AS c WHERE c = 'sweep'),
                        v_checks + v_rescued, cardinality(v_ids) + v_malformed - v_cancelled - v_checks,
                        coalesce(cardinality(v_deferred), 0);
END
$$;

COMMENT ON FUNCTION ordertimeout.sweep_due(integer) IS
    'claims up to max due timeouts (FOR UPDATE SKIP LOCKED) and cancels them in one transaction; also catches PENDING orders past cancel_at whose timer row or gateway-check job was lost, and re-queues lost payment checks of PAYING orders (at most every 10 s); a batch that is not full waits for no lock: an order whose row, stock or points another transaction holds is left, with its timer row, to the next call; a call that would cancel after a pause began raises OT137 and keeps nothing; READ COMMITTED only (OT154); returns claimed, cancelled, caught_by_sweep (lost timers found), checks (gateway checks queued), moot (timer rows that could no longer act), deferred (due orders left to the next call because another transaction held a lock their cancel needs; not in claimed)';
