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
