-- Bounded storage: finished orders are deleted after a retention, with every
-- row about them. CLOSED orders (cancelled, then closed by close_cancelled)
-- by closed_at; PAID and REFUNDED orders by paid_at, only if the caller gives
-- a retention for them. Never a live order (PENDING, PAYING, or CANCELLED and
-- not yet closed), never an order with an open conflict: its money waits for
-- a decision.
--
-- Concurrency: candidates are locked FOR UPDATE SKIP LOCKED, so several
-- purges share the work and none waits for an order a payment holds; two
-- purges of paid orders of the same SKUs wait for each other's purged_sales
-- rows (taken in sku order) until the first commits. Every
-- transition of an order takes its row lock first (FOR NO KEY UPDATE), which
-- conflicts with ours: a confirm_payment that comes while we hold the order
-- waits and then finds no order (OT120); one that came first is seen by the
-- second look for open conflicts below, made after the lock with a fresh
-- snapshot, and its order is kept.
--
-- A paid order with a payment attempt still open (started, neither
-- confirmed nor failed) waits, besides paid_older_than, until its
-- gateway_expire_at plus the settings' grace, and its cancel_at (never before
-- gateway_expire_at plus the grace at its begin_payment), are as old: that
-- attempt may bring money until then, and the money must find the order (a
-- double_payment conflict), not OT120.
--
-- Kept on purpose: the hold of a coupon that an order spent. It is what keeps
-- a single-use coupon from being used again (coupon_holds_one_live_order), so
-- it outlives its order. And the ids of the orders' payments
-- (purged_payments): the order id is free again, and a late callback of the
-- old order's payment must not pay a new order under it; and, for an hour
-- (or while an order given the id within 10 minutes of the purge lives), the
-- order ids
-- (purged_orders): a payment of such an order that no callback brought is
-- not reconciled as a new order's. And the refund ids
-- of their conflicts (purged_refunds): a refund gives back one payment, and
-- must not be recorded again as another conflict's.

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
    v_grace       interval;
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
    SELECT s.grace INTO v_grace FROM ordertimeout.settings AS s;
    v_closed_cut := v_now - purge_orders.closed_older_than;

    -- 1. Lock the oldest finished orders without an open conflict: CLOSED
    -- ones first, then paid ones to fill the batch.
    SELECT coalesce(array_agg(c.order_id), '{}')
    INTO v_locked
    FROM (SELECT o.order_id
            FROM ordertimeout.orders AS o
           WHERE o.status = 'CLOSED'
             AND o.closed_at < v_closed_cut
             -- An order cancelled by cancel_order while a payment method's
             -- window was open at the gateway may still get that money: it
             -- must find its order (a late payment), until the window ends
             -- (a timeout never cancels before it).
             AND coalesce(o.gateway_expire_at, '-infinity') + v_grace < v_now
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
                 -- an attempt still open may bring money until the gateway's
                 -- expiry: it must find its order (a double payment). Its
                 -- window is the grace of today or of its begin_payment,
                 -- whichever is longer: cancel_at is never before the latter
                 -- (a grace lowered since does not shorten a window given).
                 AND NOT (greatest(coalesce(o.gateway_expire_at, '-infinity') + v_grace, o.cancel_at) >= v_paid_cut
                          AND EXISTS (SELECT 1 FROM ordertimeout.payments AS p
                                       WHERE p.order_id = o.order_id AND p.status = 'started'))
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

    -- 3. Every row about them, then the orders. The items go while their
    -- orders are still there: the trigger on order_items adds what the paid
    -- ones bought to purged_sales (_count_purged_sales).
    DELETE FROM ordertimeout.order_items AS i WHERE i.order_id = ANY (v_ids);
    -- Their refund ids stay known: one refund gives back one payment, also
    -- after its conflict is gone (purged_refunds, finish_refund's OT177).
    INSERT INTO ordertimeout.purged_refunds (refund_id, conflict_id, order_id, payment_id, purged_at)
    SELECT k.refund_id, k.conflict_id, k.order_id, k.payment_id, v_now
    FROM ordertimeout.conflicts AS k
    WHERE k.order_id = ANY (v_ids)
      AND k.refund_id IS NOT NULL
    ON CONFLICT ON CONSTRAINT purged_refunds_pkey DO NOTHING;
    DELETE FROM ordertimeout.conflicts AS k WHERE k.order_id = ANY (v_ids);
    -- Their payment ids stay known: a callback of one, coming later, must
    -- not pay a new order given the same order id (purged_payments).
    INSERT INTO ordertimeout.purged_payments (payment_id, order_id, purged_at)
    SELECT p.payment_id, p.order_id, v_now
    FROM ordertimeout.payments AS p
    WHERE p.order_id = ANY (v_ids)
    ON CONFLICT ON CONSTRAINT purged_payments_pkey DO NOTHING;
    DELETE FROM ordertimeout.payments AS p WHERE p.order_id = ANY (v_ids);
    DELETE FROM ordertimeout.releases AS r WHERE r.order_id = ANY (v_ids);
    DELETE FROM ordertimeout.events AS e WHERE e.order_id = ANY (v_ids);
    DELETE FROM ordertimeout.points_holds AS h WHERE h.order_id = ANY (v_ids);
    DELETE FROM ordertimeout.coupon_holds AS h
    WHERE h.order_id = ANY (v_ids)
      AND h.used_at IS NULL;
    DELETE FROM ordertimeout.orders AS o WHERE o.order_id = ANY (v_ids);
    -- Their ids and the moment (purged_orders): a payment of one of them
    -- that no callback brought must not pay a new order given the id
    -- (reconcile_payments). A record matters only for an order given the id
    -- within 10 minutes of the purge. Such an order's create_order may
    -- still be uncommitted, and invisible here, when those 10 minutes end:
    -- records are kept an hour, then only while such an order lives. Rows
    -- another purge holds (its upsert of an id purged again, or its own
    -- prune) are left to a later purge, never waited for.
    INSERT INTO ordertimeout.purged_orders AS g (order_id, purged_at)
    SELECT i, v_now FROM unnest(v_ids) AS i
    ON CONFLICT ON CONSTRAINT purged_orders_pkey DO UPDATE SET purged_at = excluded.purged_at;
    DELETE FROM ordertimeout.purged_orders AS g
    WHERE g.order_id IN (SELECT k.order_id FROM ordertimeout.purged_orders AS k
                          WHERE k.purged_at < v_now - interval '1 hour'
                            AND NOT EXISTS (SELECT 1 FROM ordertimeout.orders AS o
                                             WHERE o.order_id = k.order_id
                                               AND o.created_at < k.purged_at + interval '10 minutes')
                            FOR UPDATE SKIP LOCKED);
    RETURN cardinality(v_ids);
END
$$;

COMMENT ON FUNCTION ordertimeout.purge_orders(interval, integer, interval) IS
    'deletes up to max finished orders with their items, payments, resolved conflicts, releases, events and holds: CLOSED orders closed longer ago than closed_older_than, and PAID or REFUNDED orders paid longer ago than paid_older_than if given; never a live order, one with an open conflict, or a paid one whose other payment attempt may still bring money; keeps the hold of a spent coupon, the orders'' payment ids (purged_payments) and their conflicts'' refund ids (purged_refunds), and what paid orders bought is added to purged_sales; returns how many';
