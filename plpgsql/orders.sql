-- Reading, locking and moving orders: the helpers every transition shares,
-- and the parts of sweep_due that find and hand over due orders.

-- Raises OT120 when the order does not exist.
CREATE FUNCTION ordertimeout._require_order(order_id text)
RETURNS void
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM ordertimeout._check_order_id(order_id);
    IF NOT EXISTS (SELECT 1 FROM ordertimeout.orders AS o WHERE o.order_id = _require_order.order_id) THEN
        RAISE EXCEPTION 'order_id "%" is unknown', order_id
            USING ERRCODE = 'OT120';
    END IF;
END
$$;

-- Locks the order's row (FOR NO KEY UPDATE: every transition of an order
-- takes this lock first, so they are serialized) and returns it; raises OT120
-- when the order does not exist.
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

-- Whether a due order is handed to a gateway check before it is cancelled:
-- its own precheck policy, else the settings' ("attempted": only if a payment
-- was started). A SQL function without SET, so the planner inlines it into
-- the set-based statements that call it per row (sweep_due, _cancel_orders,
-- preview_due); it calls no function and reads no table, so its callers'
-- pinned search_path is all it needs.
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

-- The API's view of an order row (ordertimeout.order_state), with what the
-- row does not hold: whether this call created it, its items and its open
-- conflicts. The one mapping from a row to the answer: _order_state reads the
-- row and passes the items of order_items, begin_payment passes the row its
-- UPDATE returned and the normalized items create_order stored. A SQL
-- function without SET, so the planner inlines it into the statement that
-- calls it (see _wants_check).
CREATE FUNCTION ordertimeout._state_of(o ordertimeout.orders, created boolean, items jsonb, open_conflicts integer)
RETURNS ordertimeout.order_state
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
AS $$
    SELECT ROW(
        o.order_id,
        o.status,
        created,
        o.created_at,
        o.expire_at,
        o.cancel_at,
        o.paying_until,
        o.paid_at,
        o.cancelled_at,
        o.closed_at,
        o.cancel_cause,
        o.deadline_version,
        o.amount,
        o.currency,
        items,
        o.coupon_id,
        o.points_account,
        o.points,
        o.payment_attempted,
        open_conflicts,
        o.payment_method,
        o.gateway_expire_at)::ordertimeout.order_state
$$;

-- An order as the API returns it, read from the tables.
CREATE FUNCTION ordertimeout._order_state(order_id text, created boolean)
RETURNS ordertimeout.order_state
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    RETURN (SELECT ordertimeout._state_of(
                       o,
                       _order_state.created,
                       (SELECT jsonb_agg(jsonb_build_object('sku', i.sku, 'qty', i.qty) ORDER BY i.sku)
                          FROM ordertimeout.order_items AS i
                         WHERE i.order_id = o.order_id),
                       (SELECT count(*)::integer
                          FROM ordertimeout.conflicts AS c
                         WHERE c.order_id = o.order_id
                           AND c.resolution IS NULL))
              FROM ordertimeout.orders AS o
             WHERE o.order_id = _order_state.order_id);
END
$$;

-- Cancels the given orders that are still PENDING (and, where a version is
-- given, still at that deadline version), releases what they reserved, logs
-- the events and queues a gateway close for those that had a payment attempt.
-- Set-based: one UPDATE decides which orders this call cancels. With
-- respect_precheck (the sweep), orders whose policy wants a gateway check
-- first are not cancelled but handed to a check job (_queue_checks). Returns
-- the orders it cancelled with their cause, and those handed to a check with
-- cause 'check'.
CREATE FUNCTION ordertimeout._cancel_orders(
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
          -- A timeout comes at the order's cancel_at, whatever its timer
          -- row says: River's retry (its UI's button) moves a timer row's
          -- scheduled_at to now. Such a row is moot; the sweep's fallback
          -- cancels the order at cancel_at, as for a lost timer row.
          AND (t.cause NOT IN ('timeout', 'sweep') OR o.cancel_at <= clock_timestamp())
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
    -- the order's payments at the gateway, unless no attempt's method has
    -- anything to close (bank transfers only). Each attempt counts with its
    -- own method (none: the defaults, which close): an order whose last
    -- attempt is a bank transfer still has an earlier card payment to
    -- close. A payment whose method is not recorded (method_recorded false)
    -- goes by the order's.
    PERFORM ordertimeout._insert_jobs(NULL, 'ordertimeout_gateway_close',
        (SELECT array_agg(jsonb_build_object('order_id', g.order_id))
           FROM unnest(v_ids, v_attempted, v_methods) AS g(order_id, attempted, method)
          WHERE g.attempted
            AND EXISTS (SELECT 1
                          FROM ordertimeout.payments AS p
                          LEFT JOIN ordertimeout.payment_methods AS m
                                 ON m.method = ordertimeout._method_of(p, g.method)
                         WHERE p.order_id = g.order_id
                           AND coalesce(m.gateway_close, true))),
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

-- The sweep's fallback: up to max PENDING orders past cancel_at whose timer
-- row is gone (deleted or discarded by hand, or a River bug), locked SKIP
-- LOCKED. Orders whose timer another session holds still have their row and
-- are not returned. claimed are the timer rows this sweep has just claimed:
-- their orders are due but not lost, and are passed over without looking
-- their timer row up (at steady rates they are all the due PENDING orders;
-- a sweep that claimed 100 or more plans this with the array as a constant,
-- which PostgreSQL 15 hashes). With scan_from, only orders due from then on
-- are looked at, as _claim_due_timers does (and its default is there for
-- the same reason).
CREATE FUNCTION ordertimeout._find_lost_timers(
    max           integer,
    at            timestamptz,
    claimed       bigint[],
    scan_from     timestamptz DEFAULT NULL,
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
             AND o.cancel_at >= coalesce(_find_lost_timers.scan_from, '-infinity')
             AND (o.timer_job_id IS NULL OR o.timer_job_id <> ALL (coalesce(_find_lost_timers.claimed, '{}')))
             AND NOT EXISTS (SELECT 1 FROM ordertimeout._unfinished_jobs AS j WHERE j.job_id = o.timer_job_id)
           ORDER BY o.cancel_at
           LIMIT _find_lost_timers.max
             FOR NO KEY UPDATE SKIP LOCKED) AS l;
END
$$;

-- The sweep's maintenance, at most every 10 seconds (rescue_state, claimed
-- SKIP LOCKED so only one session does it): up to max PENDING orders past
-- cancel_at whose gateway-check job River lost (discarded, cancelled,
-- deleted) are returned to be cancelled like lost timers; PAYING orders past
-- paying_until whose payment check was lost get a new one (payment_checks
-- counts them).
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
    -- A rescue recorded in the future (the clock was set back) is not a
    -- recent one: waiting for the clock to catch up would leave lost checks
    -- unrescued for as long as it was set back.
    PERFORM 1
    FROM ordertimeout.rescue_state AS s
    WHERE (s.rescued_at <= _rescue_lost_checks.at - interval '10 seconds'
           OR s.rescued_at > _rescue_lost_checks.at)
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

-- Hands the orders of a sweep batch whose policy wants the gateway asked
-- first (_wants_check), once their cancel_at has come, to a gateway check job, worked by the sidecar, at the
-- same deadline version; returns their ids. The batch's orders are looked up
-- one by one by primary key: the conditions are computed, not filtered on,
-- so that no partial index on PENDING orders matches, and OFFSET 0 keeps the
-- lookup a lookup. Filtered on, they made the planner scan every PENDING
-- order (500 buffers per sweep in the profile, 0.6 ms per order of a drain
-- on fresh statistics). Most batches want no check, and then nothing is
-- written.
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
           AND o.cancel_at <= _queue_checks.at
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
          AND o.cancel_at <= _queue_checks.at
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

-- A sweep at steady state never waits for a lock. Of a batch's orders it locks, SKIP
-- LOCKED and in the order every transition uses (order rows, then stock rows
-- by sku, then points accounts), the order rows, then the stock rows and
-- points accounts of those still PENDING at their version. An order whose
-- row, stock or points another transaction holds (a create, a payment being
-- recorded) is deferred: returned, left alone by this sweep, its timer row
-- kept for the next one, a few milliseconds later. A timer row whose order
-- row does not exist (deleted by hand) is not deferred: its cancel finds
-- nothing, so it is moot and deleted, instead of coming back on every sweep.
-- For the others this
-- transaction now holds every lock their cancel needs, so the cancel cannot
-- wait or deadlock. Before, a sweep
-- waited behind every create and payment holding one of its batch's SKUs,
-- and all of them then waited behind the sweep until its commit.
-- A full batch is a backlog being drained, often by several sessions whose
-- batches share SKUs: deferring there would hand most of a batch back. With
-- draining, nothing is locked here and the cancel waits for its locks (in the
-- same order), as a drain should.
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

    -- The order rows, read once as they are locked (the latest version of
    -- each row): those still PENDING at a version of the batch are the ones
    -- this sweep may cancel (the rest will be moot), and need their stock and
    -- points locked too.
    SELECT coalesce(array_agg(l.order_id), '{}'),
           coalesce(array_agg(l.order_id) FILTER (WHERE l.status = 'PENDING' AND t.order_id IS NOT NULL), '{}')
    INTO v_locked, v_live
    FROM (SELECT o.order_id, o.status, o.deadline_version
            FROM ordertimeout.orders AS o
           WHERE o.order_id = ANY (_lock_sweep_batch.order_ids)
           ORDER BY o.order_id
             FOR NO KEY UPDATE SKIP LOCKED) AS l
    LEFT JOIN (SELECT DISTINCT b.order_id, b.version
                 FROM unnest(_lock_sweep_batch.order_ids, _lock_sweep_batch.versions) AS b(order_id, version)) AS t
      ON t.order_id = l.order_id AND t.version = l.deadline_version;
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
    WHERE (NOT t.order_id = ANY (v_locked)
           AND EXISTS (SELECT 1 FROM ordertimeout.orders AS o WHERE o.order_id = t.order_id))
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

-- Timeout cancels and the pause (configure(paused => true)) are ordered by
-- two advisory locks. A pause takes (28532, 4) exclusively right after its
-- UPDATE of the settings and holds it to its commit: a pause that has begun
-- and is not committed yet (_pause_pending). It then takes (28532, 3)
-- exclusively, which a call that cancels timeouts (sweep_due, cancel_checked)
-- holds shared from its last look at the settings, after every lock it waits
-- for, to its commit (_refuse_if_paused). So a pause waits for the cancels
-- already past that look (they commit before it returns, within its bound of
-- 2 seconds, _wait_for_cancels_under_way), and a cancel that comes to it
-- after the pause began raises OT137: its transaction rolls back, the timers
-- stay. Why each case holds: a cancel that got (28532, 3) before the pause
-- asked for it commits first; one that tries it while the pause holds or
-- waits for it is refused; one that gets it after the pause gave it up (the
-- 2 seconds passed) finds (28532, 4) held until the pause commits; one that
-- comes after the commit reads the settings in a statement of its own, whose
-- READ COMMITTED snapshot shows the pause (_require_read_committed: an older
-- snapshot would not). The cancels only try the locks, never wait for them:
-- a pause waiting for a sweep left open in a transaction does not queue the
-- other sweeps behind it.
CREATE FUNCTION ordertimeout._pause_pending()
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- Tried at session level and let go at once, so that a cancel never
    -- holds it and the pause never waits long for it: in one expression,
    -- where no interrupt (a statement timeout, a cancel) can come between
    -- the two calls and leave the lock with the session.
    RETURN NOT coalesce(pg_try_advisory_lock_shared(28532, 4) AND pg_advisory_unlock_shared(28532, 4), false);
END
$$;

CREATE FUNCTION ordertimeout._refuse_if_paused()
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_free      boolean;
    v_paused_at timestamptz;
BEGIN
    -- (28532, 3) first, then (28532, 4), then the settings: the order the
    -- comment above relies on.
    v_free := pg_try_advisory_xact_lock_shared(28532, 3);
    IF v_free THEN
        v_free := NOT ordertimeout._pause_pending();
    END IF;
    IF NOT v_free THEN
        RAISE EXCEPTION 'timeout cancels are being paused: this call''s cancels are rolled back and its timers stay'
            USING ERRCODE = 'OT137';
    END IF;
    SELECT s.paused_at INTO v_paused_at FROM ordertimeout.settings AS s WHERE s.paused;
    IF FOUND THEN
        RAISE EXCEPTION 'timeout cancels were paused at % while this call ran: its cancels are rolled back and its timers stay',
            v_paused_at
            USING ERRCODE = 'OT137';
    END IF;
END
$$;

-- For configure(paused => true): holds (28532, 4) to the commit, then waits
-- for (28532, 3); both waits share one budget of 2 seconds (half the
-- statement_timeout when that is shorter than 4 seconds, so that the pause
-- itself is not lost to it). The backends that still hold a lock after it
-- are named in a WARNING with SQLSTATE OT155 (its own since migration
-- 000049, so that a client tells it from any other warning by its code): the
-- cancels of (28532, 3)'s holders, made before the pause, are kept if they
-- commit. The SET clause keeps the lock_timeout
-- of the waits inside this function.
CREATE FUNCTION ordertimeout._wait_for_cancels_under_way()
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
SET lock_timeout = '2s'
AS $$
DECLARE
    v_statement_ms bigint := (SELECT s.setting::bigint FROM pg_settings AS s WHERE s.name = 'statement_timeout');
    v_budget_ms bigint := 2000;
    v_until timestamptz;
    v_holders integer[];
BEGIN
    IF v_statement_ms > 0 AND v_statement_ms < 4000 THEN
        v_budget_ms := greatest(v_statement_ms / 2, 1);
    END IF;
    v_until := clock_timestamp() + v_budget_ms * interval '1 millisecond';
    PERFORM set_config('lock_timeout', v_budget_ms || 'ms', true);
    BEGIN
        PERFORM pg_advisory_xact_lock(28532, 4);
    EXCEPTION
        WHEN lock_not_available THEN
            -- Only a session that kept it (see _pause_pending) holds it long.
            v_holders := ordertimeout._advisory_holders(4);
            IF cardinality(v_holders) > 0 THEN
                RAISE WARNING 'paused, but advisory lock (28532, 4) is held by backend pid %: timeout cancels can commit until this transaction does',
                    array_to_string(v_holders, ', ')
                    USING ERRCODE = 'OT155';
            END IF;
    END;
    PERFORM set_config('lock_timeout',
                       greatest(floor(extract(epoch FROM v_until - clock_timestamp()) * 1000), 1)::bigint || 'ms', true);
    BEGIN
        PERFORM pg_advisory_xact_lock(28532, 3);
    EXCEPTION
        WHEN lock_not_available THEN
            v_holders := ordertimeout._advisory_holders(3);
            -- None left: they have committed (or rolled back) meanwhile.
            IF cardinality(v_holders) > 0 THEN
                RAISE WARNING 'paused, but timeout cancels made before the pause are still not committed after % (backend pid %): they are kept if their transaction commits',
                    CASE WHEN v_budget_ms = 2000 THEN '2s' ELSE v_budget_ms || 'ms' END,
                    array_to_string(v_holders, ', ')
                    USING ERRCODE = 'OT155';
            END IF;
    END;
END
$$;

-- The other backends that hold advisory lock (28532, key) in this database.
CREATE FUNCTION ordertimeout._advisory_holders(key integer)
RETURNS integer[]
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(array_agg(DISTINCT l.pid ORDER BY l.pid), '{}')
    FROM pg_locks AS l
    WHERE l.locktype = 'advisory'
      AND l.database = (SELECT d.oid FROM pg_database AS d WHERE d.datname = current_database())
      AND l.classid = 28532 AND l.objid = _advisory_holders.key AND l.objsubid = 2
      AND l.granted
      AND l.pid <> pg_backend_pid()
$$;

-- Raises OT154 under REPEATABLE READ or SERIALIZABLE: fn cancels timeouts,
-- and only a fresh snapshot sees a pause that began while it ran
-- (_refuse_if_paused). READ UNCOMMITTED is READ COMMITTED in PostgreSQL.
CREATE FUNCTION ordertimeout._require_read_committed(fn text)
RETURNS void
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF current_setting('transaction_isolation') NOT IN ('read committed', 'read uncommitted') THEN
        RAISE EXCEPTION '% must run in a READ COMMITTED transaction, not %: under an older snapshot it would not see a pause of timeout cancels',
            fn, upper(current_setting('transaction_isolation'))
            USING ERRCODE = 'OT154';
    END IF;
END
$$;
