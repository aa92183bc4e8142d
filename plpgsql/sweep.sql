-- Whether args, the args of a timer row, are what the timers of
-- create_order and friends carry: {"order_id": <text>, "version": <integer>}.
CREATE FUNCTION ordertimeout._is_timer_args(args jsonb)
RETURNS boolean
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN jsonb_typeof(args -> 'order_id') = 'string'
       AND jsonb_typeof(args -> 'version') = 'number'
       AND (args ->> 'version') ~ '^[0-9]{1,9}$';
END
$$;

-- Sets malformed timer rows aside: discarded, with the reason recorded on
-- the row as River records errors (sweep_stats.malformed_timers counts
-- them). The order of such a row, if any, has lost its timer and is caught
-- by the fallback of sweep_due.
CREATE FUNCTION ordertimeout._discard_malformed_timers(job_ids bigint[], at timestamptz)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE public.river_job AS r
    SET state = 'discarded',
        finalized_at = _discard_malformed_timers.at,
        errors = array_append(r.errors, jsonb_build_object(
            'at', _discard_malformed_timers.at,
            'attempt', greatest(r.attempt, 0),
            'error', format('Malformed ordertimeout timer set aside by ordertimeout.sweep_due: args must be {"order_id": text, "version": integer}, got %s',
                            left(r.args::text, 200)),
            'trace', ''))
    WHERE r.id = ANY (_discard_malformed_timers.job_ids);
END
$$;

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
    v_now       timestamptz := clock_timestamp();
    v_precheck  text;
    v_job_ids   bigint[];
    v_ids       text[];
    v_versions  integer[];
    v_lost_ids  text[] := '{}';
    v_lost_vers integer[] := '{}';
    v_bad_ids   bigint[];
    v_causes    text[];
    v_timers    integer;
    v_lost      integer;
    v_cancelled integer;
    v_caught    integer;
    v_checks    integer;
    v_rescued_payments integer := 0;
    v_paused    boolean;
BEGIN
    PERFORM ordertimeout._check_max(sweep_due.max);
    SELECT s.precheck, s.paused INTO v_precheck, v_paused FROM ordertimeout.settings AS s;
    -- Paused (configure(paused => true)): the timers stay, nothing is claimed.
    IF v_paused THEN
        RETURN QUERY SELECT 0, 0, 0, 0, 0;
        RETURN;
    END IF;

    -- 1. Due timer rows (River's fetch index: state, queue, priority, scheduled_at).
    -- A row whose args are not {"order_id": text, "version": integer} is
    -- claimed too but only set aside below: one malformed row must not stop
    -- every sweep.
    SELECT coalesce(array_agg(j.id) FILTER (WHERE j.valid), '{}'),
           coalesce(array_agg(j.args ->> 'order_id') FILTER (WHERE j.valid), '{}'),
           coalesce(array_agg(CASE WHEN j.valid THEN (j.args ->> 'version')::integer END) FILTER (WHERE j.valid), '{}'),
           coalesce(array_agg(j.id) FILTER (WHERE NOT j.valid), '{}')
    INTO v_job_ids, v_ids, v_versions, v_bad_ids
    FROM (SELECT r.id, r.args, ordertimeout._is_timer_args(r.args) AS valid
            FROM public.river_job AS r
           WHERE r.state = 'available'
             AND r.queue = 'ordertimeout_expire'
             AND r.priority = 1
             AND r.scheduled_at <= v_now
           ORDER BY r.scheduled_at, r.id
           LIMIT sweep_due.max
             FOR UPDATE SKIP LOCKED) AS j;
    v_timers := cardinality(v_job_ids);
    IF cardinality(v_bad_ids) > 0 THEN
        PERFORM ordertimeout._discard_malformed_timers(v_bad_ids, v_now);
    END IF;

    -- 2. The fallback: PENDING orders past cancel_at whose timer row is gone.
    -- Run only when the timer rows did not fill the batch, so a backlog is
    -- never scanned twice; orders whose timer another session holds still
    -- have their row and are skipped.
    IF v_timers < sweep_due.max THEN
        SELECT coalesce(array_agg(l.order_id), '{}'), coalesce(array_agg(l.deadline_version), '{}')
        INTO v_lost_ids, v_lost_vers
        FROM (SELECT o.order_id, o.deadline_version
                FROM ordertimeout.orders AS o
               WHERE o.status = 'PENDING'
                 AND o.check_job_id IS NULL
                 AND o.cancel_at <= v_now
                 AND NOT EXISTS (SELECT 1
                                   FROM public.river_job AS r
                                  WHERE r.id = o.timer_job_id
                                    AND r.finalized_at IS NULL)
               ORDER BY o.cancel_at
               LIMIT sweep_due.max - v_timers
                 FOR NO KEY UPDATE SKIP LOCKED) AS l;
    END IF;
    v_lost := cardinality(v_lost_ids);

    -- 3. At most every 10 seconds, and only in a session that is not busy
    -- with a backlog: orders whose gateway-check job River lost (discarded,
    -- cancelled, deleted) are caught like lost timers; PAYING orders whose
    -- payment check was lost get a new one.
    IF v_timers + v_lost < sweep_due.max THEN
        PERFORM 1
        FROM ordertimeout.rescue_state AS s
        WHERE s.rescued_at <= v_now - interval '10 seconds'
        FOR UPDATE SKIP LOCKED;
        IF FOUND THEN
            UPDATE ordertimeout.rescue_state SET rescued_at = v_now;

            WITH stuck AS (
                SELECT o.order_id
                FROM ordertimeout.orders AS o
                WHERE o.status = 'PENDING'
                  AND o.check_job_id IS NOT NULL
                  AND o.cancel_at <= v_now
                  AND NOT EXISTS (SELECT 1
                                    FROM public.river_job AS r
                                   WHERE r.id = o.check_job_id
                                     AND r.finalized_at IS NULL)
                ORDER BY o.cancel_at
                LIMIT sweep_due.max - v_timers - v_lost
                FOR NO KEY UPDATE SKIP LOCKED
            ), rescued AS (
                UPDATE ordertimeout.orders AS o
                SET check_job_id = NULL
                FROM stuck
                WHERE o.order_id = stuck.order_id
                RETURNING o.order_id, o.deadline_version
            )
            SELECT v_lost_ids || coalesce(array_agg(r.order_id), '{}'),
                   v_lost_vers || coalesce(array_agg(r.deadline_version), '{}')
            INTO v_lost_ids, v_lost_vers
            FROM rescued AS r;
            v_lost := cardinality(v_lost_ids);

            WITH stuck AS (
                SELECT o.order_id
                FROM ordertimeout.orders AS o
                WHERE o.status = 'PAYING'
                  AND o.paying_until <= v_now
                  AND NOT EXISTS (SELECT 1
                                    FROM public.river_job AS r
                                   WHERE r.id = o.timer_job_id
                                     AND r.finalized_at IS NULL)
                ORDER BY o.paying_until
                LIMIT sweep_due.max
                FOR NO KEY UPDATE SKIP LOCKED
            ), rescued AS (
                UPDATE ordertimeout.orders AS o
                SET timer_job_id = nextval('public.river_job_id_seq')
                FROM stuck
                WHERE o.order_id = stuck.order_id
                RETURNING o.order_id, o.timer_job_id
            )
            INSERT INTO public.river_job (id, kind, args, queue, state, scheduled_at)
            SELECT r.timer_job_id, 'ordertimeout_payment_check',
                   jsonb_build_object('order_id', r.order_id, 'payment_id',
                       (SELECT p.payment_id
                          FROM ordertimeout.payments AS p
                         WHERE p.order_id = r.order_id
                           AND p.status = 'started'
                         ORDER BY p.started_at DESC
                         LIMIT 1)),
                   'ordertimeout', 'available', v_now
            FROM rescued AS r;
            GET DIAGNOSTICS v_rescued_payments = ROW_COUNT;
        END IF;
    END IF;

    v_ids := v_ids || v_lost_ids;
    v_versions := v_versions || v_lost_vers;
    v_causes := array_fill('timeout'::text, ARRAY[v_timers]) || array_fill('sweep'::text, ARRAY[v_lost]);

    -- 4. Orders whose policy wants the gateway asked first get a check job
    -- (worked by the sidecar) instead of a cancel.
    WITH checking AS (
        UPDATE ordertimeout.orders AS o
        SET check_job_id = nextval('public.river_job_id_seq'),
            timer_job_id = NULL
        FROM unnest(v_ids, v_versions) AS t(order_id, version)
        WHERE o.order_id = t.order_id
          AND o.status = 'PENDING'
          AND o.deadline_version = t.version
          AND o.check_job_id IS NULL
          AND CASE coalesce(o.precheck, v_precheck)
                  WHEN 'always' THEN true
                  WHEN 'never' THEN false
                  ELSE o.payment_attempted
              END
        RETURNING o.order_id, o.check_job_id, o.deadline_version
    )
    INSERT INTO public.river_job (id, kind, args, queue, state, scheduled_at)
    SELECT c.check_job_id, 'ordertimeout_precancel_check',
           jsonb_build_object('order_id', c.order_id, 'version', c.deadline_version),
           'ordertimeout', 'available', v_now
    FROM checking AS c;
    GET DIAGNOSTICS v_checks = ROW_COUNT;

    -- 5. Every claimed timer row has done its work or can no longer act.
    DELETE FROM public.river_job AS r WHERE r.id = ANY (v_job_ids);

    -- 6. Cancel and release the rest, set-based. Last, because releasing
    -- locks the batch's stock rows until the commit.
    SELECT count(*), count(*) FILTER (WHERE c.cancelled_cause = 'sweep')
    INTO v_cancelled, v_caught
    FROM ordertimeout._cancel_orders(v_ids, v_versions, v_causes, NULL, true) AS c;

    RETURN QUERY SELECT v_timers + v_lost + cardinality(v_bad_ids), v_cancelled, v_lost, v_checks + v_rescued_payments,
                        v_timers + v_lost + cardinality(v_bad_ids) - v_cancelled - v_checks;
END
$$;

COMMENT ON FUNCTION ordertimeout.sweep_due(integer) IS
    'claims up to max due timeouts (FOR UPDATE SKIP LOCKED) and cancels them in one transaction; also catches PENDING orders past cancel_at whose timer row or gateway-check job was lost, and re-queues lost payment checks of PAYING orders (at most every 10 s); returns claimed, cancelled, caught_by_sweep (lost timers found), checks (gateway checks queued), moot (timer rows that could no longer act)';

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

CREATE FUNCTION ordertimeout.preview_due(max integer DEFAULT 100)
RETURNS TABLE (
    order_id         text,
    cancel_at        timestamptz,
    overdue          interval,
    deadline_version integer,
    found_by         text,
    action           text)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now      timestamptz := clock_timestamp();
    v_precheck text;
BEGIN
    PERFORM ordertimeout._check_max(preview_due.max);
    SELECT s.precheck INTO v_precheck FROM ordertimeout.settings AS s;

    RETURN QUERY
    SELECT d.order_id, d.cancel_at, v_now - d.cancel_at, d.deadline_version, d.found_by,
           CASE WHEN CASE coalesce(d.precheck, v_precheck)
                         WHEN 'always' THEN true
                         WHEN 'never' THEN false
                         ELSE d.payment_attempted
                     END
                THEN 'check' ELSE 'cancel' END
    FROM (
        (SELECT o.order_id, o.cancel_at, o.deadline_version, 'timer'::text AS found_by, o.precheck, o.payment_attempted
           FROM public.river_job AS r
           JOIN ordertimeout.orders AS o
             ON ordertimeout._is_timer_args(r.args)
            AND o.order_id = r.args ->> 'order_id'
            AND o.deadline_version = (CASE WHEN ordertimeout._is_timer_args(r.args)
                                           THEN (r.args ->> 'version')::integer END)
            AND o.status = 'PENDING'
            AND o.check_job_id IS NULL
          WHERE r.state = 'available'
            AND r.queue = 'ordertimeout_expire'
            AND r.priority = 1
            AND r.scheduled_at <= v_now
          ORDER BY r.scheduled_at
          LIMIT preview_due.max)
        UNION ALL
        (SELECT o.order_id, o.cancel_at, o.deadline_version, 'sweep'::text, o.precheck, o.payment_attempted
           FROM ordertimeout.orders AS o
          WHERE o.status = 'PENDING'
            AND o.check_job_id IS NULL
            AND o.cancel_at <= v_now
            AND NOT EXISTS (SELECT 1
                              FROM public.river_job AS r
                             WHERE r.id = o.timer_job_id
                               AND r.finalized_at IS NULL)
          ORDER BY o.cancel_at
          LIMIT preview_due.max)
    ) AS d
    ORDER BY d.cancel_at, d.order_id
    LIMIT preview_due.max;
END
$$;

COMMENT ON FUNCTION ordertimeout.preview_due(integer) IS
    'dry run of sweep_due: the orders it would cancel (action cancel) or hand to a gateway check (action check) now, found by their timer row or by the fallback sweep; changes nothing';

-- For the sidecar's gateway check: cancels the order as a timeout if it is
-- still PENDING at the version the check was made for.
CREATE FUNCTION ordertimeout.cancel_checked(
    order_id         text,
    deadline_version integer)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_cancelled boolean;
    v_paused_at timestamptz;
BEGIN
    PERFORM ordertimeout._require_order(cancel_checked.order_id);
    IF cancel_checked.deadline_version IS NULL THEN
        RAISE EXCEPTION 'deadline_version must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    SELECT s.paused_at INTO v_paused_at FROM ordertimeout.settings AS s WHERE s.paused;
    IF FOUND THEN
        RAISE EXCEPTION 'timeout cancels are paused (since %): ask again after configure(paused => false)', v_paused_at
            USING ERRCODE = 'OT137';
    END IF;
    SELECT count(*) > 0 INTO v_cancelled
    FROM ordertimeout._cancel_orders(ARRAY[cancel_checked.order_id], ARRAY[cancel_checked.deadline_version],
                                     ARRAY['timeout'], 'gateway check: not paid', false);
    RETURN v_cancelled;
END
$$;

COMMENT ON FUNCTION ordertimeout.cancel_checked(text, integer) IS
    'for the sidecar: after the gateway said the order is not paid, cancels it as a timeout if it is still PENDING at deadline_version';

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

CREATE FUNCTION ordertimeout.plan_sleep(max_sleep interval)
RETURNS timestamptz
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_wake timestamptz;
BEGIN
    IF plan_sleep.max_sleep IS NULL THEN
        RAISE EXCEPTION 'max_sleep must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF plan_sleep.max_sleep < interval '0' OR plan_sleep.max_sleep > interval '1 hour' THEN
        RAISE EXCEPTION 'max_sleep must be between 0 and 1 hour, got %', plan_sleep.max_sleep
            USING ERRCODE = 'OT141';
    END IF;
    -- While paused, due timers are not worth waking for: sleep the longest.
    v_wake := CASE WHEN (SELECT s.paused FROM ordertimeout.settings AS s)
                   THEN clock_timestamp() + plan_sleep.max_sleep
                   ELSE least(ordertimeout.next_due(), clock_timestamp() + plan_sleep.max_sleep)
              END;
    UPDATE ordertimeout.sweep_state AS s SET wake_at = v_wake;
    RETURN v_wake;
END
$$;

COMMENT ON FUNCTION ordertimeout.plan_sleep(interval) IS
    'for the sidecar: the moment to sweep next (the earliest due timer, at most max_sleep away), recorded so that an order due sooner sends a wake-up on channel ordertimeout_wake';

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
