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
-- caller's rights: the caller needs EXECUTE on sweep_due and plan_next_sweep
-- (ordertimeout_sidecar or ordertimeout_admin; a run without them stops
-- before its first sweep, 42501), and a caller who shadows
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
    v_swept   timestamptz;
    v_wake    timestamptz;
    v_held    boolean;
    v_held_since timestamptz;
    v_retry   interval;
    v_claimed integer;
    v_deferred integer;
    v_deferring integer := 0;
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

    -- Rights it runs with (its caller's): said before anything is swept,
    -- not at the first plan after a sweep that would then roll back.
    IF NOT pg_catalog.has_function_privilege('ordertimeout.sweep_due(integer)', 'EXECUTE')
       OR NOT pg_catalog.has_function_privilege('ordertimeout.plan_next_sweep(interval, timestamp with time zone, interval)', 'EXECUTE') THEN
        RAISE EXCEPTION 'run_sweeper runs with its caller''s rights, and role "%" may not execute ordertimeout.sweep_due(integer) and ordertimeout.plan_next_sweep(interval, timestamptz, interval)', current_user
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Schedule it as a role in ordertimeout_sidecar or ordertimeout_admin.';
    END IF;

    v_now := pg_catalog.clock_timestamp();
    v_until := CASE
                   WHEN run_sweeper.duration IS NULL
                       THEN pg_catalog.date_trunc('minute', v_now) + interval '1 minute 5 seconds'
                   ELSE v_now + run_sweeper.duration
               END;

    -- search_path, the lock and the isolation level belong to the
    -- transaction: each COMMIT below is followed at once by READ COMMITTED
    -- (sweep_due refuses an older snapshot, OT154, whatever the database's
    -- default_transaction_isolation) and by pinning search_path again.
    COMMIT;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    LOOP
        IF pg_catalog.pg_try_advisory_xact_lock(28532, 1) THEN
            -- Sleep holding only the lock (no row, no transaction id): the
            -- sweep's row locks last from the sweep to the COMMIT below.
            IF v_wait > interval '0' THEN
                PERFORM pg_catalog.pg_sleep(extract(epoch FROM v_wait)::double precision);
            END IF;
            EXIT WHEN pg_catalog.clock_timestamp() >= v_until;

            v_swept := pg_catalog.clock_timestamp();
            BEGIN
                SELECT s.claimed, s.deferred INTO v_claimed, v_deferred
                FROM ordertimeout.sweep_due(run_sweeper.max) AS s;
            EXCEPTION
                -- OT137: a pause began while the sweep ran; it kept nothing.
                -- lock_not_available: a lock_timeout (the role's, the
                -- database's) ended a wait for a row another transaction
                -- holds (a full batch waits for the stock rows it gives
                -- back): swept again, as the sidecar does, not the end of
                -- the run with every due order left for the next minute.
                WHEN deadlock_detected OR serialization_failure OR lock_not_available OR SQLSTATE 'OT137' THEN
                    -- Rolled back to the block's start: retried after a pause.
                    v_claimed := 0;
                    v_deferred := 0;
            END;

            -- When to sweep next, as the sidecar decides it. A full batch:
            -- more is due, sweep again at once. After a sweep that deferred
            -- orders (another transaction held a lock their cancel needs,
            -- usually a create or a payment about to commit): again after
            -- 1 ms, and after 2 ms if that one defers too. Otherwise
            -- plan_next_sweep, told the moment just before the sweep: due
            -- rows still there then were passed over (deferred, or their
            -- timer row held by another session), and are tried again after
            -- pauses that double from 1 ms while they stay held (the run of
            -- such sweeps so far, at most max_sleep), every other timer at
            -- its moment, at most max_sleep away: a procedure cannot be woken
            -- by NOTIFY, so an order created meanwhile that is due sooner
            -- waits at most max_sleep. The plan is recorded, as the sidecar's
            -- are (create_order then sends no wake-up for an order due after
            -- it). least() keeps held_due_by from being ahead of the clock
            -- (OT156) when the clock went back during the sweep; a step back
            -- after it is caught below.
            v_deferring := CASE WHEN v_deferred > 0 THEN v_deferring + 1 ELSE 0 END;
            IF v_deferred > 0 AND v_held_since IS NULL THEN
                v_held_since := v_swept;
            END IF;
            IF v_claimed >= run_sweeper.max THEN
                v_wake := pg_catalog.clock_timestamp();
            ELSIF v_deferring BETWEEN 1 AND 2 THEN
                v_wake := pg_catalog.clock_timestamp()
                          + interval '1 millisecond' * pg_catalog.power(2, v_deferring - 1);
            ELSE
                v_retry := CASE
                               WHEN v_held_since IS NULL THEN interval '1 millisecond'
                               ELSE LEAST(GREATEST(v_swept - v_held_since, interval '1 millisecond'), run_sweeper.max_sleep)
                           END;
                BEGIN
                    SELECT p.wake_at, p.held INTO v_wake, v_held
                    FROM ordertimeout.plan_next_sweep(run_sweeper.max_sleep,
                                                      LEAST(v_swept, pg_catalog.clock_timestamp()), v_retry) AS p;
                EXCEPTION
                    -- The clock stepped back between the least() and the
                    -- plan's own reading of it (OT156): plan as if nothing
                    -- had been passed over, as the sidecar does, rather than
                    -- end the run and roll back the sweep with it.
                    WHEN SQLSTATE 'OT156' THEN
                        SELECT p.wake_at, p.held INTO v_wake, v_held
                        FROM ordertimeout.plan_next_sweep(run_sweeper.max_sleep) AS p;
                END;
                IF NOT v_held THEN
                    v_held_since := NULL;
                ELSIF v_held_since IS NULL THEN
                    v_held_since := v_swept;
                END IF;
            END IF;
            COMMIT;
            SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
            PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);

            v_now := pg_catalog.clock_timestamp();
            v_wait := LEAST(GREATEST(v_wake - v_now, interval '0'), GREATEST(v_until - v_now, interval '0'));
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
            SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
            PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
            v_wait := interval '0';
        END IF;
    END LOOP;
END
$$;

COMMENT ON PROCEDURE ordertimeout.run_sweeper(integer, interval, interval) IS
    'for pg_cron without the sidecar: sweeps (sweep_due(max)) in its own transactions until duration has passed (NULL: until 5 s after the next minute starts), waking when the next timer is due and at least every max_sleep, as plan_next_sweep plans it (due orders another transaction holds are tried again after pauses that double from 1 ms, at most max_sleep); while another run sweeps, it stands by; CALL it outside a transaction block; the caller needs EXECUTE on sweep_due and plan_next_sweep (42501 otherwise)';
