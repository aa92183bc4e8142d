-- What happens to an order's reservations: released on cancel (through the
-- ledger), consumed on payment, reclaimed when a late payment reinstates it.
--
-- Lock order, the same in every function: timer rows, then order rows, then
-- stock rows sorted by sku, then points accounts sorted by account. Concurrent
-- sweeps and payments therefore never deadlock on stock. A release-ledger key
-- belongs to one order, so inserting it (which can wait for another
-- transaction inserting the same key) comes with that order's row: only a
-- transaction holding the order row ever writes its ledger rows.

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
    v_back_skus text[];
    v_back_qtys bigint[];
BEGIN
    SELECT array_agg(i.order_id), array_agg(i.sku), array_agg(i.qty::bigint), array_agg(t.cause)
    INTO v_orders, v_skus, v_qtys, v_causes
    FROM unnest(_release.order_ids, _release.causes) AS t(order_id, cause)
    JOIN ordertimeout.order_items AS i ON i.order_id = t.order_id;

    IF v_orders IS NOT NULL THEN
        -- The ledger first, the stock rows after: what the ledger admits is
        -- decided by its primary key alone (a second release of the same
        -- item waits on the first one's order row before it gets here), and
        -- the stock rows, which every other cancel and every create_order of
        -- the same SKUs needs, stay locked only for their own UPDATE and the
        -- commit. Two sessions draining a backlog touch the same SKUs in
        -- every batch: holding the stock through the ledger insert made the
        -- second wait for all of the first one's ledger rows.
        WITH released AS (
            INSERT INTO ordertimeout.releases (order_id, kind, resource_id, qty, cause, released_at)
            SELECT r.order_id, 'stock', r.sku, r.qty, r.cause, _release.at
            FROM unnest(v_orders, v_skus, v_qtys, v_causes) AS r(order_id, sku, qty, cause)
            ON CONFLICT ON CONSTRAINT releases_once_per_resource DO NOTHING
            RETURNING resource_id, qty
        )
        SELECT array_agg(r.resource_id ORDER BY r.resource_id), array_agg(r.qty ORDER BY r.resource_id)
        INTO v_back_skus, v_back_qtys
        FROM (SELECT d.resource_id, sum(d.qty)::bigint AS qty FROM released AS d GROUP BY d.resource_id) AS r;

        IF v_back_skus IS NOT NULL THEN
            PERFORM 1
            FROM ordertimeout.stock AS s
            WHERE s.sku = ANY (v_back_skus)
            ORDER BY s.sku
            FOR NO KEY UPDATE;

            UPDATE ordertimeout.stock AS s
            SET available = s.available + r.qty,
                reserved = s.reserved - r.qty
            FROM unnest(v_back_skus, v_back_qtys) AS r(sku, qty)
            WHERE s.sku = r.sku;
        END IF;
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
-- is used, held points are spent. coupon and points say whether the order
-- holds them: a live hold (neither used nor released) exists only for an
-- order whose coupon_id or points_account is set, since create_order writes
-- both in one transaction and nothing changes those columns. (A used coupon
-- hold outlives its order in purge_orders. create_order refuses that id since
-- migration 000026 (OT116); an order created under it before finds the hold
-- used, so no statement below matches it.) An order without them runs no
-- statement on their tables. A caller that does not say runs both, as every
-- call did before migration 000023: so does a confirm_payment of the version
-- before, still running while that migration commits, instead of failing on
-- a function that is gone.
CREATE FUNCTION ordertimeout._consume(
    order_id text,
    at       timestamptz,
    coupon   boolean DEFAULT true,
    points   boolean DEFAULT true)
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

    IF _consume.coupon THEN
        UPDATE ordertimeout.coupon_holds AS h
        SET used_at = _consume.at
        WHERE h.order_id = _consume.order_id
          AND h.released_at IS NULL
          AND h.used_at IS NULL;
    END IF;

    IF _consume.points THEN
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
    END IF;
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
    -- also against a concurrent create_order that has not committed yet. Only
    -- a hold the cancel released is taken back: a hold that is not released
    -- was never given back, and its used_at is not ours to rewrite.
    SELECT h.coupon_id INTO v_coupon
    FROM ordertimeout.coupon_holds AS h
    WHERE h.order_id = _reclaim.order_id
      AND h.released_at IS NOT NULL;
    IF v_coupon IS NOT NULL THEN
        BEGIN
            UPDATE ordertimeout.coupon_holds AS h
            SET released_at = NULL,
                used_at = _reclaim.at
            WHERE h.order_id = _reclaim.order_id
              AND h.released_at IS NOT NULL;
        EXCEPTION
            WHEN unique_violation THEN
                RAISE EXCEPTION 'order "%" cannot be reinstated: coupon "%" is held by another order', order_id, v_coupon
                    USING ERRCODE = 'OT132';
        END;
    END IF;

    SELECT h.account_id, h.points INTO v_account, v_points
    FROM ordertimeout.points_holds AS h
    WHERE h.order_id = _reclaim.order_id
      AND h.released_at IS NOT NULL;
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
        WHERE h.order_id = _reclaim.order_id
          AND h.released_at IS NOT NULL;
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

-- The trigger function of order_items_count_purged_sales (sql/triggers.sql):
-- what the PAID and REFUNDED orders whose items a statement deleted had
-- bought, added to purged_sales per SKU, in sku order (the lock order of
-- concurrent purges). stock.sold keeps counting those units once the items
-- are gone; purged_sales keeps "sold = what the paid orders bought"
-- checkable. purge_orders deletes the items before their orders, so their
-- status is still there to read. A trigger, not a statement of purge_orders,
-- so that a purge of any version counts, also one that began before the
-- migration that added it (000031) and deleted after it.
CREATE FUNCTION ordertimeout._count_purged_sales()
RETURNS trigger
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO ordertimeout.purged_sales AS ps (sku, qty)
    SELECT g.sku, sum(g.qty)
    FROM gone AS g
    JOIN ordertimeout.orders AS o ON o.order_id = g.order_id
    WHERE o.status IN ('PAID', 'REFUNDED')
    GROUP BY g.sku
    ORDER BY g.sku
    ON CONFLICT ON CONSTRAINT purged_sales_pkey DO UPDATE
    SET qty = ps.qty + excluded.qty;
    RETURN NULL;
END
$$;
