-- Bounded storage and the sweeper for pg_cron 1.4 without the sidecar:
-- ordertimeout.purge_orders, its indexes, and the procedure
-- ordertimeout.run_sweeper. The readable current state is sql/retention.sql,
-- plpgsql/purge.sql, plpgsql/cron.sql and sql/grants.sql.
--
-- The two indexes are built here without CONCURRENTLY, which blocks writes to
-- ordertimeout.orders while they build. On a large table build them first:
--   CREATE INDEX CONCURRENTLY orders_closed_at ON ordertimeout.orders (closed_at) WHERE status = 'CLOSED';
--   CREATE INDEX CONCURRENTLY orders_paid_at ON ordertimeout.orders (paid_at) WHERE status IN ('PAID', 'REFUNDED');
-- and this migration then leaves them as they are.

CREATE INDEX IF NOT EXISTS orders_closed_at
    ON ordertimeout.orders (closed_at)
    WHERE status = 'CLOSED';

CREATE INDEX IF NOT EXISTS orders_paid_at
    ON ordertimeout.orders (paid_at)
    WHERE status IN ('PAID', 'REFUNDED');

-- Bounded storage: finished orders are deleted after a retention, with every
-- row about them. CLOSED orders (cancelled, then closed by close_cancelled)
-- by closed_at; PAID and REFUNDED orders by paid_at, only if the caller gives
-- a retention for them. Never a live order (PENDING, PAYING, or CANCELLED and
-- not yet closed), never an order with an open conflict: its money waits for
-- a decision.
--
-- Concurrency: candidates are locked FOR UPDATE SKIP LOCKED, so several
-- purges share the work and none waits for an order a payment holds. Every
-- transition of an order takes its row lock first (FOR NO KEY UPDATE), which
-- conflicts with ours: a confirm_payment that comes while we hold the order
-- waits and then finds no order (OT120); one that came first is seen by the
-- second look for open conflicts below, made after the lock with a fresh
-- snapshot, and its order is kept.
--
-- Kept on purpose: the hold of a coupon that an order spent. It is what keeps
-- a single-use coupon from being used again (coupon_holds_one_live_order), so
-- it outlives its order.

-- Raises OT100 for NULL, and code unless age is between 0 and 100 years
-- with no negative part (then now() - age is in the past and in range).
CREATE FUNCTION ordertimeout._check_retention(name text, age interval, code text)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF age IS NULL THEN
        RAISE EXCEPTION '% must not be null', name
            USING ERRCODE = 'OT100';
    END IF;
    IF age > interval '100 years'
       OR extract(year FROM age) < 0 OR extract(month FROM age) < 0 OR extract(day FROM age) < 0
       OR age - date_trunc('day', age) < interval '0' THEN
        RAISE EXCEPTION '% must be between 0 and 100 years, with no negative part, got %', name, age
            USING ERRCODE = code;
    END IF;
END
$$;

CREATE FUNCTION ordertimeout.purge_orders(
    closed_older_than interval,
    max               integer DEFAULT 1000,
    paid_older_than   interval DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now         timestamptz := clock_timestamp();
    v_closed_cut  timestamptz;
    v_paid_cut    timestamptz;
    v_locked      text[];
    v_ids         text[];
BEGIN
    -- Bounds before any arithmetic (now() - 300000 years fails with 22008),
    -- and no negative part: months, days and time are separate fields, and
    -- '1 mon -30 days' compares as 0 but reaches into the future in March.
    PERFORM ordertimeout._check_retention('closed_older_than', purge_orders.closed_older_than, 'OT152');
    PERFORM ordertimeout._check_max(purge_orders.max);
    IF purge_orders.paid_older_than IS NOT NULL THEN
        PERFORM ordertimeout._check_retention('paid_older_than', purge_orders.paid_older_than, 'OT153');
        v_paid_cut := v_now - purge_orders.paid_older_than;
    END IF;
    v_closed_cut := v_now - purge_orders.closed_older_than;

    -- 1. Lock the oldest finished orders without an open conflict: CLOSED
    -- ones first, then paid ones to fill the batch.
    SELECT coalesce(array_agg(c.order_id), '{}')
    INTO v_locked
    FROM (SELECT o.order_id
            FROM ordertimeout.orders AS o
           WHERE o.status = 'CLOSED'
             AND o.closed_at < v_closed_cut
             AND NOT EXISTS (SELECT 1 FROM ordertimeout.conflicts AS k
                              WHERE k.order_id = o.order_id AND k.resolution IS NULL)
           ORDER BY o.closed_at
           LIMIT purge_orders.max
             FOR UPDATE SKIP LOCKED) AS c;
    IF v_paid_cut IS NOT NULL AND cardinality(v_locked) < purge_orders.max THEN
        SELECT v_locked || coalesce(array_agg(c.order_id), '{}')
        INTO v_locked
        FROM (SELECT o.order_id
                FROM ordertimeout.orders AS o
               WHERE o.status IN ('PAID', 'REFUNDED')
                 AND o.paid_at < v_paid_cut
                 AND NOT EXISTS (SELECT 1 FROM ordertimeout.conflicts AS k
                                  WHERE k.order_id = o.order_id AND k.resolution IS NULL)
               ORDER BY o.paid_at
               LIMIT purge_orders.max - cardinality(v_locked)
                 FOR UPDATE SKIP LOCKED) AS c;
    END IF;

    -- 2. Look again, with this statement's fresh snapshot: a conflict
    -- committed after step 1's snapshot but before its lock is seen here.
    -- Nobody can add one now: that takes the order's lock, which we hold.
    SELECT coalesce(array_agg(o.order_id), '{}')
    INTO v_ids
    FROM ordertimeout.orders AS o
    WHERE o.order_id = ANY (v_locked)
      AND o.status IN ('CLOSED', 'PAID', 'REFUNDED')
      AND NOT EXISTS (SELECT 1 FROM ordertimeout.conflicts AS k
                       WHERE k.order_id = o.order_id AND k.resolution IS NULL);
    IF cardinality(v_ids) = 0 THEN
        RETURN 0;
    END IF;

    -- 3. Every row about them, then the orders.
    DELETE FROM ordertimeout.order_items AS i WHERE i.order_id = ANY (v_ids);
    DELETE FROM ordertimeout.conflicts AS k WHERE k.order_id = ANY (v_ids);
    DELETE FROM ordertimeout.payments AS p WHERE p.order_id = ANY (v_ids);
    DELETE FROM ordertimeout.releases AS r WHERE r.order_id = ANY (v_ids);
    DELETE FROM ordertimeout.events AS e WHERE e.order_id = ANY (v_ids);
    DELETE FROM ordertimeout.points_holds AS h WHERE h.order_id = ANY (v_ids);
    DELETE FROM ordertimeout.coupon_holds AS h
    WHERE h.order_id = ANY (v_ids)
      AND h.used_at IS NULL;
    DELETE FROM ordertimeout.orders AS o WHERE o.order_id = ANY (v_ids);
    RETURN cardinality(v_ids);
END
$$;

COMMENT ON FUNCTION ordertimeout.purge_orders(interval, integer, interval) IS
    'deletes up to max finished orders with their items, payments, resolved conflicts, releases, events and holds: CLOSED orders closed longer ago than closed_older_than, and PAID or REFUNDED orders paid longer ago than paid_older_than if given; never a live order or one with an open conflict; keeps the hold of a spent coupon; returns how many';

-- The sweeper without the sidecar: a procedure that sweeps in its own
-- transactions for the rest of a minute, for pg_cron 1.4 (Debian's
-- postgresql-15-cron), whose schedules have a granularity of one minute:
--
--   SELECT cron.schedule('ordertimeout-sweep', '* * * * *', 'CALL ordertimeout.run_sweeper()');
--
-- By default a run stops 5 seconds after the next minute starts (database
-- clock). pg_cron never runs two runs of one job at once: the run due when
-- that minute starts is queued, and starts as soon as this one ends. So the
-- runs follow each other without a gap even when pg_cron starts a run late
-- (pg_cron 1.4 was seen starting runs up to 1.6 s after the minute began).
--
-- A procedure that commits can be neither SECURITY DEFINER nor carry a SET
-- clause (PostgreSQL refuses COMMIT there), so this one runs with its
-- caller's rights: the caller needs EXECUTE on sweep_due and next_due
-- (ordertimeout_sidecar or ordertimeout_admin), and a caller who shadows
-- built-ins can only fool itself. Still, it pins search_path itself with
-- set_config first thing and after every COMMIT, and every function it
-- names is schema-qualified.
--
-- One sweeper per database: every transaction of a run that sweeps holds the
-- advisory lock (28532, 1) (28532 is 'ot'); a run that finds it taken (a
-- second schedule, a manual CALL) stands by, trying again every max_sleep,
-- and takes over when the other one ends. The lock is transaction scoped, so
-- a run that dies leaves nothing behind. The sidecar's sweeps do not take
-- it: they share the work with SKIP LOCKED, as any two sweeps do.
CREATE PROCEDURE ordertimeout.run_sweeper(
    max       integer  DEFAULT 1000,
    max_sleep interval DEFAULT interval '100 milliseconds',
    duration  interval DEFAULT NULL)
LANGUAGE plpgsql
AS $$
DECLARE
    v_now     timestamptz;
    v_until   timestamptz;
    v_next    timestamptz;
    v_claimed integer;
    v_wait    interval := interval '0';
    v_standing_by boolean := false;
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);

    -- The same checks and codes as sweep_due's max (its helper is private).
    IF run_sweeper.max IS NULL THEN
        RAISE EXCEPTION 'max must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF run_sweeper.max NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'max must be between 1 and 100000, got %', run_sweeper.max
            USING ERRCODE = 'OT140';
    END IF;
    IF run_sweeper.max_sleep IS NULL THEN
        RAISE EXCEPTION 'max_sleep must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    -- No negative part (months, days and time are separate fields, and a
    -- day is not always 24 hours): then the bounds also rule out months and
    -- days. search_path is pg_catalog from here on.
    IF run_sweeper.max_sleep < interval '1 millisecond' OR run_sweeper.max_sleep > interval '1 minute'
       OR extract(year FROM run_sweeper.max_sleep) < 0 OR extract(month FROM run_sweeper.max_sleep) < 0
       OR extract(day FROM run_sweeper.max_sleep) < 0
       OR run_sweeper.max_sleep - date_trunc('day', run_sweeper.max_sleep) < interval '0' THEN
        RAISE EXCEPTION 'max_sleep must be between 1 millisecond and 1 minute, got %', run_sweeper.max_sleep
            USING ERRCODE = 'OT150';
    END IF;
    IF run_sweeper.duration <= interval '0' OR run_sweeper.duration > interval '1 hour'
       OR extract(year FROM run_sweeper.duration) < 0 OR extract(month FROM run_sweeper.duration) < 0
       OR extract(day FROM run_sweeper.duration) < 0
       OR run_sweeper.duration - date_trunc('day', run_sweeper.duration) < interval '0' THEN
        RAISE EXCEPTION 'duration must be more than 0 and at most 1 hour (NULL: until 5 s into the next minute), got %',
            run_sweeper.duration
            USING ERRCODE = 'OT151';
    END IF;

    v_now := pg_catalog.clock_timestamp();
    v_until := CASE
                   WHEN run_sweeper.duration IS NULL
                       THEN pg_catalog.date_trunc('minute', v_now) + interval '1 minute 5 seconds'
                   ELSE v_now + run_sweeper.duration
               END;

    -- search_path and the lock belong to the transaction: each COMMIT below
    -- is followed at once by pinning search_path again.
    LOOP
        IF pg_catalog.pg_try_advisory_xact_lock(28532, 1) THEN
            -- Sleep holding only the lock (no row, no transaction id): the
            -- sweep's row locks last from the sweep to the COMMIT below.
            IF v_wait > interval '0' THEN
                PERFORM pg_catalog.pg_sleep(extract(epoch FROM v_wait)::double precision);
            END IF;
            EXIT WHEN pg_catalog.clock_timestamp() >= v_until;

            BEGIN
                SELECT s.claimed INTO v_claimed FROM ordertimeout.sweep_due(run_sweeper.max) AS s;
            EXCEPTION
                WHEN deadlock_detected OR serialization_failure THEN
                    -- Rolled back to the block's start: retried after a pause.
                    v_claimed := 0;
            END;
            v_next := ordertimeout.next_due();
            COMMIT;
            PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);

            -- A full batch: more is due, sweep again at once. Otherwise sleep
            -- until the earliest timer, at most max_sleep: an order created
            -- since may come due sooner, and nobody can wake a procedure. A
            -- timer already due after a sweep that claimed nothing is one this
            -- run cannot take now (another session holds it, or the sweep
            -- holds back): wait max_sleep rather than spin on it.
            v_now := pg_catalog.clock_timestamp();
            IF v_claimed >= run_sweeper.max OR (v_claimed > 0 AND v_next <= v_now) THEN
                v_wait := interval '0';
            ELSE
                v_wait := LEAST(run_sweeper.max_sleep, v_until - v_now);
                IF v_next > v_now THEN
                    v_wait := LEAST(v_wait, v_next - v_now);
                END IF;
                v_wait := GREATEST(v_wait, interval '1 millisecond');
            END IF;
        ELSE
            -- Another run sweeps: stand by, and take over within max_sleep
            -- of its end.
            IF NOT v_standing_by THEN
                RAISE NOTICE 'ordertimeout.run_sweeper: another run_sweeper is sweeping this database; this one stands by';
                v_standing_by := true;
            END IF;
            v_wait := GREATEST(LEAST(run_sweeper.max_sleep, v_until - pg_catalog.clock_timestamp()), interval '0');
            PERFORM pg_catalog.pg_sleep(extract(epoch FROM v_wait)::double precision);
            EXIT WHEN pg_catalog.clock_timestamp() >= v_until;
            COMMIT;
            PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
            v_wait := interval '0';
        END IF;
    END LOOP;
END
$$;

COMMENT ON PROCEDURE ordertimeout.run_sweeper(integer, interval, interval) IS
    'for pg_cron without the sidecar: sweeps (sweep_due(max)) in its own transactions until duration has passed (NULL: until 5 s after the next minute starts), waking when the next timer is due and at least every max_sleep; while another run sweeps, it stands by; CALL it outside a transaction block';

REVOKE ALL ON FUNCTION ordertimeout._check_retention(text, interval, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION ordertimeout.purge_orders(interval, integer, interval) FROM PUBLIC;
REVOKE ALL ON PROCEDURE ordertimeout.run_sweeper(integer, interval, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    ordertimeout.purge_orders(interval, integer, interval)
TO ordertimeout_sidecar, ordertimeout_admin;
GRANT EXECUTE ON PROCEDURE
    ordertimeout.run_sweeper(integer, interval, interval)
TO ordertimeout_sidecar, ordertimeout_admin;
