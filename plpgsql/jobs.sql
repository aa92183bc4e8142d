-- River's tables. Every statement of ordertimeout that reads or writes
-- public.river_job (or its id sequence) is in this file, so a River upgrade
-- touches one file. Timer rows (kind and queue ordertimeout_expire, which no
-- River client serves) are claimed by sweep_due; rows in queue ordertimeout
-- are worked by the sidecar's River client.
--
-- A timer row is "due" when it is available, in queue ordertimeout_expire,
-- at priority 1, and its scheduled_at has come: ordertimeout._timers is that
-- definition (without the moment), and sweep_due, preview_due, next_due and
-- sweep_stats all read it. Its columns follow River's fetch index (state,
-- queue, priority, scheduled_at, id), so the planner uses it through the view.
-- This file is included before sql/views.sql, whose sweep_stats reads it.

CREATE VIEW ordertimeout._timers AS
SELECT r.id AS job_id, r.args, r.scheduled_at AS due_at
FROM public.river_job AS r
WHERE r.state = 'available'
  AND r.queue = 'ordertimeout_expire'
  AND r.priority = 1;

COMMENT ON VIEW ordertimeout._timers IS
    'timer rows waiting for their moment (due once due_at <= now); the one definition sweep_due, preview_due, next_due and sweep_stats share';

-- Timer rows sweep_due set aside because their args were malformed.
CREATE VIEW ordertimeout._malformed_timers AS
SELECT r.id AS job_id, r.args, r.finalized_at
FROM public.river_job AS r
WHERE r.state = 'discarded'
  AND r.queue = 'ordertimeout_expire';

COMMENT ON VIEW ordertimeout._malformed_timers IS
    'timer rows set aside by sweep_due (malformed args), with the reason in River''s errors column';

-- Jobs River has not finished (any queue): a timer or check whose row is
-- missing here was lost (deleted, discarded, cancelled) and the order must be
-- caught another way.
CREATE VIEW ordertimeout._unfinished_jobs AS
SELECT r.id AS job_id
FROM public.river_job AS r
WHERE r.finalized_at IS NULL;

COMMENT ON VIEW ordertimeout._unfinished_jobs IS
    'ids of River jobs not finalized yet: the anti-join that finds orders whose timer or check was lost';

-- A new id from River's sequence: the order row records its timer's id in
-- the same statement that moves it, before the row is written.
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

-- Writes the timer row of an order's deadline version: due at "at", claimed
-- then by sweep_due, which checks the version against the order's.
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

-- Writes the expiring-soon reminder (a webhook) of an order's deadline
-- version, due remind_before its expire_at, when that moment is still to
-- come; none when remind_before is NULL. The webhook worker sends it only if
-- the order is still PENDING at that version, so every change that gives a
-- PENDING order a new version (create_order, extend_deadline, a failed
-- payment's return to PENDING) writes the reminder of the new one. It goes
-- to queue ordertimeout_webhook, as every webhook (_enqueue_webhooks).
CREATE FUNCTION ordertimeout._schedule_reminder(
    order_id      text,
    version       integer,
    expire_at     timestamptz,
    remind_before interval,
    at            timestamptz)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF _schedule_reminder.remind_before IS NOT NULL
       AND _schedule_reminder.expire_at - _schedule_reminder.remind_before > _schedule_reminder.at THEN
        PERFORM ordertimeout._insert_job(
            'ordertimeout_webhook',
            jsonb_build_object('order_id', _schedule_reminder.order_id, 'reminder', 'expiring_soon',
                               'version', _schedule_reminder.version),
            'ordertimeout_webhook',
            _schedule_reminder.expire_at - _schedule_reminder.remind_before);
    END IF;
END
$$;

-- Inserts a River job row and returns its id. Rows in queue
-- ordertimeout_expire are timers claimed by sweep_due; rows in queues
-- ordertimeout and ordertimeout_webhook are worked by the sidecar's River
-- client.
CREATE FUNCTION ordertimeout._insert_job(kind text, args jsonb, queue text, scheduled_at timestamptz)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    v_id bigint;
BEGIN
    INSERT INTO public.river_job (kind, args, queue, state, scheduled_at)
    VALUES (kind, args, queue, 'available', scheduled_at)
    RETURNING id INTO v_id;
    RETURN v_id;
END
$$;

-- Inserts jobs of one kind for the sidecar's River client (queue
-- ordertimeout), set-based: one per element of args, with the ids given (from
-- _new_job_id, when the order row records them) or River's next ids when
-- job_ids is NULL. Returns how many were inserted.
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

-- Deletes a timer row or payment check that can no longer act, unless it is
-- held right now (SKIP LOCKED: never wait for a sweep or a River fetch while
-- holding an order row; a sweep deletes its rows itself, and the version
-- check makes a left-over row harmless) or a worker already runs it.
-- The row is found by its primary key only: state is compared as text so
-- that River's fetch index (state, queue, priority, scheduled_at, id) cannot
-- serve the lookup. A generic plan made while river_job had no statistics
-- (a fresh database, the first minute) chose that index with state as its
-- only bound and walked every available row to find this one, twice per
-- paid order (begin_payment drops the timer, confirm_payment the check).
CREATE FUNCTION ordertimeout._drop_timer(job_id bigint)
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
                     AND l.state::text = 'available'
                     AND (l.queue = 'ordertimeout_expire'
                          OR (l.queue = 'ordertimeout' AND l.kind = 'ordertimeout_payment_check'))
                     FOR UPDATE SKIP LOCKED);
END
$$;

-- Deletes claimed rows: timer rows whose work sweep_due has done.
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

-- Wakes the sleeping sweepers when a deadline comes before the moment they
-- planned to wake up (ordertimeout.plan_next_sweep), or when no plan is recorded
-- (sweep_state is unlogged: empty after a crash). The payload is empty: the
-- deadline is in the table. Returns whether it sent one (a value, so that
-- create_order calls it as an expression rather than a statement).
CREATE FUNCTION ordertimeout._wake_if_sooner(cancel_at timestamptz)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF cancel_at < coalesce((SELECT s.wake_at FROM ordertimeout.sweep_state AS s), 'infinity') THEN
        PERFORM pg_notify('ordertimeout_wake', '');
        RETURN true;
    END IF;
    RETURN false;
END
$$;

-- Queues a webhook delivery per event (when webhooks are on), in a queue of
-- their own: receivers that hang or fail hold up only webhooks, never the
-- gateway checks, closes and refunds of queue ordertimeout (the sidecar
-- serves each queue with its own workers).
CREATE FUNCTION ordertimeout._enqueue_webhooks(event_ids bigint[])
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO public.river_job (kind, args, queue, state, scheduled_at)
    SELECT 'ordertimeout_webhook', jsonb_build_object('event_id', e.event_id, 'order_id', e.order_id),
           'ordertimeout_webhook', 'available', now()
    FROM ordertimeout.events AS e
    WHERE e.event_id = ANY (event_ids)
      AND (SELECT s.webhooks FROM ordertimeout.settings AS s);
END
$$;

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
                            ordertimeout._shown(r.args::text, 200)),
            'trace', ''))
    WHERE r.id = ANY (_discard_malformed_timers.job_ids);
END
$$;

-- Claims up to max due timer rows (FOR UPDATE SKIP LOCKED, in River's fetch
-- order: any number of sessions may claim at once, each row goes to one of
-- them) and returns their ids with the order and version each names. A row
-- whose args are not {"order_id": text, "version": integer} is claimed too
-- but set aside (one malformed row must not stop every sweep); malformed
-- counts them. With scan_from, only rows due from then on are looked at
-- (ordertimeout._scan_from says when a sweep may do that); NULL: every due
-- row. (Its default lets a sweep_due of migration 000045, running while
-- 000046 commits, call it with two arguments.)
CREATE FUNCTION ordertimeout._claim_due_timers(
    max           integer,
    at            timestamptz,
    scan_from     timestamptz DEFAULT NULL,
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
             AND d.due_at >= coalesce(_claim_due_timers.scan_from, '-infinity')
           ORDER BY d.due_at, d.job_id
           LIMIT _claim_due_timers.max
             FOR UPDATE SKIP LOCKED) AS t;
    malformed := cardinality(v_bad_ids);
    IF malformed > 0 THEN
        PERFORM ordertimeout._discard_malformed_timers(v_bad_ids, _claim_due_timers.at);
    END IF;
END
$$;

-- The sweep's window (_scan_from): a sweep that does not look at every due
-- row looks at those due in the last _scan_window(), and a sweep looks at
-- every due row at least every _full_look_every() while sweeps run. The
-- window is the longer, so that a row that comes due after a full look stays
-- in it until the next full look. Inlined.
CREATE FUNCTION ordertimeout._scan_window()
RETURNS interval
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
AS $$
    SELECT interval '2 seconds'
$$;

CREATE FUNCTION ordertimeout._full_look_every()
RETURNS interval
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
AS $$
    SELECT interval '1 second'
$$;

-- Where a sweep starts looking for due rows. Deleted timer rows leave their
-- entries in River's fetch index until a VACUUM of river_job, and those of
-- every order cancelled or paid since then lie before the first live due
-- row, where the claim's scan (and plan_next_sweep's, and the lost-timer
-- fallback's in orders_pending_cancel_at) starts: each sweep read all of
-- them. Autovacuum visits river_job after about a fifth of its rows have
-- died, so at a steady rate the dead entries grow to a fifth of the
-- deadline's worth of orders (tens of thousands of entries at 250 orders/s
-- with 30-minute deadlines), read again by every sweep, a hundred sweeps a
-- second. So a sweep looks at the rows due in the last 2 seconds only, and
-- at every due row (NULL) when the last sweep that did so (scan_state) is a
-- second old or more, or came back full (a backlog, of timer rows or of
-- lost timers), or when nothing is recorded (a fresh or crashed scan_state),
-- or when the record is in the future (the database's clock was set back:
-- the window must not last until it catches up). A sweep that finds no
-- timer row in those 2 seconds looks at every due row (sweep_due), so that
-- a call that claims nothing means nothing it could take is due: callers
-- that sweep until a call comes back empty (run_sweeper, a drain by hand)
-- rely on it. The price: with several sidecars, those woken for a deadline
-- that another took look at every row. A row due more than 2 seconds ago
-- that the last full look did not take (another transaction held it, or
-- _back_to_pending put its order back past its deadline) is thus found by
-- the next sweep whose window is empty, or by the next full look, within
-- about a second; a full look that had to leave such a row to another
-- transaction is not recorded, so the next sweep looks again.
-- The two lengths are _scan_window and _full_look_every.
CREATE FUNCTION ordertimeout._scan_from(at timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT _scan_from.at - ordertimeout._scan_window()
              FROM ordertimeout.scan_state AS s
             WHERE s.scanned_at > _scan_from.at - ordertimeout._full_look_every()
               AND s.scanned_at <= _scan_from.at
               AND NOT s.backlog);
END
$$;

-- Records a sweep's full look (or a full batch) for _scan_from, without
-- waiting: when another sweep holds scan_state (its own record, until its
-- commit), this one is not recorded, and the next sweep simply looks at
-- every row again. After a crash scan_state is empty: the row is inserted,
-- by one sweep only. The others would wait on its uncommitted row in the
-- insert (ON CONFLICT waits for the inserting transaction, SKIP LOCKED or
-- not): the inserter holds the advisory lock (28532, 2) to its commit, and a
-- sweep that cannot take it at once is not recorded.
CREATE FUNCTION ordertimeout._record_scan(at timestamptz, backlog boolean)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE ordertimeout.scan_state AS s
    SET scanned_at = _record_scan.at,
        backlog = _record_scan.backlog
    FROM (SELECT l.singleton FROM ordertimeout.scan_state AS l FOR NO KEY UPDATE SKIP LOCKED) AS l
    WHERE s.singleton = l.singleton;
    -- Only when the row is missing: an insert that meets the row another
    -- sweep has updated and not committed would wait for that sweep.
    IF NOT FOUND AND NOT EXISTS (SELECT 1 FROM ordertimeout.scan_state)
       AND pg_try_advisory_xact_lock(28532, 2) THEN
        INSERT INTO ordertimeout.scan_state AS s (singleton, scanned_at, backlog)
        VALUES (true, _record_scan.at, _record_scan.backlog)
        ON CONFLICT ON CONSTRAINT scan_state_single_row DO NOTHING;
    END IF;
END
$$;

-- River's rescuer decides that a job is stuck by the client's wall clock; the
-- sidecar rescues the jobs of its queues by the database's clock instead (see
-- rescue_stuck_jobs): cancelled if a cancel was asked, discarded on its last
-- attempt, otherwise available again at once; an error is recorded on it.
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
          AND r.queue IN ('ordertimeout', 'ordertimeout_webhook')
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
