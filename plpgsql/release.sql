-- What happens to an order's reservations: released on cancel (through the
-- ledger), consumed on payment, reclaimed when a late payment reinstates it.
--
-- Lock order, the same in every function: timer rows, then order rows, then
-- stock rows sorted by sku, then points accounts sorted by account. Concurrent
-- sweeps and payments therefore never deadlock on stock.

-- Releases stock, coupons and points of the given orders, each at most once:
-- the ledger's primary key admits one release per (order, kind, resource) and
-- only what the ledger admitted goes back.
CREATE FUNCTION ordertimeout._release(order_ids text[], causes text[], at timestamptz)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_orders text[];
    v_skus   text[];
    v_qtys   bigint[];
    v_causes text[];
BEGIN
    SELECT array_agg(i.order_id), array_agg(i.sku), array_agg(i.qty::bigint), array_agg(t.cause)
    INTO v_orders, v_skus, v_qtys, v_causes
    FROM unnest(_release.order_ids, _release.causes) AS t(order_id, cause)
    JOIN ordertimeout.order_items AS i ON i.order_id = t.order_id;

    IF v_orders IS NOT NULL THEN
        PERFORM 1
        FROM ordertimeout.stock AS s
        WHERE s.sku = ANY (v_skus)
        ORDER BY s.sku
        FOR NO KEY UPDATE;

        WITH released AS (
            INSERT INTO ordertimeout.releases (order_id, kind, resource_id, qty, cause, released_at)
            SELECT r.order_id, 'stock', r.sku, r.qty, r.cause, _release.at
            FROM unnest(v_orders, v_skus, v_qtys, v_causes) AS r(order_id, sku, qty, cause)
            ON CONFLICT ON CONSTRAINT releases_once_per_resource DO NOTHING
            RETURNING resource_id, qty
        )
        UPDATE ordertimeout.stock AS s
        SET available = s.available + r.qty,
            reserved = s.reserved - r.qty
        FROM (SELECT resource_id, sum(qty) AS qty FROM released GROUP BY resource_id) AS r
        WHERE s.sku = r.resource_id;
    END IF;

    IF EXISTS (SELECT 1 FROM ordertimeout.coupon_holds AS h
                WHERE h.order_id = ANY (_release.order_ids) AND h.released_at IS NULL AND h.used_at IS NULL) THEN
        WITH released AS (
            INSERT INTO ordertimeout.releases (order_id, kind, resource_id, qty, cause, released_at)
            SELECT h.order_id, 'coupon', h.coupon_id, 1, t.cause, _release.at
            FROM unnest(_release.order_ids, _release.causes) AS t(order_id, cause)
            JOIN ordertimeout.coupon_holds AS h ON h.order_id = t.order_id
            WHERE h.released_at IS NULL
              AND h.used_at IS NULL
            ON CONFLICT ON CONSTRAINT releases_once_per_resource DO NOTHING
            RETURNING order_id
        )
        UPDATE ordertimeout.coupon_holds AS h
        SET released_at = _release.at
        FROM released AS r
        WHERE h.order_id = r.order_id;
    END IF;

    IF EXISTS (SELECT 1 FROM ordertimeout.points_holds AS h
                WHERE h.order_id = ANY (_release.order_ids) AND h.released_at IS NULL AND h.used_at IS NULL) THEN
        PERFORM 1
        FROM ordertimeout.points_accounts AS a
        WHERE a.account_id IN (SELECT h.account_id
                                 FROM ordertimeout.points_holds AS h
                                WHERE h.order_id = ANY (_release.order_ids))
        ORDER BY a.account_id
        FOR NO KEY UPDATE;

        WITH released AS (
            INSERT INTO ordertimeout.releases (order_id, kind, resource_id, qty, cause, released_at)
            SELECT h.order_id, 'points', h.account_id, h.points, t.cause, _release.at
            FROM unnest(_release.order_ids, _release.causes) AS t(order_id, cause)
            JOIN ordertimeout.points_holds AS h ON h.order_id = t.order_id
            WHERE h.released_at IS NULL
              AND h.used_at IS NULL
            ON CONFLICT ON CONSTRAINT releases_once_per_resource DO NOTHING
            RETURNING order_id, resource_id, qty
        ), holds AS (
            UPDATE ordertimeout.points_holds AS h
            SET released_at = _release.at
            FROM released AS r
            WHERE h.order_id = r.order_id
        )
        UPDATE ordertimeout.points_accounts AS a
        SET held = a.held - r.qty
        FROM (SELECT resource_id, sum(qty) AS qty FROM released GROUP BY resource_id) AS r
        WHERE a.account_id = r.resource_id;
    END IF;
END
$$;

-- A paid order's reservations become sales: reserved stock is sold, the coupon
-- is used, held points are spent.
CREATE FUNCTION ordertimeout._consume(order_id text, at timestamptz)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM 1
    FROM ordertimeout.stock AS s
    WHERE s.sku IN (SELECT i.sku FROM ordertimeout.order_items AS i WHERE i.order_id = _consume.order_id)
    ORDER BY s.sku
    FOR NO KEY UPDATE;

    UPDATE ordertimeout.stock AS s
    SET reserved = s.reserved - i.qty,
        sold = s.sold + i.qty
    FROM ordertimeout.order_items AS i
    WHERE i.order_id = _consume.order_id
      AND s.sku = i.sku;

    UPDATE ordertimeout.coupon_holds AS h
    SET used_at = _consume.at
    WHERE h.order_id = _consume.order_id
      AND h.released_at IS NULL
      AND h.used_at IS NULL;

    WITH spent AS (
        UPDATE ordertimeout.points_holds AS h
        SET used_at = _consume.at
        WHERE h.order_id = _consume.order_id
          AND h.released_at IS NULL
          AND h.used_at IS NULL
        RETURNING h.account_id, h.points
    )
    UPDATE ordertimeout.points_accounts AS a
    SET balance = a.balance - spent.points,
        held = a.held - spent.points
    FROM spent
    WHERE a.account_id = spent.account_id;
END
$$;

-- Takes back what a cancelled order released, straight to sold, for a late
-- payment that reinstates it. All or nothing: raises OT132 naming what is gone.
CREATE FUNCTION ordertimeout._reclaim(order_id text, at timestamptz)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_sku       text;
    v_available bigint;
    v_qty       bigint;
    v_coupon    text;
    v_account   text;
    v_points    bigint;
BEGIN
    SELECT s.sku, s.available, i.qty INTO v_sku, v_available, v_qty
    FROM (SELECT s.sku, s.available
            FROM ordertimeout.stock AS s
           WHERE s.sku IN (SELECT i.sku FROM ordertimeout.order_items AS i WHERE i.order_id = _reclaim.order_id)
           ORDER BY s.sku
           FOR NO KEY UPDATE) AS s
    JOIN ordertimeout.order_items AS i ON i.order_id = _reclaim.order_id AND i.sku = s.sku
    WHERE s.available < i.qty
    ORDER BY s.sku
    LIMIT 1;
    IF v_sku IS NOT NULL THEN
        RAISE EXCEPTION 'order "%" cannot be reinstated: sku "%" has % available, % needed',
            order_id, v_sku, v_available, v_qty
            USING ERRCODE = 'OT132';
    END IF;

    -- The coupon before the points, as in create_order. Making the hold live
    -- again is what decides: the unique index admits one live hold per coupon,
    -- also against a concurrent create_order that has not committed yet.
    SELECT h.coupon_id INTO v_coupon FROM ordertimeout.coupon_holds AS h WHERE h.order_id = _reclaim.order_id;
    IF v_coupon IS NOT NULL THEN
        BEGIN
            UPDATE ordertimeout.coupon_holds AS h
            SET released_at = NULL,
                used_at = _reclaim.at
            WHERE h.order_id = _reclaim.order_id;
        EXCEPTION
            WHEN unique_violation THEN
                RAISE EXCEPTION 'order "%" cannot be reinstated: coupon "%" is held by another order', order_id, v_coupon
                    USING ERRCODE = 'OT132';
        END;
    END IF;

    SELECT h.account_id, h.points INTO v_account, v_points
    FROM ordertimeout.points_holds AS h
    WHERE h.order_id = _reclaim.order_id;
    IF v_account IS NOT NULL THEN
        UPDATE ordertimeout.points_accounts AS a
        SET balance = a.balance - v_points
        WHERE a.account_id = v_account
          AND a.balance - a.held >= v_points;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'order "%" cannot be reinstated: account "%" has fewer than % free points',
                order_id, v_account, v_points
                USING ERRCODE = 'OT132';
        END IF;
        UPDATE ordertimeout.points_holds AS h
        SET released_at = NULL,
            used_at = _reclaim.at
        WHERE h.order_id = _reclaim.order_id;
    END IF;

    UPDATE ordertimeout.stock AS s
    SET available = s.available - i.qty,
        sold = s.sold + i.qty
    FROM ordertimeout.order_items AS i
    WHERE i.order_id = _reclaim.order_id
      AND s.sku = i.sku;

    UPDATE ordertimeout.releases AS r
    SET reclaimed_at = _reclaim.at
    WHERE r.order_id = _reclaim.order_id
      AND r.reclaimed_at IS NULL;
END
$$;

-- Cancels the given orders that are still PENDING (and, where a version is
-- given, still at that deadline version), releases what they reserved, logs
-- the events and queues a gateway close for those that had a payment attempt.
-- Set-based: one UPDATE decides which orders this call cancels. With
-- respect_precheck, orders whose policy wants a gateway check first are left
-- alone. Returns the orders it cancelled.
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
               OR NOT CASE coalesce(o.precheck, v_precheck)
                          WHEN 'always' THEN true
                          WHEN 'never' THEN false
                          ELSE o.payment_attempted
                      END)
        RETURNING o.order_id, t.cause, o.cancelled_at, o.cancel_at, o.payment_attempted, o.payment_method
    )
    SELECT array_agg(c.order_id), array_agg(c.cause), array_agg(c.cancelled_at),
           array_agg(c.cancel_at), array_agg(c.payment_attempted), array_agg(c.payment_method)
    INTO v_ids, v_causes, v_at, v_cancel_at, v_attempted, v_methods
    FROM cancelled AS c;

    IF v_ids IS NULL THEN
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
    INSERT INTO public.river_job (kind, args, queue, state, scheduled_at)
    SELECT 'ordertimeout_gateway_close', jsonb_build_object('order_id', g.order_id), 'ordertimeout', 'available', now()
    FROM unnest(v_ids, v_attempted, v_methods) AS g(order_id, attempted, method)
    LEFT JOIN ordertimeout.payment_methods AS m ON m.method = g.method
    WHERE g.attempted
      AND coalesce(m.gateway_close, true);

    -- Give back stock, coupons and points last: the stock rows of the batch,
    -- which every create_order of the same SKUs needs, stay locked only from
    -- here to the commit.
    PERFORM ordertimeout._release(v_ids, v_causes, clock_timestamp());

    RETURN QUERY SELECT r.order_id, r.cause FROM unnest(v_ids, v_causes) AS r(order_id, cause);
END
$$;
