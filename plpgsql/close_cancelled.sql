CREATE FUNCTION ordertimeout.close_cancelled(
    older_than interval,
    max        integer DEFAULT 1000)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now    timestamptz := clock_timestamp();
    v_actor  text := ordertimeout._actor();
    v_ids    text[];
    v_closed integer;
BEGIN
    IF close_cancelled.older_than IS NULL THEN
        RAISE EXCEPTION 'older_than must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    -- Compared before the subtraction below, which would overflow a
    -- timestamp (22008) for a huge interval.
    IF close_cancelled.older_than < interval '0' OR close_cancelled.older_than > interval '100 years'
       OR ordertimeout._has_negative_part(close_cancelled.older_than) THEN
        RAISE EXCEPTION 'older_than must be between 0 and 100 years, with no negative part, got %', close_cancelled.older_than
            USING ERRCODE = 'OT141';
    END IF;
    PERFORM ordertimeout._check_max(close_cancelled.max);

    -- 1. Lock the candidates. The open-conflict test here only keeps orders
    -- with a conflict from filling the batch: it reads the snapshot taken
    -- before the locks, which may miss a late payment committed since.
    SELECT array_agg(c.order_id) INTO v_ids
    FROM (SELECT o.order_id
            FROM ordertimeout.orders AS o
           WHERE o.status = 'CANCELLED'
             AND o.cancelled_at < v_now - close_cancelled.older_than
             AND NOT EXISTS (SELECT 1 FROM ordertimeout.conflicts AS k
                              WHERE k.order_id = o.order_id AND k.resolution IS NULL)
           ORDER BY o.cancelled_at
           LIMIT close_cancelled.max
             FOR NO KEY UPDATE SKIP LOCKED) AS c;
    IF v_ids IS NULL THEN
        RETURN 0;
    END IF;

    -- 2. Decide under the locks, in a statement of its own: confirm_payment
    -- records a conflict only while holding the order row, so every conflict
    -- of these orders has committed before this statement's snapshot or
    -- waits for this transaction. (Under REPEATABLE READ the snapshot is the
    -- transaction's; confirm_payment touches the order row, so the lock
    -- above fails with 40001 instead.)
    WITH closed AS (
        UPDATE ordertimeout.orders AS o
        SET status = 'CLOSED',
            closed_at = v_now,
            deadline_version = o.deadline_version + 1
        WHERE o.order_id = ANY (v_ids)
          AND o.status = 'CANCELLED'
          AND NOT EXISTS (SELECT 1 FROM ordertimeout.conflicts AS k
                           WHERE k.order_id = o.order_id AND k.resolution IS NULL)
        RETURNING o.order_id
    )
    INSERT INTO ordertimeout.events (order_id, from_status, to_status, cause, actor, at)
    SELECT c.order_id, 'CANCELLED', 'CLOSED', 'admin', v_actor, v_now
    FROM closed AS c;
    GET DIAGNOSTICS v_closed = ROW_COUNT;
    RETURN v_closed;
END
$$;

COMMENT ON FUNCTION ordertimeout.close_cancelled(interval, integer) IS
    'CANCELLED -> CLOSED for orders cancelled longer ago than older_than and with no open conflict, at most max of them; returns how many';
