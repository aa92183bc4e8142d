-- Payment transitions shared by confirm_payment, fail_payment,
-- reconcile_payments and the gateway checks.

-- The payment method that decides for payment p (its close at the cancel,
-- the late-payment policy of its conflict): the one begin_payment recorded
-- on it (NULL: none, the defaults), else, where none is recorded (confirmed
-- without a begin, or begun before migration 000059), its order's,
-- order_method. Inlined into the caller's statement.
CREATE FUNCTION ordertimeout._method_of(p ordertimeout.payments, order_method text)
RETURNS text
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
AS $$
    SELECT CASE WHEN p.method_recorded THEN p.method ELSE order_method END
$$;

-- Money is exact: an order with an amount (and currency) is PAID only by a
-- payment of that amount in that currency. Any other payment is a conflict
-- of kind amount_mismatch, on a live order as on a cancelled one. A payment
-- without an amount (an app caller that does not know it) pays an order with
-- an amount, recorded as unverified in the event; the sidecar never confirms
-- such an order without the gateway's amount. A payment without a currency
-- is in the order's currency.
-- The one implementation of confirm_payment; cause is the events' and a new
-- conflict's cause: payment (a callback, a gateway check) or reconcile (found
-- in the gateway's records). paid_at is when the gateway says it took the
-- payment (confirm_payment's caller's, when given; reconcile_payments judges
-- its own rows' times before it calls): a payment this database has not seen
-- for the order, taken before the order could have had it, is an earlier
-- order's under the same id (_refuse_earlier_orders_payment, OT178).
CREATE FUNCTION ordertimeout._confirm_payment(
    order_id   text,
    payment_id text,
    amount     numeric,
    currency   text,
    cause      text,
    paid_at    timestamptz DEFAULT NULL)
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
    v_pay_amount numeric;
    v_pay_cur    text;
    v_known      numeric;
    v_conflict   bigint;
    v_kind       text;
    v_mismatch   boolean;
    v_paid_cur   text;
    v_detail     jsonb;
    v_order      ordertimeout.orders;
    v_event_id   bigint;
BEGIN
    -- Each check helper runs only when its argument fails the quick test
    -- (see plpgsql/checks.sql), and raises the error naming the field.
    IF NOT ordertimeout._is_identifier(_confirm_payment.order_id, 64) THEN
        PERFORM ordertimeout._check_order_id(_confirm_payment.order_id);
    END IF;
    IF NOT ordertimeout._is_identifier(_confirm_payment.payment_id, 128) THEN
        PERFORM ordertimeout._check_payment_id(_confirm_payment.payment_id);
    END IF;
    IF _confirm_payment.amount IS NOT NULL THEN
        PERFORM ordertimeout._check_amount('amount', _confirm_payment.amount);
    END IF;
    IF _confirm_payment.currency IS NOT NULL AND _confirm_payment.currency !~ '^[A-Z]{3}$' THEN
        RAISE EXCEPTION 'currency must be a three-letter ISO 4217 code such as "EUR", got "%"',
            ordertimeout._shown(_confirm_payment.currency, 16)
            USING ERRCODE = 'OT128';
    END IF;
    IF _confirm_payment.paid_at IS NOT NULL
       AND (NOT isfinite(_confirm_payment.paid_at) OR _confirm_payment.paid_at < timestamptz '2000-01-01 00:00:00+00') THEN
        RAISE EXCEPTION 'paid_at must be a finite time from the year 2000 on (the gateway''s time of the payment), got %',
            _confirm_payment.paid_at
            USING ERRCODE = 'OT179';
    END IF;

    -- The order row lock serializes every transition of this order, and
    -- close_cancelled (which takes the same lock) with the conflict below.
    v_order := ordertimeout._lock_order(_confirm_payment.order_id);
    v_status := v_order.status;
    v_amount := v_order.amount;
    v_currency := v_order.currency;
    v_timer := v_order.timer_job_id;

    SELECT p.order_id, p.status, p.amount, p.currency INTO v_pay_order, v_pay_status, v_pay_amount, v_pay_cur
    FROM ordertimeout.payments AS p
    WHERE p.payment_id = _confirm_payment.payment_id;
    IF NOT FOUND THEN
        -- A payment of an order that purge_orders deleted: its order id may
        -- have been given to a new order since, which this money is not for.
        IF EXISTS (SELECT 1 FROM ordertimeout.purged_payments AS g WHERE g.payment_id = _confirm_payment.payment_id) THEN
            PERFORM ordertimeout._refuse_purged_payment(_confirm_payment.payment_id, _confirm_payment.order_id);
        END IF;
        IF _confirm_payment.paid_at IS NOT NULL THEN
            PERFORM ordertimeout._refuse_earlier_orders_payment(_confirm_payment.payment_id, v_order, _confirm_payment.paid_at);
        END IF;
    ELSIF v_pay_order <> _confirm_payment.order_id THEN
        RAISE EXCEPTION 'payment_id "%" belongs to another order', _confirm_payment.payment_id
            USING ERRCODE = 'OT124';
    END IF;
    -- A payment confirmed before (PAID its order, or a conflict): the same
    -- confirmation again gets the same answer, and writes nothing. One that
    -- says another amount or currency than the payment's (or, for a payment
    -- confirmed without an amount, than its order's) is not the same
    -- confirmation: refused (OT157), nothing written, rather than answered
    -- as if it were; reconcile_payments reports such a payment too
    -- (amount_differs). A conflict whose payment came without an amount
    -- learns the amount while nobody has acted on it (state open), and its
    -- kind with it: a late payment of the exact amount can then be
    -- reinstated. A confirmation without an amount, or without a currency,
    -- says nothing against the one before.
    IF v_pay_status IN ('confirmed', 'late', 'refunded') THEN
        v_known := CASE
                       WHEN v_pay_amount IS NOT NULL THEN v_pay_amount
                       WHEN v_pay_status = 'confirmed' THEN v_amount
                   END;
        IF (_confirm_payment.amount IS NOT NULL AND v_known IS NOT NULL AND _confirm_payment.amount <> v_known)
           OR (_confirm_payment.currency IS NOT NULL AND coalesce(v_pay_cur, v_currency) IS NOT NULL
               AND _confirm_payment.currency <> coalesce(v_pay_cur, v_currency)) THEN
            RAISE EXCEPTION 'payment "%" of order "%" is % here, of %; this confirmation says %: not recorded (a person checks it at the gateway)',
                _confirm_payment.payment_id, _confirm_payment.order_id,
                CASE v_pay_status WHEN 'confirmed' THEN 'confirmed' WHEN 'late' THEN 'a conflict' ELSE 'refunded' END,
                concat_ws(' ', coalesce(v_known::text, 'an unknown amount'), coalesce(v_pay_cur, v_currency))
                || CASE WHEN v_pay_amount IS NULL AND v_known IS NOT NULL THEN ' (its order''s amount: it was confirmed without one)' ELSE '' END,
                concat_ws(' ', coalesce(_confirm_payment.amount::text, 'no amount'), _confirm_payment.currency)
                USING ERRCODE = 'OT157';
        END IF;
        IF v_pay_status = 'late' AND v_pay_amount IS NULL AND _confirm_payment.amount IS NOT NULL THEN
            v_paid_cur := coalesce(_confirm_payment.currency, v_pay_cur);
            -- resolve_conflict and finish_refund lock the conflict, then the
            -- order; this holds the order, so waiting for a conflict row one
            -- of them holds would deadlock. Such a row is skipped, and the
            -- call fails with a serialization failure (40001), writing
            -- nothing: the caller calls again once the other transaction
            -- has ended. Then the conflict is resolved (nothing to learn) or
            -- still open (the amount is learned). Answering "conflict" here
            -- lost the amount: a resolve_conflict that failed for want of
            -- it (OT132) and rolled back left the conflict open without it.
            SELECT c.conflict_id INTO v_conflict
            FROM ordertimeout.conflicts AS c
            WHERE c.payment_id = _confirm_payment.payment_id
              AND c.state = 'open'
            FOR UPDATE SKIP LOCKED;
            IF NOT FOUND AND EXISTS (SELECT 1 FROM ordertimeout.conflicts AS c
                                      WHERE c.payment_id = _confirm_payment.payment_id
                                        AND c.state = 'open') THEN
                RAISE EXCEPTION 'payment "%" of order "%": its conflict is being acted on by another transaction; the amount % is not recorded yet: call again',
                    _confirm_payment.payment_id, _confirm_payment.order_id,
                    concat_ws(' ', _confirm_payment.amount::text, v_paid_cur)
                    USING ERRCODE = 'serialization_failure';
            END IF;
            IF FOUND THEN
                UPDATE ordertimeout.conflicts AS c
                SET amount = _confirm_payment.amount,
                    currency = v_paid_cur,
                    kind = CASE
                               WHEN c.kind = 'late_payment' AND v_amount IS NOT NULL AND _confirm_payment.amount <> v_amount
                                   THEN 'amount_mismatch'
                               ELSE c.kind
                           END
                WHERE c.conflict_id = v_conflict
                RETURNING c.kind INTO v_kind;
                UPDATE ordertimeout.payments AS p
                SET amount = _confirm_payment.amount,
                    currency = v_paid_cur
                WHERE p.payment_id = _confirm_payment.payment_id;
                PERFORM ordertimeout._log_event(_confirm_payment.order_id, v_status, v_status, _confirm_payment.cause, v_now,
                    jsonb_build_object('payment_id', _confirm_payment.payment_id, 'conflict_id', v_conflict, 'kind', v_kind,
                                       'amount', _confirm_payment.amount, 'currency', v_paid_cur, 'amount_learned', true));
                -- The policy may act on it now (a late payment of the exact
                -- amount is reinstated): the listener reads the table.
                PERFORM pg_notify('ordertimeout_conflict', '');
            END IF;
        END IF;
        RETURN CASE WHEN v_pay_status = 'confirmed' THEN 'paid' ELSE 'conflict' END;
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
        -- begin_payment wrote the payment's row, as a rule: update it; insert
        -- one only for a confirmation without a begin.
        UPDATE ordertimeout.payments AS p
        SET status = 'confirmed',
            amount = coalesce(_confirm_payment.amount, p.amount),
            currency = v_paid_cur,
            confirmed_at = v_now
        WHERE p.payment_id = _confirm_payment.payment_id
          AND p.order_id = _confirm_payment.order_id;
        IF NOT FOUND THEN
            -- A row of another order under this payment_id, written since
            -- the look above (two orders given the same payment_id at once),
            -- is not ours to update: the WHERE leaves it, and the call fails
            -- with OT124 as the look would have, the order's UPDATE with it.
            INSERT INTO ordertimeout.payments AS p (payment_id, order_id, status, amount, currency, confirmed_at)
            VALUES (_confirm_payment.payment_id, _confirm_payment.order_id, 'confirmed', _confirm_payment.amount,
                    v_paid_cur, v_now)
            ON CONFLICT ON CONSTRAINT payments_pkey DO UPDATE
            SET status = 'confirmed',
                amount = coalesce(excluded.amount, p.amount),
                currency = excluded.currency,
                confirmed_at = excluded.confirmed_at
            WHERE p.order_id = excluded.order_id;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'payment_id "%" belongs to another order', _confirm_payment.payment_id
                    USING ERRCODE = 'OT124';
            END IF;
        END IF;
        PERFORM ordertimeout._drop_timer(v_timer);
        v_detail := jsonb_build_object('payment_id', _confirm_payment.payment_id, 'amount', _confirm_payment.amount,
                                       'currency', v_paid_cur);
        IF _confirm_payment.amount IS NULL AND v_amount IS NOT NULL THEN
            v_detail := v_detail || jsonb_build_object('unverified', true);
        END IF;
        v_event_id := ordertimeout._log_event(_confirm_payment.order_id, v_status, 'PAID', _confirm_payment.cause, v_now, v_detail,
            webhook => true);
        -- Last, so that the stock rows stay locked only until the commit.
        PERFORM ordertimeout._consume(_confirm_payment.order_id, v_now,
            v_order.coupon_id IS NOT NULL, v_order.points_account IS NOT NULL);
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
    -- As above: never over a row of another order.
    INSERT INTO ordertimeout.payments AS p (payment_id, order_id, status, amount, currency, confirmed_at)
    VALUES (_confirm_payment.payment_id, _confirm_payment.order_id, 'late', _confirm_payment.amount, v_paid_cur, v_now)
    ON CONFLICT ON CONSTRAINT payments_pkey DO UPDATE
    SET status = 'late',
        amount = coalesce(excluded.amount, p.amount),
        currency = excluded.currency,
        confirmed_at = excluded.confirmed_at
    WHERE p.order_id = excluded.order_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'payment_id "%" belongs to another order', _confirm_payment.payment_id
            USING ERRCODE = 'OT124';
    END IF;
    INSERT INTO ordertimeout.conflicts (order_id, payment_id, kind, amount, currency, detected_at, cause)
    VALUES (_confirm_payment.order_id, _confirm_payment.payment_id, v_kind, _confirm_payment.amount, v_paid_cur, v_now,
            _confirm_payment.cause)
    RETURNING conflict_id INTO v_conflict;

    -- A finished order with an open conflict is no longer finished: a CLOSED
    -- order goes back to CANCELLED (close_cancelled closes it again once the
    -- conflict is resolved). Touching the row of a CANCELLED order makes a
    -- concurrent close_cancelled under REPEATABLE READ fail rather than
    -- close it past this conflict; the row of a PAID or REFUNDED order is
    -- touched for the same reason: a concurrent purge_orders under
    -- REPEATABLE READ then fails with 40001 instead of deleting the order
    -- around a conflict and payment its snapshot does not see (23503).
    IF v_status IN ('CANCELLED', 'CLOSED') THEN
        UPDATE ordertimeout.orders AS o
        SET status = 'CANCELLED',
            closed_at = NULL,
            deadline_version = o.deadline_version + 1
        WHERE o.order_id = _confirm_payment.order_id;
    ELSIF v_status IN ('PAID', 'REFUNDED') THEN
        UPDATE ordertimeout.orders AS o
        SET deadline_version = o.deadline_version + 1
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

-- PAYING -> PENDING once no payment attempt is in flight any more: the
-- order's own timeout applies again, with a new timer row for the new version
-- (due at once if cancel_at has passed). Returns false while another attempt
-- is still started.
CREATE FUNCTION ordertimeout._back_to_pending(order_id text, at timestamptz, detail jsonb)
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
    v_expire  timestamptz;
BEGIN
    -- Locked, not only read: an attempt ends (fail_payment, or a conflict
    -- while another attempt is in flight) without touching the order row, so
    -- the order's lock does not make a REPEATABLE READ or SERIALIZABLE
    -- caller's snapshot current for its payments. Locking a started attempt
    -- that another transaction has ended since the snapshot raises 40001
    -- there; read committed re-reads the row and passes it over.
    PERFORM 1
    FROM ordertimeout.payments AS p
    WHERE p.order_id = _back_to_pending.order_id
      AND p.status = 'started'
    FOR SHARE;
    IF FOUND THEN
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
    RETURNING o.deadline_version, o.timer_job_id, o.cancel_at, o.expire_at INTO v_version, v_job_id, v_cancel, v_expire;
    IF NOT FOUND THEN
        RETURN false;
    END IF;

    PERFORM ordertimeout._schedule_timer(v_job_id, _back_to_pending.order_id, v_version, v_cancel);
    PERFORM ordertimeout._schedule_reminder(_back_to_pending.order_id, v_version, v_expire, s.remind_before, _back_to_pending.at)
    FROM ordertimeout.settings AS s
    WHERE s.webhooks;
    PERFORM ordertimeout._log_event(_back_to_pending.order_id, 'PAYING', 'PENDING', 'payment',
        _back_to_pending.at, _back_to_pending.detail);
    PERFORM ordertimeout._wake_if_sooner(v_cancel);
    RETURN true;
END
$$;

-- _refuse_earlier_orders_payment raises OT178 when a payment this database
-- has not seen for order o (no payments row: neither begun nor confirmed
-- before) was taken, by the gateway's clock (paid_at), before o could have
-- had it: more than 5 minutes (what two clocks may differ) before o was
-- created, or before an earlier order under o's id was purged, plus those 5
-- minutes, when o was given the id soon after (purged_orders). Such money is
-- an earlier order's, whose callback never came: the same rules as
-- reconcile_payments' other_order. Nothing is confirmed; a person checks it
-- at the gateway.
CREATE FUNCTION ordertimeout._refuse_earlier_orders_payment(payment_id text, o ordertimeout.orders, paid_at timestamptz)
RETURNS void
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_purged_at timestamptz;
BEGIN
    IF paid_at < o.created_at - interval '5 minutes' THEN
        RAISE EXCEPTION 'payment_id "%" was taken at %, before order "%" was created at %: a payment of an earlier order under this id, not confirmed (a person checks it at the gateway)',
            _refuse_earlier_orders_payment.payment_id, paid_at, o.order_id, o.created_at
            USING ERRCODE = 'OT178';
    END IF;
    SELECT g.purged_at INTO v_purged_at
    FROM ordertimeout.purged_orders AS g
    WHERE g.order_id = o.order_id
      AND _refuse_earlier_orders_payment.paid_at < g.purged_at + interval '5 minutes';
    IF FOUND THEN
        RAISE EXCEPTION 'payment_id "%" was taken at %, before an earlier order "%" was purged at % and the id given to this one (created at %): a payment of the purged order, not confirmed (a person checks it at the gateway)',
            _refuse_earlier_orders_payment.payment_id, paid_at, o.order_id, v_purged_at, o.created_at
            USING ERRCODE = 'OT178';
    END IF;
END
$$;

-- _refuse_purged_payment raises OT176 when payment_id was a payment of an
-- order that purge_orders deleted (purged_payments), for order_id: that
-- order id may belong to a new order now, and the payment is not its money.
-- begin_payment and _confirm_payment call it only when no payments row has
-- the id, after a quick look of their own.
CREATE FUNCTION ordertimeout._refuse_purged_payment(payment_id text, order_id text)
RETURNS void
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_purged ordertimeout.purged_payments;
BEGIN
    SELECT g.* INTO v_purged
    FROM ordertimeout.purged_payments AS g
    WHERE g.payment_id = _refuse_purged_payment.payment_id;
    IF FOUND THEN
        RAISE EXCEPTION 'payment_id "%" was of order "%", purged at %: it is not a payment of order "%" (a person checks it at the gateway)',
            _refuse_purged_payment.payment_id, v_purged.order_id, v_purged.purged_at, _refuse_purged_payment.order_id
            USING ERRCODE = 'OT176';
    END IF;
END
$$;
