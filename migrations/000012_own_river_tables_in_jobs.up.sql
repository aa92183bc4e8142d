-- River's tables get one owner, plpgsql/jobs.sql: every statement on
-- public.river_job goes through its views (_timers: the one definition of a
-- due timer, shared by sweep_due, preview_due, next_due and sweep_stats;
-- _malformed_timers; _unfinished_jobs) and helpers (_new_job_id,
-- _schedule_timer, _insert_jobs, _delete_jobs, _claim_due_timers,
-- _rescue_stuck_jobs). sweep_due is split into helpers (_find_lost_timers,
-- _rescue_lost_checks, _queue_checks); the order lock with its OT120 is one
-- helper (_lock_order), the precheck decision another (_wants_check).
-- Behaviour changes: _drop_timer also deletes an order's payment check that
-- no worker has started, so a payment confirmed before its check comes due
-- leaves no job behind. sweep_state becomes UNLOGGED: plan_sleep, called
-- after every sweep, then commits without a WAL flush (wake_at is a hint;
-- after a crash the table is empty and new orders wake the sweepers until
-- plan_sleep writes it again). _queue_checks looks the batch up by primary
-- key instead of scanning every PENDING order. A sweep whose batch is not
-- full never waits for a lock (_lock_sweep_batch): an order whose row, stock
-- or points another transaction holds is left for the next sweep, with its
-- timer row.
--
-- Hand-written: the functions are the plpgsql/ files of this version, with
-- CREATE OR REPLACE for those that existed; the down migration restores the
-- bodies of 000011.

ALTER TABLE ordertimeout.sweep_state SET UNLOGGED;
COMMENT ON TABLE ordertimeout.sweep_state IS
    'when the sleeping sweepers wake up on their own (written by plan_sleep, read by create_order); unlogged: empty after a crash until the next plan_sleep';

CREATE VIEW ordertimeout._timers AS
SELECT r.id AS job_id, r.args, r.scheduled_at AS due_at
FROM public.river_job AS r
WHERE r.state = 'available'
  AND r.queue = 'ordertimeout_expire'
  AND r.priority = 1;

COMMENT ON VIEW ordertimeout._timers IS
    'timer rows waiting for their moment (due once due_at <= now); the one definition sweep_due, preview_due, next_due and sweep_stats share';

CREATE VIEW ordertimeout._malformed_timers AS
SELECT r.id AS job_id, r.args, r.finalized_at
FROM public.river_job AS r
WHERE r.state = 'discarded'
  AND r.queue = 'ordertimeout_expire';

COMMENT ON VIEW ordertimeout._malformed_timers IS
    'timer rows set aside by sweep_due (malformed args), with the reason in River''s errors column';

CREATE VIEW ordertimeout._unfinished_jobs AS
SELECT r.id AS job_id
FROM public.river_job AS r
WHERE r.finalized_at IS NULL;

COMMENT ON VIEW ordertimeout._unfinished_jobs IS
    'ids of River jobs not finalized yet: the anti-join that finds orders whose timer or check was lost';

CREATE OR REPLACE VIEW ordertimeout.sweep_stats AS
SELECT
    (SELECT count(*) FROM ordertimeout._timers AS t WHERE t.due_at <= now()) AS due_timers,
    (SELECT count(*)
       FROM ordertimeout.orders AS o
      WHERE o.status = 'PENDING'
        AND o.check_job_id IS NULL
        AND o.cancel_at <= now()) AS overdue_orders,
    (SELECT min(o.cancel_at)
       FROM ordertimeout.orders AS o
      WHERE o.status = 'PENDING'
        AND o.check_job_id IS NULL) AS oldest_pending_cancel_at,
    (SELECT count(*)
       FROM ordertimeout.orders AS o
      WHERE o.status = 'PENDING'
        AND o.check_job_id IS NOT NULL) AS awaiting_check,
    (SELECT count(*)
       FROM ordertimeout.orders AS o
      WHERE o.status = 'PAYING') AS paying,
    (SELECT count(*)
       FROM ordertimeout.events AS e
      WHERE e.cause = 'sweep') AS caught_by_sweep,
    (SELECT count(*)
       FROM ordertimeout.conflicts AS c
      WHERE c.resolution IS NULL) AS open_conflicts,
    (SELECT count(*) FROM ordertimeout._malformed_timers) AS malformed_timers,
    (SELECT s.paused FROM ordertimeout.settings AS s) AS paused;

COMMENT ON VIEW ordertimeout.sweep_stats IS
    'the sweep''s health: due timer rows, overdue orders, orders waiting for a gateway check, timeouts caught without their timer row (lost timers), open conflicts, malformed timer rows set aside by sweep_due, whether timeout cancels are paused';

CREATE FUNCTION ordertimeout._lock_order(order_id text)
RETURNS ordertimeout.orders
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_order ordertimeout.orders;
BEGIN
    SELECT o.* INTO v_order
    FROM ordertimeout.orders AS o
    WHERE o.order_id = _lock_order.order_id
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'order_id "%" is unknown', _lock_order.order_id
            USING ERRCODE = 'OT120';
    END IF;
    RETURN v_order;
END
$$;

CREATE FUNCTION ordertimeout._wants_check(precheck text, default_precheck text, payment_attempted boolean)
RETURNS boolean
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
AS $$
    SELECT CASE coalesce(precheck, default_precheck)
               WHEN 'always' THEN true
               WHEN 'never' THEN false
               ELSE payment_attempted
           END
$$;

CREATE FUNCTION ordertimeout._find_lost_timers(
    max           integer,
    at            timestamptz,
    OUT order_ids text[],
    OUT versions  integer[])
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    SELECT coalesce(array_agg(l.order_id), '{}'), coalesce(array_agg(l.deadline_version), '{}')
    INTO order_ids, versions
    FROM (SELECT o.order_id, o.deadline_version
            FROM ordertimeout.orders AS o
           WHERE o.status = 'PENDING'
             AND o.check_job_id IS NULL
             AND o.cancel_at <= _find_lost_timers.at
             AND NOT EXISTS (SELECT 1 FROM ordertimeout._unfinished_jobs AS j WHERE j.job_id = o.timer_job_id)
           ORDER BY o.cancel_at
           LIMIT _find_lost_timers.max
             FOR NO KEY UPDATE SKIP LOCKED) AS l;
END
$$;

CREATE FUNCTION ordertimeout._rescue_lost_checks(
    max                integer,
    at                 timestamptz,
    OUT order_ids      text[],
    OUT versions       integer[],
    OUT payment_checks integer)
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_check_ids bigint[];
    v_check_args jsonb[];
BEGIN
    order_ids := '{}';
    versions := '{}';
    payment_checks := 0;
    PERFORM 1
    FROM ordertimeout.rescue_state AS s
    WHERE s.rescued_at <= _rescue_lost_checks.at - interval '10 seconds'
    FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    UPDATE ordertimeout.rescue_state SET rescued_at = _rescue_lost_checks.at;

    WITH stuck AS (
        SELECT o.order_id
        FROM ordertimeout.orders AS o
        WHERE o.status = 'PENDING'
          AND o.check_job_id IS NOT NULL
          AND o.cancel_at <= _rescue_lost_checks.at
          AND NOT EXISTS (SELECT 1 FROM ordertimeout._unfinished_jobs AS j WHERE j.job_id = o.check_job_id)
        ORDER BY o.cancel_at
        LIMIT _rescue_lost_checks.max
        FOR NO KEY UPDATE SKIP LOCKED
    ), rescued AS (
        UPDATE ordertimeout.orders AS o
        SET check_job_id = NULL
        FROM stuck
        WHERE o.order_id = stuck.order_id
        RETURNING o.order_id, o.deadline_version
    )
    SELECT coalesce(array_agg(r.order_id), '{}'), coalesce(array_agg(r.deadline_version), '{}')
    INTO order_ids, versions
    FROM rescued AS r;

    WITH stuck AS (
        SELECT o.order_id
        FROM ordertimeout.orders AS o
        WHERE o.status = 'PAYING'
          AND o.paying_until <= _rescue_lost_checks.at
          AND NOT EXISTS (SELECT 1 FROM ordertimeout._unfinished_jobs AS j WHERE j.job_id = o.timer_job_id)
        ORDER BY o.paying_until
        LIMIT _rescue_lost_checks.max
        FOR NO KEY UPDATE SKIP LOCKED
    ), rescued AS (
        UPDATE ordertimeout.orders AS o
        SET timer_job_id = ordertimeout._new_job_id()
        FROM stuck
        WHERE o.order_id = stuck.order_id
        RETURNING o.order_id, o.timer_job_id
    )
    SELECT array_agg(r.timer_job_id),
           array_agg(jsonb_build_object('order_id', r.order_id, 'payment_id',
               (SELECT p.payment_id
                  FROM ordertimeout.payments AS p
                 WHERE p.order_id = r.order_id
                   AND p.status = 'started'
                 ORDER BY p.started_at DESC
                 LIMIT 1)))
    INTO v_check_ids, v_check_args
    FROM rescued AS r;
    payment_checks := ordertimeout._insert_jobs(v_check_ids, 'ordertimeout_payment_check', v_check_args,
                                                _rescue_lost_checks.at);
END
$$;

CREATE FUNCTION ordertimeout._queue_checks(order_ids text[], versions integer[], default_precheck text, at timestamptz)
RETURNS text[]
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_wanted     text[];
    v_check_ids  bigint[];
    v_check_args jsonb[];
BEGIN
    SELECT array_agg(t.order_id) FILTER (WHERE w.wanted) INTO v_wanted
    FROM unnest(_queue_checks.order_ids, _queue_checks.versions) AS t(order_id, version)
    CROSS JOIN LATERAL (
        SELECT o.status = 'PENDING'
           AND o.deadline_version = t.version
           AND o.check_job_id IS NULL
           AND ordertimeout._wants_check(o.precheck, _queue_checks.default_precheck, o.payment_attempted) AS wanted
        FROM ordertimeout.orders AS o
        WHERE o.order_id = t.order_id
        OFFSET 0) AS w;
    IF v_wanted IS NULL THEN
        RETURN '{}';
    END IF;

    WITH checking AS (
        UPDATE ordertimeout.orders AS o
        SET check_job_id = ordertimeout._new_job_id(),
            timer_job_id = NULL
        FROM unnest(_queue_checks.order_ids, _queue_checks.versions) AS t(order_id, version)
        WHERE o.order_id = t.order_id
          AND o.order_id = ANY (v_wanted)
          AND o.status = 'PENDING'
          AND o.deadline_version = t.version
          AND o.check_job_id IS NULL
          AND ordertimeout._wants_check(o.precheck, _queue_checks.default_precheck, o.payment_attempted)
        RETURNING o.order_id, o.check_job_id, o.deadline_version
    )
    SELECT array_agg(c.check_job_id),
           array_agg(jsonb_build_object('order_id', c.order_id, 'version', c.deadline_version)),
           coalesce(array_agg(c.order_id), '{}')
    INTO v_check_ids, v_check_args, v_wanted
    FROM checking AS c;
    PERFORM ordertimeout._insert_jobs(v_check_ids, 'ordertimeout_precancel_check', v_check_args, _queue_checks.at);
    RETURN v_wanted;
END
$$;

CREATE FUNCTION ordertimeout._lock_sweep_batch(order_ids text[], versions integer[], draining boolean)
RETURNS text[]
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_locked   text[];
    v_live     text[];
    v_skus     text[];
    v_got_skus text[];
    v_accounts text[];
    v_got_accounts text[];
    v_deferred text[];
BEGIN
    IF cardinality(_lock_sweep_batch.order_ids) = 0 OR _lock_sweep_batch.draining THEN
        RETURN '{}';
    END IF;

    SELECT coalesce(array_agg(l.order_id), '{}') INTO v_locked
    FROM (SELECT o.order_id
            FROM ordertimeout.orders AS o
           WHERE o.order_id = ANY (_lock_sweep_batch.order_ids)
           ORDER BY o.order_id
             FOR NO KEY UPDATE SKIP LOCKED) AS l;

    -- The orders this sweep may cancel (the rest will be moot) and what
    -- their cancel locks.
    SELECT coalesce(array_agg(DISTINCT t.order_id) FILTER (WHERE l.live), '{}') INTO v_live
    FROM unnest(_lock_sweep_batch.order_ids, _lock_sweep_batch.versions) AS t(order_id, version)
    CROSS JOIN LATERAL (
        SELECT o.status = 'PENDING' AND o.deadline_version = t.version AS live
        FROM ordertimeout.orders AS o
        WHERE o.order_id = t.order_id
        OFFSET 0) AS l
    WHERE t.order_id = ANY (v_locked);
    SELECT coalesce(array_agg(DISTINCT i.sku), '{}') INTO v_skus
    FROM ordertimeout.order_items AS i
    WHERE i.order_id = ANY (v_live);
    SELECT coalesce(array_agg(s.sku), '{}') INTO v_got_skus
    FROM (SELECT s.sku
            FROM ordertimeout.stock AS s
           WHERE s.sku = ANY (v_skus)
           ORDER BY s.sku
             FOR NO KEY UPDATE SKIP LOCKED) AS s;
    SELECT coalesce(array_agg(DISTINCT h.account_id), '{}') INTO v_accounts
    FROM ordertimeout.points_holds AS h
    WHERE h.order_id = ANY (v_live)
      AND h.released_at IS NULL
      AND h.used_at IS NULL;
    IF cardinality(v_accounts) > 0 THEN
        SELECT coalesce(array_agg(a.account_id), '{}') INTO v_got_accounts
        FROM (SELECT a.account_id
                FROM ordertimeout.points_accounts AS a
               WHERE a.account_id = ANY (v_accounts)
               ORDER BY a.account_id
                 FOR NO KEY UPDATE SKIP LOCKED) AS a;
    ELSE
        v_got_accounts := '{}';
    END IF;

    SELECT coalesce(array_agg(DISTINCT t.order_id), '{}') INTO v_deferred
    FROM unnest(_lock_sweep_batch.order_ids) AS t(order_id)
    WHERE NOT t.order_id = ANY (v_locked)
       OR (t.order_id = ANY (v_live)
           AND (EXISTS (SELECT 1 FROM ordertimeout.order_items AS i
                         WHERE i.order_id = t.order_id AND NOT i.sku = ANY (v_got_skus))
                    OR EXISTS (SELECT 1 FROM ordertimeout.points_holds AS h
                                WHERE h.order_id = t.order_id
                                  AND h.released_at IS NULL
                                  AND h.used_at IS NULL
                                  AND NOT h.account_id = ANY (v_got_accounts))));
    RETURN v_deferred;
END
$$;

CREATE FUNCTION ordertimeout._new_job_id()
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN nextval('public.river_job_id_seq');
END
$$;

CREATE FUNCTION ordertimeout._schedule_timer(job_id bigint, order_id text, version integer, at timestamptz)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO public.river_job (id, kind, args, queue, state, scheduled_at)
    VALUES (_schedule_timer.job_id, 'ordertimeout_expire',
            jsonb_build_object('order_id', _schedule_timer.order_id, 'version', _schedule_timer.version),
            'ordertimeout_expire', 'available', _schedule_timer.at);
END
$$;

CREATE FUNCTION ordertimeout._insert_jobs(job_ids bigint[], kind text, args jsonb[], scheduled_at timestamptz)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    v_count integer;
BEGIN
    IF cardinality(args) IS NULL OR cardinality(args) = 0 THEN
        RETURN 0;
    END IF;
    INSERT INTO public.river_job (id, kind, args, queue, state, scheduled_at)
    SELECT coalesce(j.id, nextval('public.river_job_id_seq')), kind, j.args, 'ordertimeout', 'available', scheduled_at
    FROM unnest(coalesce(job_ids, array_fill(NULL::bigint, ARRAY[cardinality(args)])), args) AS j(id, args);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;

CREATE FUNCTION ordertimeout._delete_jobs(job_ids bigint[])
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM public.river_job AS r WHERE r.id = ANY (_delete_jobs.job_ids);
END
$$;

CREATE FUNCTION ordertimeout._claim_due_timers(
    max           integer,
    at            timestamptz,
    OUT job_ids   bigint[],
    OUT order_ids text[],
    OUT versions  integer[],
    OUT malformed integer)
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_bad_ids bigint[];
BEGIN
    SELECT coalesce(array_agg(t.job_id) FILTER (WHERE t.valid), '{}'),
           coalesce(array_agg(t.args ->> 'order_id') FILTER (WHERE t.valid), '{}'),
           coalesce(array_agg(CASE WHEN t.valid THEN (t.args ->> 'version')::integer END) FILTER (WHERE t.valid), '{}'),
           coalesce(array_agg(t.job_id) FILTER (WHERE NOT t.valid), '{}')
    INTO job_ids, order_ids, versions, v_bad_ids
    FROM (SELECT d.job_id, d.args, ordertimeout._is_timer_args(d.args) AS valid
            FROM ordertimeout._timers AS d
           WHERE d.due_at <= _claim_due_timers.at
           ORDER BY d.due_at, d.job_id
           LIMIT _claim_due_timers.max
             FOR UPDATE SKIP LOCKED) AS t;
    malformed := cardinality(v_bad_ids);
    IF malformed > 0 THEN
        PERFORM ordertimeout._discard_malformed_timers(v_bad_ids, _claim_due_timers.at);
    END IF;
END
$$;

CREATE FUNCTION ordertimeout._rescue_stuck_jobs(running_for interval, max integer, at timestamptz)
RETURNS TABLE (
    retried   integer,
    discarded integer,
    cancelled integer)
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
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
          AND r.attempted_at < _rescue_stuck_jobs.at - _rescue_stuck_jobs.running_for
        ORDER BY r.id
        LIMIT _rescue_stuck_jobs.max
        FOR UPDATE SKIP LOCKED
    ), rescued AS (
        UPDATE public.river_job AS r
        SET state = s.next_state,
            scheduled_at = CASE WHEN s.next_state = 'available' THEN _rescue_stuck_jobs.at ELSE r.scheduled_at END,
            finalized_at = CASE WHEN s.next_state = 'available' THEN NULL ELSE _rescue_stuck_jobs.at END,
            errors = array_append(r.errors, jsonb_build_object(
                'at', _rescue_stuck_jobs.at,
                'attempt', greatest(r.attempt, 0),
                'error', format('Stuck job rescued by ordertimeout.rescue_stuck_jobs: running since %s, over %s by the database clock',
                                r.attempted_at, _rescue_stuck_jobs.running_for),
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

CREATE OR REPLACE FUNCTION ordertimeout._cancel_orders(
    order_ids        text[],
    versions         integer[],
    causes           text[],
    reason           text,
    respect_precheck boolean)
RETURNS TABLE (cancelled_order_id text, cancelled_cause text)
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_precheck  text;
    v_webhooks  boolean;
    v_paused_at timestamptz;
    v_resumed   timestamptz;
    v_actor     text := ordertimeout._actor();
    v_ids       text[];
    v_causes    text[];
    v_at        timestamptz[];
    v_cancel_at timestamptz[];
    v_attempted boolean[];
    v_methods   text[];
    v_event_ids bigint[];
    v_rest_ids  text[];
    v_rest_vers integer[];
    v_checked   text[] := '{}';
BEGIN
    SELECT s.precheck, s.webhooks, s.paused_at, s.resumed_at
    INTO v_precheck, v_webhooks, v_paused_at, v_resumed
    FROM ordertimeout.settings AS s;

    WITH cancelled AS (
        UPDATE ordertimeout.orders AS o
        SET status = 'CANCELLED',
            cancelled_at = clock_timestamp(),
            cancel_cause = t.cause,
            cancel_reason = _cancel_orders.reason,
            deadline_version = o.deadline_version + 1,
            timer_job_id = NULL
        FROM unnest(_cancel_orders.order_ids, _cancel_orders.versions, _cancel_orders.causes)
             AS t(order_id, version, cause)
        WHERE o.order_id = t.order_id
          AND o.status = 'PENDING'
          AND (t.version IS NULL OR o.deadline_version = t.version)
          AND (NOT _cancel_orders.respect_precheck
               OR NOT ordertimeout._wants_check(o.precheck, v_precheck, o.payment_attempted))
        RETURNING o.order_id, t.cause, o.cancelled_at, o.cancel_at, o.payment_attempted, o.payment_method
    )
    SELECT array_agg(c.order_id), array_agg(c.cause), array_agg(c.cancelled_at),
           array_agg(c.cancel_at), array_agg(c.payment_attempted), array_agg(c.payment_method)
    INTO v_ids, v_causes, v_at, v_cancel_at, v_attempted, v_methods
    FROM cancelled AS c;

    -- With respect_precheck, the orders left are handed to a gateway check
    -- if their policy wants one, before any stock is locked (the lock order).
    -- Most batches have none left: then nothing is looked up.
    IF _cancel_orders.respect_precheck
       AND coalesce(cardinality(v_ids), 0) < cardinality(_cancel_orders.order_ids) THEN
        SELECT array_agg(t.order_id), array_agg(t.version)
        INTO v_rest_ids, v_rest_vers
        FROM unnest(_cancel_orders.order_ids, _cancel_orders.versions) AS t(order_id, version)
        WHERE NOT EXISTS (SELECT 1 FROM unnest(v_ids) AS c(order_id) WHERE c.order_id = t.order_id);
        v_checked := ordertimeout._queue_checks(v_rest_ids, v_rest_vers, v_precheck, clock_timestamp());
    END IF;

    IF v_ids IS NULL THEN
        RETURN QUERY SELECT c.order_id, 'check'::text FROM unnest(v_checked) AS c(order_id);
        RETURN;
    END IF;

    WITH logged AS (
        INSERT INTO ordertimeout.events (order_id, from_status, to_status, cause, actor, lateness, at, detail)
        SELECT e.order_id, 'PENDING', 'CANCELLED', e.cause, v_actor,
               CASE WHEN e.cause IN ('timeout', 'sweep') THEN e.at - e.cancel_at END,
               e.at,
               -- A timeout due while cancels were paused says so: its
               -- lateness includes the pause.
               nullif(CASE WHEN _cancel_orders.reason IS NOT NULL
                           THEN jsonb_build_object('reason', _cancel_orders.reason) ELSE '{}' END
                      || CASE WHEN e.cause IN ('timeout', 'sweep') AND e.cancel_at < v_resumed AND e.cancel_at >= v_paused_at
                              THEN jsonb_build_object('waited_for_pause', true, 'paused_at', v_paused_at,
                                                      'resumed_at', v_resumed)
                              ELSE '{}' END,
                      '{}')
        FROM unnest(v_ids, v_causes, v_at, v_cancel_at) AS e(order_id, cause, at, cancel_at)
        RETURNING event_id
    )
    SELECT array_agg(l.event_id) INTO v_event_ids FROM logged AS l;

    IF v_webhooks THEN
        PERFORM ordertimeout._enqueue_webhooks(v_event_ids);
    END IF;

    -- A buyer who started a payment must not be able to finish it now: close
    -- the payment at the gateway (unless its method has nothing to close: a
    -- bank transfer).
    PERFORM ordertimeout._insert_jobs(NULL, 'ordertimeout_gateway_close',
        (SELECT array_agg(jsonb_build_object('order_id', g.order_id))
           FROM unnest(v_ids, v_attempted, v_methods) AS g(order_id, attempted, method)
           LEFT JOIN ordertimeout.payment_methods AS m ON m.method = g.method
          WHERE g.attempted
            AND coalesce(m.gateway_close, true)),
        now());

    -- Give back stock, coupons and points last: the stock rows of the batch,
    -- which every create_order of the same SKUs needs, stay locked only from
    -- here to the commit.
    PERFORM ordertimeout._release(v_ids, v_causes, clock_timestamp());

    RETURN QUERY SELECT r.order_id, r.cause FROM unnest(v_ids, v_causes) AS r(order_id, cause)
                 UNION ALL
                 SELECT c.order_id, 'check'::text FROM unnest(v_checked) AS c(order_id);
END
$$;

CREATE OR REPLACE FUNCTION ordertimeout.rescue_stuck_jobs(running_for interval, max integer DEFAULT 1000)
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

    RETURN QUERY SELECT * FROM ordertimeout._rescue_stuck_jobs(rescue_stuck_jobs.running_for, rescue_stuck_jobs.max, v_now);
END
$$;

COMMENT ON FUNCTION ordertimeout.rescue_stuck_jobs(interval, integer) IS
    'for the sidecar: hands back up to max jobs of queue ordertimeout that have been running longer than running_for by the database clock (their sidecar died): available again at once, discarded on their last attempt, cancelled if a cancel was asked; returns retried, discarded, cancelled';

CREATE OR REPLACE FUNCTION ordertimeout.sweep_due(max integer DEFAULT 1000)
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
    v_causes     text[];
    v_timer_ids  text[];
    v_deferred   text[];
    v_timers     integer;
    v_checks     integer;
    v_cancelled  integer;
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

    -- 3. Unless the batch is full (a backlog), lock what its cancels need
    -- without waiting: orders whose row, stock or points another transaction
    -- holds are deferred to the next sweep, with their timer rows.
    v_timer_ids := v_ids;
    v_ids := v_ids || v_lost_ids;
    v_versions := v_versions || v_lost_vers;
    v_causes := array_fill('timeout'::text, ARRAY[v_timers]) || array_fill('sweep'::text, ARRAY[cardinality(v_lost_ids)]);
    v_deferred := ordertimeout._lock_sweep_batch(v_ids, v_versions, cardinality(v_ids) >= sweep_due.max);
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

    -- Deferred orders are not counted: their timer rows go back at the commit.
    RETURN QUERY SELECT cardinality(v_ids) + v_malformed, v_cancelled,
                        (SELECT count(*)::integer FROM unnest(v_causes) AS c WHERE c = 'sweep'),
                        v_checks + v_rescued, cardinality(v_ids) + v_malformed - v_cancelled - v_checks;
END
$$;

COMMENT ON FUNCTION ordertimeout.sweep_due(integer) IS
    'claims up to max due timeouts (FOR UPDATE SKIP LOCKED) and cancels them in one transaction; also catches PENDING orders past cancel_at whose timer row or gateway-check job was lost, and re-queues lost payment checks of PAYING orders (at most every 10 s); a batch that is not full waits for no lock: an order whose row, stock or points another transaction holds is left, with its timer row, to the next call; returns claimed, cancelled, caught_by_sweep (lost timers found), checks (gateway checks queued), moot (timer rows that could no longer act)';

CREATE OR REPLACE FUNCTION ordertimeout._confirm_payment(
    order_id   text,
    payment_id text,
    amount     numeric,
    currency   text,
    cause      text)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now        timestamptz := clock_timestamp();
    v_status     text;
    v_amount     numeric;
    v_currency   text;
    v_timer      bigint;
    v_pay_order  text;
    v_pay_status text;
    v_conflict   bigint;
    v_kind       text;
    v_mismatch   boolean;
    v_paid_cur   text;
    v_detail     jsonb;
BEGIN
    PERFORM ordertimeout._check_order_id(_confirm_payment.order_id);
    PERFORM ordertimeout._check_payment_id(_confirm_payment.payment_id);
    PERFORM ordertimeout._check_amount('amount', _confirm_payment.amount);
    IF _confirm_payment.currency IS NOT NULL AND _confirm_payment.currency !~ '^[A-Z]{3}$' THEN
        RAISE EXCEPTION 'currency must be a three-letter ISO 4217 code such as "EUR", got "%"',
            left(_confirm_payment.currency, 16)
            USING ERRCODE = 'OT128';
    END IF;

    -- The order row lock serializes every transition of this order, and
    -- close_cancelled (which takes the same lock) with the conflict below.
    SELECT o.status, o.amount, o.currency, o.timer_job_id INTO v_status, v_amount, v_currency, v_timer
    FROM ordertimeout._lock_order(_confirm_payment.order_id) AS o;

    SELECT p.order_id, p.status INTO v_pay_order, v_pay_status
    FROM ordertimeout.payments AS p
    WHERE p.payment_id = _confirm_payment.payment_id;
    IF FOUND AND v_pay_order <> _confirm_payment.order_id THEN
        RAISE EXCEPTION 'payment_id "%" belongs to another order', _confirm_payment.payment_id
            USING ERRCODE = 'OT124';
    END IF;
    -- The same confirmation again: the same answer, nothing written.
    IF v_pay_status = 'confirmed' THEN
        RETURN 'paid';
    ELSIF v_pay_status IN ('late', 'refunded') THEN
        RETURN 'conflict';
    END IF;

    v_paid_cur := coalesce(_confirm_payment.currency, v_currency);
    v_mismatch := (_confirm_payment.amount IS NOT NULL AND v_amount IS NOT NULL AND _confirm_payment.amount <> v_amount)
               OR (v_paid_cur IS DISTINCT FROM v_currency AND v_currency IS NOT NULL);

    UPDATE ordertimeout.orders AS o
    SET status = 'PAID',
        paid_at = v_now,
        paying_until = NULL,
        deadline_version = o.deadline_version + 1,
        timer_job_id = NULL,
        check_job_id = NULL
    WHERE o.order_id = _confirm_payment.order_id
      AND o.status IN ('PENDING', 'PAYING')
      AND NOT v_mismatch;

    IF FOUND THEN
        INSERT INTO ordertimeout.payments AS p (payment_id, order_id, status, amount, currency, confirmed_at)
        VALUES (_confirm_payment.payment_id, _confirm_payment.order_id, 'confirmed', _confirm_payment.amount,
                v_paid_cur, v_now)
        ON CONFLICT ON CONSTRAINT payments_pkey DO UPDATE
        SET status = 'confirmed',
            amount = coalesce(excluded.amount, p.amount),
            currency = excluded.currency,
            confirmed_at = excluded.confirmed_at;
        PERFORM ordertimeout._drop_timer(v_timer);
        v_detail := jsonb_build_object('payment_id', _confirm_payment.payment_id, 'amount', _confirm_payment.amount,
                                       'currency', v_paid_cur);
        IF _confirm_payment.amount IS NULL AND v_amount IS NOT NULL THEN
            v_detail := v_detail || jsonb_build_object('unverified', true);
        END IF;
        PERFORM ordertimeout._log_event(_confirm_payment.order_id, v_status, 'PAID', _confirm_payment.cause, v_now, v_detail,
            webhook => true);
        -- Last, so that the stock rows stay locked only until the commit.
        PERFORM ordertimeout._consume(_confirm_payment.order_id, v_now);
        RETURN 'paid';
    END IF;

    -- Money the order cannot take (cancelled, already paid, or the wrong
    -- amount or currency): never dropped, never re-opening the order on its
    -- own. A conflict row, and a wake-up.
    v_kind := CASE
                  WHEN v_status IN ('PAID', 'REFUNDED') THEN 'double_payment'
                  WHEN v_mismatch THEN 'amount_mismatch'
                  ELSE 'late_payment'
              END;
    INSERT INTO ordertimeout.payments AS p (payment_id, order_id, status, amount, currency, confirmed_at)
    VALUES (_confirm_payment.payment_id, _confirm_payment.order_id, 'late', _confirm_payment.amount, v_paid_cur, v_now)
    ON CONFLICT ON CONSTRAINT payments_pkey DO UPDATE
    SET status = 'late',
        amount = coalesce(excluded.amount, p.amount),
        currency = excluded.currency,
        confirmed_at = excluded.confirmed_at;
    INSERT INTO ordertimeout.conflicts (order_id, payment_id, kind, amount, currency, detected_at, cause)
    VALUES (_confirm_payment.order_id, _confirm_payment.payment_id, v_kind, _confirm_payment.amount, v_paid_cur, v_now,
            _confirm_payment.cause)
    RETURNING conflict_id INTO v_conflict;

    -- A finished order with an open conflict is no longer finished: a CLOSED
    -- order goes back to CANCELLED (close_cancelled closes it again once the
    -- conflict is resolved). Touching the row of a CANCELLED order makes a
    -- concurrent close_cancelled under REPEATABLE READ fail rather than
    -- close it past this conflict.
    IF v_status IN ('CANCELLED', 'CLOSED') THEN
        UPDATE ordertimeout.orders AS o
        SET status = 'CANCELLED',
            closed_at = NULL,
            deadline_version = o.deadline_version + 1
        WHERE o.order_id = _confirm_payment.order_id;
    END IF;
    PERFORM ordertimeout._log_event(_confirm_payment.order_id, v_status,
        CASE WHEN v_status = 'CLOSED' THEN 'CANCELLED' ELSE v_status END, _confirm_payment.cause, v_now,
        jsonb_build_object('payment_id', _confirm_payment.payment_id, 'conflict_id', v_conflict, 'kind', v_kind,
                           'amount', _confirm_payment.amount, 'currency', v_paid_cur),
        webhook => true);
    -- Only a wake-up: the listener reads the open conflicts from the table.
    PERFORM pg_notify('ordertimeout_conflict', '');
    IF v_status = 'PAYING' THEN
        -- this attempt is over: without another one in flight, the timeout applies again
        PERFORM ordertimeout._back_to_pending(_confirm_payment.order_id, v_now,
            jsonb_build_object('payment_id', _confirm_payment.payment_id, 'conflict_id', v_conflict));
    END IF;
    RETURN 'conflict';
END
$$;

CREATE OR REPLACE FUNCTION ordertimeout._back_to_pending(order_id text, at timestamptz, detail jsonb)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_version integer;
    v_job_id  bigint;
    v_cancel  timestamptz;
BEGIN
    IF EXISTS (SELECT 1 FROM ordertimeout.payments AS p
                WHERE p.order_id = _back_to_pending.order_id AND p.status = 'started') THEN
        RETURN false;
    END IF;

    UPDATE ordertimeout.orders AS o
    SET status = 'PENDING',
        paying_until = NULL,
        deadline_version = o.deadline_version + 1,
        timer_job_id = ordertimeout._new_job_id(),
        check_job_id = NULL
    WHERE o.order_id = _back_to_pending.order_id
      AND o.status = 'PAYING'
    RETURNING o.deadline_version, o.timer_job_id, o.cancel_at INTO v_version, v_job_id, v_cancel;
    IF NOT FOUND THEN
        RETURN false;
    END IF;

    PERFORM ordertimeout._schedule_timer(v_job_id, _back_to_pending.order_id, v_version, v_cancel);
    PERFORM ordertimeout._log_event(_back_to_pending.order_id, 'PAYING', 'PENDING', 'payment',
        _back_to_pending.at, _back_to_pending.detail);
    PERFORM ordertimeout._wake_if_sooner(v_cancel);
    RETURN true;
END
$$;

CREATE OR REPLACE FUNCTION ordertimeout.create_order(
    order_id text,
    items    jsonb,
    timeout  interval DEFAULT NULL,
    options  jsonb DEFAULT '{}')
RETURNS ordertimeout.order_state
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_now      timestamptz := clock_timestamp();
    v_settings ordertimeout.settings;
    v_items    jsonb;
    v_options  jsonb;
    v_request  jsonb;
    v_existing jsonb;
    v_expire   timestamptz;
    v_cancel   timestamptz;
    v_job_id   bigint;
    v_skus     text[];
    v_qtys     integer[];
    v_found    integer;
    v_short    text;
    v_missing  text;
    v_coupon   text;
    v_account  text;
    v_points   bigint;
BEGIN
    PERFORM ordertimeout._check_order_id(create_order.order_id);
    v_items := ordertimeout._normalize_items(create_order.items);
    v_options := ordertimeout._normalize_options(create_order.options);
    PERFORM ordertimeout._check_interval('timeout', create_order.timeout, interval '30 days', 'OT113');

    SELECT * INTO v_settings FROM ordertimeout.settings;
    v_expire := v_now + coalesce(create_order.timeout, v_settings.default_timeout);
    v_cancel := v_expire + v_settings.grace;
    v_coupon := v_options ->> 'coupon';
    v_account := v_options ->> 'points_account';
    v_points := (v_options ->> 'points')::bigint;
    IF v_options ? 'method' THEN
        PERFORM ordertimeout._payment_method('options.method', v_options ->> 'method');
    END IF;
    v_request := jsonb_build_object(
        'items', v_items,
        'timeout', extract(epoch FROM create_order.timeout),
        'options', v_options);

    -- The order row and the id of its timer row. Same id again: the existing
    -- order if the content is the same, an error if not.
    INSERT INTO ordertimeout.orders AS o (
        order_id, status, created_at, expire_at, cancel_at, timer_job_id, precheck,
        amount, currency, coupon_id, points_account, points, request, payment_method)
    VALUES (
        create_order.order_id, 'PENDING', v_now, v_expire, v_cancel, ordertimeout._new_job_id(),
        v_options ->> 'precheck', (v_options ->> 'amount')::numeric, v_options ->> 'currency',
        v_coupon, v_account, v_points, v_request, v_options ->> 'method')
    ON CONFLICT ON CONSTRAINT orders_pkey DO NOTHING
    RETURNING o.timer_job_id INTO v_job_id;

    IF v_job_id IS NULL THEN
        SELECT o.request INTO v_existing FROM ordertimeout.orders AS o WHERE o.order_id = create_order.order_id;
        IF v_existing = v_request THEN
            RETURN ordertimeout._order_state(create_order.order_id, false);
        END IF;
        RAISE EXCEPTION 'order_id "%" already exists with other items, timeout or options', create_order.order_id
            USING ERRCODE = 'OT115';
    END IF;

    -- The items as arrays sorted by sku: the stock rows are locked in that order.
    SELECT array_agg(e.value ->> 'sku' ORDER BY e.value ->> 'sku'),
           array_agg((e.value ->> 'qty')::integer ORDER BY e.value ->> 'sku')
    INTO v_skus, v_qtys
    FROM jsonb_array_elements(v_items) AS e;

    INSERT INTO ordertimeout.order_items (order_id, sku, qty)
    SELECT create_order.order_id, r.sku, r.qty
    FROM unnest(v_skus, v_qtys) AS r(sku, qty);

    -- The timeout: a River job row in the same transaction, in a queue no River
    -- client serves; sweep_due claims it once cancel_at has come.
    PERFORM ordertimeout._schedule_timer(v_job_id, create_order.order_id, 1, v_cancel);

    IF v_settings.webhooks AND v_settings.remind_before IS NOT NULL
       AND v_expire - v_settings.remind_before > v_now THEN
        PERFORM ordertimeout._insert_job(
            'ordertimeout_webhook',
            jsonb_build_object('order_id', create_order.order_id, 'reminder', 'expiring_soon', 'version', 1),
            'ordertimeout',
            v_expire - v_settings.remind_before);
    END IF;

    PERFORM ordertimeout._log_event(create_order.order_id, NULL, 'PENDING', 'requested', v_now);
    PERFORM ordertimeout._wake_if_sooner(v_cancel);

    -- Reserve stock, all or nothing, last: a popular SKU's row stays locked
    -- only from here to the commit, not while the rest of the order is
    -- written. Rows are locked in sku order. A failure rolls back everything
    -- above.
    SELECT count(*), min(l.sku) FILTER (WHERE l.available < l.qty)
    INTO v_found, v_short
    FROM (SELECT s.sku, s.available, r.qty
            FROM ordertimeout.stock AS s
            JOIN unnest(v_skus, v_qtys) AS r(sku, qty) ON r.sku = s.sku
           ORDER BY s.sku
             FOR NO KEY UPDATE OF s) AS l;

    IF v_found < cardinality(v_skus) THEN
        SELECT r.sku INTO v_missing
        FROM unnest(v_skus) AS r(sku)
        WHERE NOT EXISTS (SELECT 1 FROM ordertimeout.stock AS s WHERE s.sku = r.sku)
        ORDER BY 1
        LIMIT 1;
        RAISE EXCEPTION 'items: sku "%" is unknown', v_missing
            USING ERRCODE = 'OT108';
    END IF;
    IF v_short IS NOT NULL THEN
        RAISE EXCEPTION 'items: not enough stock of sku "%" (% available, % requested)', v_short,
            (SELECT s.available FROM ordertimeout.stock AS s WHERE s.sku = v_short),
            (SELECT r.qty FROM unnest(v_skus, v_qtys) AS r(sku, qty) WHERE r.sku = v_short)
            USING ERRCODE = 'OT109';
    END IF;

    UPDATE ordertimeout.stock AS s
    SET available = s.available - r.qty,
        reserved = s.reserved + r.qty
    FROM unnest(v_skus, v_qtys) AS r(sku, qty)
    WHERE s.sku = r.sku;

    -- Then the coupon and the points: stock, coupon, points is the lock
    -- order of every function that takes or gives back more than one.
    IF v_coupon IS NOT NULL THEN
        INSERT INTO ordertimeout.coupon_holds (order_id, coupon_id, held_at)
        VALUES (create_order.order_id, v_coupon, v_now)
        ON CONFLICT (coupon_id) WHERE released_at IS NULL DO NOTHING;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'options.coupon "%" is already held by another order', v_coupon
                USING ERRCODE = 'OT110';
        END IF;
    END IF;

    IF v_account IS NOT NULL THEN
        UPDATE ordertimeout.points_accounts AS a
        SET held = a.held + v_points
        WHERE a.account_id = v_account
          AND a.balance - a.held >= v_points;
        IF NOT FOUND THEN
            IF NOT EXISTS (SELECT 1 FROM ordertimeout.points_accounts AS a WHERE a.account_id = v_account) THEN
                RAISE EXCEPTION 'options.points_account "%" is unknown', v_account
                    USING ERRCODE = 'OT111';
            END IF;
            RAISE EXCEPTION 'options.points % exceed the free points of account "%"', v_points, v_account
                USING ERRCODE = 'OT112';
        END IF;
        INSERT INTO ordertimeout.points_holds (order_id, account_id, points, held_at)
        VALUES (create_order.order_id, v_account, v_points, v_now);
    END IF;

    RETURN ordertimeout._order_state(create_order.order_id, true);
END
$$;

COMMENT ON FUNCTION ordertimeout.create_order(text, jsonb, interval, jsonb) IS
    'places a PENDING order: reserves every item''s stock all or nothing, holds the coupon and points of options, schedules its timeout in the same transaction; idempotent on order_id';

CREATE OR REPLACE FUNCTION ordertimeout.begin_payment(
    order_id      text,
    payment_id    text,
    paying_window interval DEFAULT NULL,
    method        text DEFAULT NULL)
RETURNS ordertimeout.order_state
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_now         timestamptz := clock_timestamp();
    v_window      interval;
    v_status      text;
    v_expire      timestamptz;
    v_timer       bigint;
    v_pay_order   text;
    v_pay_status  text;
    v_until       timestamptz;
    v_gw_expire   timestamptz;
    v_job_id      bigint;
    v_method      text;
    v_grace       interval;
BEGIN
    PERFORM ordertimeout._check_order_id(begin_payment.order_id);
    PERFORM ordertimeout._check_payment_id(begin_payment.payment_id);
    PERFORM ordertimeout._check_interval('paying_window', begin_payment.paying_window, interval '30 days', 'OT125');
    IF begin_payment.method IS NOT NULL THEN
        PERFORM ordertimeout._payment_method('method', begin_payment.method);
    END IF;

    SELECT o.status, o.expire_at, o.timer_job_id, coalesce(begin_payment.method, o.payment_method)
    INTO v_status, v_expire, v_timer, v_method
    FROM ordertimeout._lock_order(begin_payment.order_id) AS o;

    SELECT p.order_id, p.status INTO v_pay_order, v_pay_status
    FROM ordertimeout.payments AS p
    WHERE p.payment_id = begin_payment.payment_id;
    IF FOUND THEN
        IF v_pay_order <> begin_payment.order_id THEN
            RAISE EXCEPTION 'payment_id "%" belongs to another order', begin_payment.payment_id
                USING ERRCODE = 'OT124';
        END IF;
        IF v_status = 'PAYING' AND v_pay_status = 'started' THEN
            RETURN ordertimeout._order_state(begin_payment.order_id, false);   -- the same call again
        END IF;
        RAISE EXCEPTION 'payment_id "%" is already %; order "%" is %',
            begin_payment.payment_id, v_pay_status, begin_payment.order_id, v_status
            USING ERRCODE = 'OT123';
    END IF;

    IF v_status NOT IN ('PENDING', 'PAYING') THEN
        RAISE EXCEPTION 'order "%" is %: it takes no payment', begin_payment.order_id, v_status
            USING ERRCODE = 'OT123';
    END IF;
    IF v_expire <= v_now THEN
        RAISE EXCEPTION 'order "%" expired at %: start no payment for it', begin_payment.order_id, v_expire
            USING ERRCODE = 'OT122';
    END IF;

    SELECT coalesce(begin_payment.paying_window, m.paying_window, s.paying_window), s.grace
    INTO v_window, v_grace
    FROM ordertimeout.settings AS s
    LEFT JOIN ordertimeout.payment_methods AS m ON m.method = v_method;

    -- The payment check at paying_until: the sidecar asks the gateway.
    v_gw_expire := v_now + v_window;
    v_until := v_gw_expire + v_grace;
    v_job_id := ordertimeout._insert_job(
        'ordertimeout_payment_check',
        jsonb_build_object('order_id', begin_payment.order_id, 'payment_id', begin_payment.payment_id),
        'ordertimeout',
        v_until);

    UPDATE ordertimeout.orders AS o
    SET status = 'PAYING',
        paying_until = greatest(o.paying_until, v_until),
        gateway_expire_at = greatest(o.gateway_expire_at, v_gw_expire),
        cancel_at = greatest(o.cancel_at, v_until),
        payment_method = v_method,
        payment_attempted = true,
        deadline_version = o.deadline_version + 1,
        timer_job_id = v_job_id,
        check_job_id = NULL
    WHERE o.order_id = begin_payment.order_id
      AND o.status IN ('PENDING', 'PAYING')
      AND o.expire_at > v_now;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'order "%" changed while starting the payment', begin_payment.order_id
            USING ERRCODE = 'OT123';
    END IF;

    INSERT INTO ordertimeout.payments (payment_id, order_id, status, started_at)
    VALUES (begin_payment.payment_id, begin_payment.order_id, 'started', v_now);

    IF v_status = 'PENDING' THEN
        PERFORM ordertimeout._drop_timer(v_timer);
    END IF;
    PERFORM ordertimeout._log_event(begin_payment.order_id, v_status, 'PAYING', 'payment', v_now,
        jsonb_build_object('payment_id', begin_payment.payment_id, 'paying_until', v_until,
                           'gateway_expire_at', v_gw_expire, 'method', v_method));

    RETURN ordertimeout._order_state(begin_payment.order_id, false);
END
$$;

COMMENT ON FUNCTION ordertimeout.begin_payment(text, text, interval, text) IS
    'PENDING -> PAYING before the buyer is sent to the gateway, with the paying window of the call, else of the payment method, else of the settings; returns gateway_expire_at, the expiry to give the gateway; refused once the order has expired; the timeout no longer applies while PAYING and never comes before gateway_expire_at + grace';

CREATE OR REPLACE FUNCTION ordertimeout._drop_timer(job_id bigint)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF _drop_timer.job_id IS NULL THEN
        RETURN;
    END IF;
    DELETE FROM public.river_job AS r
    WHERE r.id = (SELECT l.id
                    FROM public.river_job AS l
                   WHERE l.id = _drop_timer.job_id
                     AND l.state = 'available'
                     AND (l.queue = 'ordertimeout_expire'
                          OR (l.queue = 'ordertimeout' AND l.kind = 'ordertimeout_payment_check'))
                     FOR UPDATE SKIP LOCKED);
END
$$;

CREATE OR REPLACE FUNCTION ordertimeout._wake_if_sooner(cancel_at timestamptz)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF cancel_at < coalesce((SELECT s.wake_at FROM ordertimeout.sweep_state AS s), 'infinity') THEN
        PERFORM pg_notify('ordertimeout_wake', '');
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION ordertimeout.next_due()
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

CREATE OR REPLACE FUNCTION ordertimeout.fail_payment(
    order_id   text,
    payment_id text)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_now        timestamptz := clock_timestamp();
    v_status     text;
    v_pay_order  text;
    v_pay_status text;
BEGIN
    PERFORM ordertimeout._check_order_id(fail_payment.order_id);
    PERFORM ordertimeout._check_payment_id(fail_payment.payment_id);

    v_status := (ordertimeout._lock_order(fail_payment.order_id)).status;

    SELECT p.order_id, p.status INTO v_pay_order, v_pay_status
    FROM ordertimeout.payments AS p
    WHERE p.payment_id = fail_payment.payment_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'payment_id "%" is unknown', fail_payment.payment_id
            USING ERRCODE = 'OT127';
    END IF;
    IF v_pay_order <> fail_payment.order_id THEN
        RAISE EXCEPTION 'payment_id "%" belongs to another order', fail_payment.payment_id
            USING ERRCODE = 'OT124';
    END IF;
    IF v_pay_status <> 'started' THEN
        RETURN 'ignored';
    END IF;

    UPDATE ordertimeout.payments AS p
    SET status = 'failed',
        failed_at = v_now
    WHERE p.payment_id = fail_payment.payment_id
      AND p.status = 'started';

    IF v_status <> 'PAYING' THEN
        RETURN 'ignored';
    END IF;
    IF ordertimeout._back_to_pending(fail_payment.order_id, v_now,
           jsonb_build_object('payment_id', fail_payment.payment_id, 'failed', true)) THEN
        RETURN 'pending';
    END IF;
    RETURN 'paying';   -- another attempt is still in flight
END
$$;

COMMENT ON FUNCTION ordertimeout.fail_payment(text, text) IS
    'marks a started payment failed; PAYING -> PENDING when no other attempt is in flight (returns pending, paying or ignored)';

CREATE OR REPLACE FUNCTION ordertimeout.plan_sleep(max_sleep interval)
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
    -- An upsert: sweep_state is unlogged, and empty after a crash.
    INSERT INTO ordertimeout.sweep_state AS s (singleton, wake_at)
    VALUES (true, v_wake)
    ON CONFLICT ON CONSTRAINT sweep_state_single_row DO UPDATE SET wake_at = excluded.wake_at;
    RETURN v_wake;
END
$$;

COMMENT ON FUNCTION ordertimeout.plan_sleep(interval) IS
    'for the sidecar: the moment to sweep next (the earliest due timer, at most max_sleep away), recorded so that an order due sooner sends a wake-up on channel ordertimeout_wake';

CREATE OR REPLACE FUNCTION ordertimeout.preview_due(max integer DEFAULT 100)
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
           CASE WHEN ordertimeout._wants_check(d.precheck, v_precheck, d.payment_attempted)
                THEN 'check' ELSE 'cancel' END
    FROM (
        (SELECT o.order_id, o.cancel_at, o.deadline_version, 'timer'::text AS found_by, o.precheck, o.payment_attempted
           FROM ordertimeout._timers AS t
           JOIN ordertimeout.orders AS o
             ON ordertimeout._is_timer_args(t.args)
            AND o.order_id = t.args ->> 'order_id'
            AND o.deadline_version = (CASE WHEN ordertimeout._is_timer_args(t.args)
                                           THEN (t.args ->> 'version')::integer END)
            AND o.status = 'PENDING'
            AND o.check_job_id IS NULL
          WHERE t.due_at <= v_now
          ORDER BY t.due_at
          LIMIT preview_due.max)
        UNION ALL
        (SELECT o.order_id, o.cancel_at, o.deadline_version, 'sweep'::text, o.precheck, o.payment_attempted
           FROM ordertimeout.orders AS o
          WHERE o.status = 'PENDING'
            AND o.check_job_id IS NULL
            AND o.cancel_at <= v_now
            AND NOT EXISTS (SELECT 1 FROM ordertimeout._unfinished_jobs AS j WHERE j.job_id = o.timer_job_id)
          ORDER BY o.cancel_at
          LIMIT preview_due.max)
    ) AS d
    ORDER BY d.cancel_at, d.order_id
    LIMIT preview_due.max;
END
$$;

COMMENT ON FUNCTION ordertimeout.preview_due(integer) IS
    'dry run of sweep_due: the orders it would cancel (action cancel) or hand to a gateway check (action check) now, found by their timer row or by the fallback sweep; changes nothing';

CREATE OR REPLACE FUNCTION ordertimeout.cancel_order(
    order_id text,
    reason   text DEFAULT 'requested')
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_timer     bigint;
    v_cancelled boolean;
BEGIN
    PERFORM ordertimeout._check_order_id(cancel_order.order_id);
    IF cancel_order.reason IS NULL THEN
        RAISE EXCEPTION 'reason must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF NOT ordertimeout._is_plain_text(cancel_order.reason, 200) THEN
        RAISE EXCEPTION 'reason must be 1 to 200 characters without control, format or line-separator characters (got % characters)',
            char_length(cancel_order.reason)
            USING ERRCODE = 'OT144';
    END IF;

    v_timer := (ordertimeout._lock_order(cancel_order.order_id)).timer_job_id;

    SELECT count(*) > 0 INTO v_cancelled
    FROM ordertimeout._cancel_orders(ARRAY[cancel_order.order_id], NULL, ARRAY['requested'],
                                     cancel_order.reason, false);
    IF v_cancelled THEN
        PERFORM ordertimeout._drop_timer(v_timer);
    END IF;
    RETURN v_cancelled;
END
$$;

COMMENT ON FUNCTION ordertimeout.cancel_order(text, text) IS
    'PENDING -> CANCELLED and release, in one transaction; returns whether this call cancelled the order';

CREATE OR REPLACE FUNCTION ordertimeout.extend_deadline(
    order_id text,
    by       interval)
RETURNS ordertimeout.order_state
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_now     timestamptz := clock_timestamp();
    v_status  text;
    v_timer   bigint;
    v_version integer;
    v_job_id  bigint;
    v_expire  timestamptz;
    v_cancel  timestamptz;
BEGIN
    PERFORM ordertimeout._check_order_id(extend_deadline.order_id);
    IF extend_deadline.by IS NULL THEN
        RAISE EXCEPTION 'by must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    PERFORM ordertimeout._check_interval('by', extend_deadline.by, interval '30 days', 'OT141');

    SELECT o.status, o.timer_job_id INTO v_status, v_timer
    FROM ordertimeout._lock_order(extend_deadline.order_id) AS o;

    -- A new version: the old timer row (and any gateway check in flight) can
    -- no longer act on this order.
    UPDATE ordertimeout.orders AS o
    SET expire_at = o.expire_at + extend_deadline.by,
        cancel_at = o.cancel_at + extend_deadline.by,
        deadline_version = o.deadline_version + 1,
        timer_job_id = ordertimeout._new_job_id(),
        check_job_id = NULL
    WHERE o.order_id = extend_deadline.order_id
      AND o.status = 'PENDING'
    RETURNING o.deadline_version, o.timer_job_id, o.expire_at, o.cancel_at
    INTO v_version, v_job_id, v_expire, v_cancel;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'order "%" is %: only a PENDING order can be given more time', extend_deadline.order_id, v_status
            USING ERRCODE = 'OT123';
    END IF;

    PERFORM ordertimeout._schedule_timer(v_job_id, extend_deadline.order_id, v_version, v_cancel);
    PERFORM ordertimeout._drop_timer(v_timer);
    PERFORM ordertimeout._log_event(extend_deadline.order_id, 'PENDING', 'PENDING', 'requested', v_now,
        jsonb_build_object('extended_by_seconds', extract(epoch FROM extend_deadline.by), 'expire_at', v_expire));
    PERFORM ordertimeout._wake_if_sooner(v_cancel);

    RETURN ordertimeout._order_state(extend_deadline.order_id, false);
END
$$;

COMMENT ON FUNCTION ordertimeout.extend_deadline(text, interval) IS
    'gives a PENDING order more time; bumps its deadline version so its old timer cannot act (fencing)';

REVOKE ALL ON FUNCTION ordertimeout._lock_order(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION ordertimeout._wants_check(text, text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION ordertimeout._find_lost_timers(integer, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION ordertimeout._rescue_lost_checks(integer, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION ordertimeout._queue_checks(text[], integer[], text, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION ordertimeout._new_job_id() FROM PUBLIC;
REVOKE ALL ON FUNCTION ordertimeout._schedule_timer(bigint, text, integer, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION ordertimeout._insert_jobs(bigint[], text, jsonb[], timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION ordertimeout._delete_jobs(bigint[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION ordertimeout._claim_due_timers(integer, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION ordertimeout._lock_sweep_batch(text[], integer[], boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION ordertimeout._rescue_stuck_jobs(interval, integer, timestamptz) FROM PUBLIC;
GRANT SELECT ON ordertimeout._timers, ordertimeout._malformed_timers, ordertimeout._unfinished_jobs
TO ordertimeout_admin;
