-- Money exact, conflicts resolved exactly once, hostile input refused.
--
-- Hand-written (000009 was generated from sql/install.sql and has shipped):
-- the ALTERs below, then the current text of every plpgsql/ file this change
-- touched, with CREATE OR REPLACE. `make check-migrations` proves that
-- migrations/ and sql/install.sql still build the same database.
--
-- Refuses to run while an amount is NaN or infinite: such rows need a person
-- (they were accepted before this migration); fix or delete them first.
DO $check$
DECLARE
    v_bad text;
BEGIN
    SELECT string_agg(x, ', ') INTO v_bad
    FROM (SELECT 'order ' || o.order_id AS x FROM ordertimeout.orders AS o
           WHERE NOT (o.amount >= 0 AND o.amount < 1000000000000000)
          UNION ALL
          SELECT 'payment ' || p.payment_id FROM ordertimeout.payments AS p
           WHERE NOT (p.amount >= 0 AND p.amount < 1000000000000000)
          UNION ALL
          SELECT 'conflict ' || c.conflict_id FROM ordertimeout.conflicts AS c
           WHERE NOT (c.amount >= 0 AND c.amount < 1000000000000000)
          LIMIT 20) AS b;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'amounts that are NaN, infinite, negative or >= 10^15 must be fixed before this migration: %', v_bad;
    END IF;
END
$check$;

ALTER TABLE ordertimeout.orders
    DROP CONSTRAINT orders_amount_not_negative,
    ADD CONSTRAINT orders_amount_finite CHECK (amount >= 0 AND amount < 1000000000000000);

-- A payment without a currency was in the order's currency.
ALTER TABLE ordertimeout.payments
    ADD COLUMN currency text;
UPDATE ordertimeout.payments AS p
SET currency = o.currency
FROM ordertimeout.orders AS o
WHERE o.order_id = p.order_id
  AND o.currency IS NOT NULL;
ALTER TABLE ordertimeout.payments
    DROP CONSTRAINT payments_amount_not_negative,
    ADD CONSTRAINT payments_amount_finite CHECK (amount >= 0 AND amount < 1000000000000000),
    ADD CONSTRAINT payments_currency_iso CHECK (currency ~ '^[A-Z]{3}$');

ALTER TABLE ordertimeout.conflicts
    ADD COLUMN currency text,
    ADD COLUMN state text NOT NULL DEFAULT 'open',
    ADD COLUMN refund_started_at timestamptz,
    ADD COLUMN refund_started_by text,
    ADD COLUMN refund_id text;
UPDATE ordertimeout.conflicts AS c
SET currency = o.currency,
    state = CASE WHEN c.resolution IS NULL THEN 'open' ELSE 'resolved' END
FROM ordertimeout.orders AS o
WHERE o.order_id = c.order_id;
ALTER TABLE ordertimeout.conflicts
    ADD CONSTRAINT conflicts_amount_finite CHECK (amount >= 0 AND amount < 1000000000000000),
    ADD CONSTRAINT conflicts_currency_iso CHECK (currency ~ '^[A-Z]{3}$'),
    ADD CONSTRAINT conflicts_state_known CHECK (state IN ('open', 'refunding', 'resolved')),
    ADD CONSTRAINT conflicts_resolved_state CHECK ((state = 'resolved') = (resolution IS NOT NULL)),
    ADD CONSTRAINT conflicts_refund_started_ends_refunded
        CHECK (refund_started_at IS NULL OR state = 'refunding' OR coalesce(resolution, '') = 'refunded'),
    ADD CONSTRAINT conflicts_refunding_has_start CHECK (state <> 'refunding' OR refund_started_at IS NOT NULL);

-- The pause switch.
ALTER TABLE ordertimeout.settings
    ADD COLUMN paused boolean NOT NULL DEFAULT false,
    ADD COLUMN paused_at timestamptz,
    ADD COLUMN paused_by text,
    ADD COLUMN resumed_at timestamptz,
    ADD CONSTRAINT settings_paused_has_paused_at CHECK (NOT paused OR paused_at IS NOT NULL);

-- Payment methods: each with its own paying window, because a bank transfer
-- or a QR code needs another window than a card. Changed with
-- ordertimeout.put_payment_method().

CREATE TABLE ordertimeout.payment_methods (
    method        text     NOT NULL,
    paying_window interval NOT NULL,
    gateway_close boolean  NOT NULL DEFAULT true,
    late_payment  text,
    CONSTRAINT payment_methods_pkey PRIMARY KEY (method),
    CONSTRAINT payment_methods_name_plain CHECK (method ~ '^[a-z][a-z0-9_]{0,31}$'),
    CONSTRAINT payment_methods_paying_window_in_range
        CHECK (paying_window > interval '0' AND paying_window <= interval '30 days'),
    CONSTRAINT payment_methods_late_payment_known
        CHECK (late_payment IN ('reinstate', 'refund', 'manual'))
);

COMMENT ON TABLE ordertimeout.payment_methods IS
    'named payment methods a shop configures once: the paying window the gateway enforces, whether a cancel closes the payment at the gateway, and a late-payment policy that overrides settings.late_payment';
COMMENT ON COLUMN ordertimeout.payment_methods.gateway_close IS
    'false for methods the gateway cannot close (a bank transfer): no close is sent after a cancel';
COMMENT ON COLUMN ordertimeout.payment_methods.late_payment IS
    'the policy for money arriving after the cancel for orders paid this way; NULL: settings.late_payment';

INSERT INTO ordertimeout.payment_methods (method, paying_window, gateway_close, late_payment)
VALUES ('card', interval '15 minutes', true, NULL),
       ('qr', interval '2 hours', true, NULL),
       ('bank_transfer', interval '3 days', false, 'refund');

ALTER TABLE ordertimeout.orders
    ADD COLUMN payment_method text,
    ADD COLUMN gateway_expire_at timestamptz,
    ADD CONSTRAINT orders_payment_method_known
        FOREIGN KEY (payment_method) REFERENCES ordertimeout.payment_methods (method),
    ADD CONSTRAINT orders_gateway_expiry_before_cancel CHECK (gateway_expire_at <= cancel_at);
ALTER TYPE ordertimeout.order_state
    ADD ATTRIBUTE payment_method text,
    ADD ATTRIBUTE gateway_expire_at timestamptz;

-- Reconciliation.
ALTER TABLE ordertimeout.conflicts
    ADD COLUMN cause text NOT NULL DEFAULT 'payment',
    ADD CONSTRAINT conflicts_cause_known CHECK (cause IN ('payment', 'reconcile'));
ALTER TABLE ordertimeout.events
    DROP CONSTRAINT events_cause_known,
    ADD CONSTRAINT events_cause_known
        CHECK (cause IN ('timeout', 'sweep', 'requested', 'payment', 'gateway', 'conflict', 'admin', 'reconcile'));
-- Continuous reconciliation: how far each source of gateway records has been
-- reconciled (reconcile_payments with a source advances it in the same
-- transaction).
CREATE TABLE ordertimeout.reconcile_watermarks (
    source     text        NOT NULL,
    watermark  timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    CONSTRAINT reconcile_watermarks_pkey PRIMARY KEY (source),
    CONSTRAINT reconcile_watermarks_source_plain CHECK (source ~ '^[a-z][a-z0-9_:.-]{0,63}$')
);

COMMENT ON TABLE ordertimeout.reconcile_watermarks IS
    'per source of gateway records (e.g. gateway:fake), the end of the last period reconciled';


COMMENT ON COLUMN ordertimeout.conflicts.state IS
    'open (waiting for a resolution), refunding (a refund was claimed: only finish_refund can end it), resolved';
COMMENT ON COLUMN ordertimeout.conflicts.cause IS
    'how the money was found: payment (confirm_payment: a callback or a gateway check) or reconcile (the gateway''s records: a lost callback)';
COMMENT ON COLUMN ordertimeout.conflicts.refund_id IS 'the gateway''s id of the refund, recorded by finish_refund';
COMMENT ON COLUMN ordertimeout.payments.currency IS
    'the payment''s currency as confirmed (the order''s when the caller gave none)';
COMMENT ON COLUMN ordertimeout.orders.gateway_expire_at IS
    'the deadline the gateway must enforce for the payment begun last (begin_payment returns it): pass it as the gateway''s expiry; cancel_at is never before it plus grace';
COMMENT ON COLUMN ordertimeout.settings.paused IS
    'while true nothing is cancelled by a timeout: sweep_due claims nothing, cancel_checked refuses (OT137), gateway closes wait; payments and conflicts go on';
COMMENT ON COLUMN ordertimeout.settings.paused_at IS 'when the last pause began (kept after the resume: cancels due during it say they waited)';
COMMENT ON COLUMN ordertimeout.settings.resumed_at IS 'when the last pause ended';

-- Signatures that changed: confirm_payment takes the payment's currency;
-- open_conflicts returns currency and state.
DROP FUNCTION ordertimeout.confirm_payment(text, text, numeric);
DROP FUNCTION ordertimeout.open_conflicts(integer);
DROP FUNCTION ordertimeout.configure(interval, interval, interval, text, text, boolean, interval);
DROP FUNCTION ordertimeout.begin_payment(text, text, interval);

CREATE OR REPLACE VIEW ordertimeout.sweep_stats AS
SELECT
    (SELECT count(*)
       FROM public.river_job AS r
      WHERE r.state = 'available'
        AND r.queue = 'ordertimeout_expire'
        AND r.priority = 1
        AND r.scheduled_at <= now()) AS due_timers,
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
    (SELECT count(*)
       FROM public.river_job AS r
      WHERE r.state = 'discarded'
        AND r.queue = 'ordertimeout_expire') AS malformed_timers,
    (SELECT s.paused FROM ordertimeout.settings AS s) AS paused;

COMMENT ON VIEW ordertimeout.sweep_stats IS
    'the sweep''s health: due timer rows, overdue orders, orders waiting for a gateway check, timeouts caught without their timer row (lost timers), open conflicts, malformed timer rows set aside by sweep_due, whether timeout cancels are paused';


-- ------------------------------------------------------------------
-- plpgsql/private.sql
-- ------------------------------------------------------------------

-- Private helpers. EXECUTE on them is revoked from PUBLIC (grants.sql); the
-- API functions run them as their owner.

-- Helpers are PL/pgSQL, not SQL: a SQL function with a SET clause cannot be
-- inlined and is planned again on every call, PL/pgSQL keeps its plans.
-- Whether value is text a person can read back as it is: 1 to max_length
-- characters, none of Unicode 15's categories Cc (controls: C0, DEL, C1), Cf
-- (format characters: bidi overrides and isolates, zero-width characters,
-- the byte order mark, soft hyphen, tag characters), Zl and Zp (line and
-- paragraph separators). Identifiers, reasons and actors pass through logs,
-- URLs and consoles: these characters would make them look like something
-- else. The ranges are written out (the regex classes of PostgreSQL depend on
-- the locale); tests/fuzz checks them against Go's unicode tables.
CREATE OR REPLACE FUNCTION ordertimeout._is_plain_text(value text, max_length integer)
RETURNS boolean
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN value IS NOT NULL
       AND char_length(value) BETWEEN 1 AND max_length
       AND value !~ '[\u0001-\u001F\u007F-\u009F\u00AD\u0600-\u0605\u061C\u06DD\u070F\u0890-\u0891\u08E2\u180E\u200B-\u200F\u2028-\u202E\u2060-\u2064\u2066-\u206F\uFEFF\uFFF9-\uFFFB\U000110BD\U000110CD\U00013430-\U0001343F\U0001BCA0-\U0001BCA3\U0001D173-\U0001D17A\U000E0001\U000E0020-\U000E007F]';
END
$$;

-- Whether id can name an order, a payment or a refund: plain text (see
-- _is_plain_text) and not "." or "..", which a URL path would read as dot
-- segments.
CREATE OR REPLACE FUNCTION ordertimeout._is_identifier(id text, max_length integer)
RETURNS boolean
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN ordertimeout._is_plain_text(id, max_length) AND id NOT IN ('.', '..');
END
$$;

-- Raises OT126 unless amount, an amount of money, is NULL or a finite number
-- from 0 to below 10^15. field names the argument in the message.
CREATE OR REPLACE FUNCTION ordertimeout._check_amount(field text, amount numeric)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- 'NaN' >= 0 is true, and NaN sorts above every number: the upper bound
    -- is what refuses NaN and Infinity.
    IF amount IS NOT NULL AND NOT (amount >= 0 AND amount < 1000000000000000) THEN
        RAISE EXCEPTION '% must be a finite number from 0 to below 10^15, got %', field, amount
            USING ERRCODE = 'OT126';
    END IF;
END
$$;

-- Raises code unless value is a positive interval of at most max without a
-- month or year part (a month has no fixed length: '1 mon' compares as 30
-- days but adds up to 31). Compared before any arithmetic, so no value
-- overflows a timestamp later. With allow_zero, 0 is accepted too.
CREATE OR REPLACE FUNCTION ordertimeout._check_interval(
    field      text,
    value      interval,
    max        interval,
    code       text,
    allow_zero boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL THEN
        RETURN;
    END IF;
    IF extract(month FROM value) <> 0 OR extract(year FROM value) <> 0 THEN
        RAISE EXCEPTION '% must be given in days, hours, minutes or seconds (a month has no fixed length), got %',
            field, value
            USING ERRCODE = code;
    END IF;
    IF (value < interval '0' OR (value = interval '0' AND NOT allow_zero)) OR value > max THEN
        RAISE EXCEPTION '% must be % 0 and at most %, got %',
            field, CASE WHEN allow_zero THEN 'at least' ELSE 'more than' END, max, value
            USING ERRCODE = code;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION ordertimeout._actor()
RETURNS text
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_actor text := nullif(current_setting('ordertimeout.actor', true), '');
BEGIN
    IF v_actor IS NULL THEN
        RETURN session_user::text;
    END IF;
    IF NOT ordertimeout._is_plain_text(v_actor, 200) THEN
        RAISE EXCEPTION 'ordertimeout.actor must be 1 to 200 characters without control, format or line-separator characters (got % characters)',
            char_length(v_actor)
            USING ERRCODE = 'OT148';
    END IF;
    RETURN v_actor;
END
$$;

COMMENT ON FUNCTION ordertimeout._actor() IS
    'who acts: the ordertimeout.actor setting of the session if set (SET ordertimeout.actor = ''user:42''), else the login role';

CREATE OR REPLACE FUNCTION ordertimeout._check_order_id(order_id text)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF order_id IS NULL THEN
        RAISE EXCEPTION 'order_id must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF NOT ordertimeout._is_identifier(order_id, 64) THEN
        RAISE EXCEPTION 'order_id must be 1 to 64 characters, not "." or "..", without control, format or line-separator characters (got % characters)',
            char_length(order_id)
            USING ERRCODE = 'OT101';
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION ordertimeout._check_payment_id(payment_id text)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF payment_id IS NULL THEN
        RAISE EXCEPTION 'payment_id must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF NOT ordertimeout._is_identifier(payment_id, 128) THEN
        RAISE EXCEPTION 'payment_id must be 1 to 128 characters, not "." or "..", without control, format or line-separator characters (got % characters)',
            char_length(payment_id)
            USING ERRCODE = 'OT121';
    END IF;
END
$$;

-- Raises OT100/OT140 unless max, a batch size, is between 1 and 100,000.
CREATE OR REPLACE FUNCTION ordertimeout._check_max(max integer)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF max IS NULL THEN
        RAISE EXCEPTION 'max must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF max NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'max must be between 1 and 100000, got %', max
            USING ERRCODE = 'OT140';
    END IF;
END
$$;

-- Validates create_order's items and returns them sorted by sku as
-- [{"sku": ..., "qty": ...}], the form stored and compared for idempotency.
CREATE OR REPLACE FUNCTION ordertimeout._normalize_items(items jsonb)
RETURNS jsonb
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_item     jsonb;
    v_position integer := -1;
    v_key      text;
    v_sku      text;
    v_qty      numeric;
    v_count    integer;
    v_dup      text;
    v_result   jsonb;
BEGIN
    IF items IS NULL THEN
        RAISE EXCEPTION 'items must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF jsonb_typeof(items) <> 'array' THEN
        RAISE EXCEPTION 'items must be a JSON array of {"sku": ..., "qty": ...} objects, got a JSON %',
            jsonb_typeof(items)
            USING ERRCODE = 'OT102';
    END IF;
    v_count := jsonb_array_length(items);
    IF v_count = 0 OR v_count > 100 THEN
        RAISE EXCEPTION 'items must have 1 to 100 entries, got %', v_count
            USING ERRCODE = 'OT103';
    END IF;

    FOR v_item IN SELECT e.value FROM jsonb_array_elements(items) AS e LOOP
        v_position := v_position + 1;
        IF jsonb_typeof(v_item) <> 'object' THEN
            RAISE EXCEPTION 'items[%] must be an object {"sku": ..., "qty": ...}, got a JSON %',
                v_position, jsonb_typeof(v_item)
                USING ERRCODE = 'OT104';
        END IF;
        SELECT k INTO v_key FROM jsonb_object_keys(v_item) AS k WHERE k NOT IN ('sku', 'qty') LIMIT 1;
        IF v_key IS NOT NULL THEN
            RAISE EXCEPTION 'items[%] has unknown key "%" (allowed: sku, qty)', v_position, v_key
                USING ERRCODE = 'OT104';
        END IF;
        IF jsonb_typeof(v_item -> 'sku') IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION 'items[%].sku must be a string', v_position
                USING ERRCODE = 'OT104';
        END IF;
        v_sku := v_item ->> 'sku';
        IF NOT ordertimeout._is_plain_text(v_sku, 64) THEN
            RAISE EXCEPTION 'items[%].sku must be 1 to 64 characters without control, format or line-separator characters', v_position
                USING ERRCODE = 'OT104';
        END IF;
        IF NOT v_item ? 'qty' THEN
            RAISE EXCEPTION 'items[%].qty is missing', v_position
                USING ERRCODE = 'OT105';
        END IF;
        IF jsonb_typeof(v_item -> 'qty') <> 'number'
           OR (v_item ->> 'qty')::numeric <> trunc((v_item ->> 'qty')::numeric) THEN
            RAISE EXCEPTION 'items[%].qty must be an integer, got %', v_position, v_item -> 'qty'
                USING ERRCODE = 'OT105';
        END IF;
        v_qty := (v_item ->> 'qty')::numeric;
        IF v_qty < 1 OR v_qty > 1000000 THEN
            RAISE EXCEPTION 'items[%].qty must be between 1 and 1000000, got %', v_position, v_qty
                USING ERRCODE = 'OT106';
        END IF;
    END LOOP;

    SELECT e.value ->> 'sku' INTO v_dup
    FROM jsonb_array_elements(items) AS e
    GROUP BY 1
    HAVING count(*) > 1
    ORDER BY 1
    LIMIT 1;
    IF v_dup IS NOT NULL THEN
        RAISE EXCEPTION 'items lists sku "%" more than once', v_dup
            USING ERRCODE = 'OT107';
    END IF;

    SELECT jsonb_agg(
               jsonb_build_object('sku', e.value ->> 'sku', 'qty', (e.value ->> 'qty')::numeric::integer)
               ORDER BY e.value ->> 'sku')
    INTO v_result
    FROM jsonb_array_elements(items) AS e;
    RETURN v_result;
END
$$;

-- Validates create_order's options; returns them as given (NULL counts as {}).
CREATE OR REPLACE FUNCTION ordertimeout._normalize_options(options jsonb)
RETURNS jsonb
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_key text;
BEGIN
    IF options IS NULL THEN
        RETURN '{}'::jsonb;
    END IF;
    IF jsonb_typeof(options) <> 'object' THEN
        RAISE EXCEPTION 'options must be a JSON object, got a JSON %', jsonb_typeof(options)
            USING ERRCODE = 'OT114';
    END IF;
    SELECT k INTO v_key
    FROM jsonb_object_keys(options) AS k
    WHERE k NOT IN ('coupon', 'points_account', 'points', 'amount', 'currency', 'precheck', 'method')
    ORDER BY 1
    LIMIT 1;
    IF v_key IS NOT NULL THEN
        RAISE EXCEPTION 'options has unknown key "%" (allowed: coupon, points_account, points, amount, currency, precheck, method)', v_key
            USING ERRCODE = 'OT114';
    END IF;
    IF options ? 'coupon' AND (jsonb_typeof(options -> 'coupon') <> 'string'
                               OR NOT ordertimeout._is_plain_text(options ->> 'coupon', 64)) THEN
        RAISE EXCEPTION 'options.coupon must be a string of 1 to 64 characters without control, format or line-separator characters'
            USING ERRCODE = 'OT114';
    END IF;
    IF (options ? 'points_account') <> (options ? 'points') THEN
        RAISE EXCEPTION 'options.points and options.points_account must be given together'
            USING ERRCODE = 'OT114';
    END IF;
    IF options ? 'points_account' AND (jsonb_typeof(options -> 'points_account') <> 'string'
                                       OR NOT ordertimeout._is_plain_text(options ->> 'points_account', 64)) THEN
        RAISE EXCEPTION 'options.points_account must be a string of 1 to 64 characters without control, format or line-separator characters'
            USING ERRCODE = 'OT114';
    END IF;
    IF options ? 'points' AND (jsonb_typeof(options -> 'points') <> 'number'
                               OR (options ->> 'points')::numeric <> trunc((options ->> 'points')::numeric)
                               OR (options ->> 'points')::numeric NOT BETWEEN 1 AND 1000000000000) THEN
        RAISE EXCEPTION 'options.points must be an integer between 1 and 1000000000000, got %', options -> 'points'
            USING ERRCODE = 'OT114';
    END IF;
    IF options ? 'amount' THEN
        IF jsonb_typeof(options -> 'amount') <> 'number' THEN
            RAISE EXCEPTION 'options.amount must be a JSON number, got %', options -> 'amount'
                USING ERRCODE = 'OT126';
        END IF;
        PERFORM ordertimeout._check_amount('options.amount', (options ->> 'amount')::numeric);
    END IF;
    IF options ? 'currency' AND (jsonb_typeof(options -> 'currency') <> 'string'
                                 OR (options ->> 'currency') !~ '^[A-Z]{3}$') THEN
        RAISE EXCEPTION 'options.currency must be a three-letter ISO 4217 code such as "EUR", got %', options -> 'currency'
            USING ERRCODE = 'OT114';
    END IF;
    IF options ? 'method' AND jsonb_typeof(options -> 'method') <> 'string' THEN
        RAISE EXCEPTION 'options.method must be the name of a payment method, got %', options -> 'method'
            USING ERRCODE = 'OT160';
    END IF;
    IF options ? 'precheck' AND (jsonb_typeof(options -> 'precheck') <> 'string'
                                 OR (options ->> 'precheck') NOT IN ('attempted', 'always', 'never')) THEN
        RAISE EXCEPTION 'options.precheck must be "attempted", "always" or "never", got %', options -> 'precheck'
            USING ERRCODE = 'OT114';
    END IF;
    RETURN options;
END
$$;

-- Inserts a River job row and returns its id. Rows in queue
-- ordertimeout_expire are timers claimed by sweep_due; rows in queue
-- ordertimeout are worked by the sidecar's River client.
CREATE OR REPLACE FUNCTION ordertimeout._insert_job(kind text, args jsonb, queue text, scheduled_at timestamptz)
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

-- Deletes a timer row that can no longer act, unless a sweep holds it right
-- now (SKIP LOCKED: never wait for a sweep while holding an order row; the
-- sweep deletes the row itself, and the version check makes it harmless).
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
                     AND l.queue = 'ordertimeout_expire'
                     FOR UPDATE SKIP LOCKED);
END
$$;

-- Wakes the sleeping sweepers when a deadline comes before the moment they
-- planned to wake up (ordertimeout.plan_sleep). The payload is empty: the
-- deadline is in the table.
CREATE OR REPLACE FUNCTION ordertimeout._wake_if_sooner(cancel_at timestamptz)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF cancel_at < (SELECT s.wake_at FROM ordertimeout.sweep_state AS s) THEN
        PERFORM pg_notify('ordertimeout_wake', '');
    END IF;
END
$$;

-- Queues a webhook delivery per event (when webhooks are on).
CREATE OR REPLACE FUNCTION ordertimeout._enqueue_webhooks(event_ids bigint[])
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO public.river_job (kind, args, queue, state, scheduled_at)
    SELECT 'ordertimeout_webhook', jsonb_build_object('event_id', e.event_id, 'order_id', e.order_id),
           'ordertimeout', 'available', now()
    FROM ordertimeout.events AS e
    WHERE e.event_id = ANY (event_ids)
      AND (SELECT s.webhooks FROM ordertimeout.settings AS s);
END
$$;

-- Appends one event and returns its id.
CREATE OR REPLACE FUNCTION ordertimeout._log_event(
    order_id    text,
    from_status text,
    to_status   text,
    cause       text,
    at          timestamptz,
    detail      jsonb DEFAULT NULL,
    webhook     boolean DEFAULT false)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_event_id bigint;
BEGIN
    INSERT INTO ordertimeout.events (order_id, from_status, to_status, cause, actor, at, detail)
    VALUES (order_id, from_status, to_status, cause, ordertimeout._actor(), at, detail)
    RETURNING event_id INTO v_event_id;
    IF webhook THEN
        PERFORM ordertimeout._enqueue_webhooks(ARRAY[v_event_id]);
    END IF;
    RETURN v_event_id;
END
$$;

CREATE OR REPLACE FUNCTION ordertimeout._order_state(order_id text, created boolean)
RETURNS ordertimeout.order_state
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_state ordertimeout.order_state;
BEGIN
    SELECT
        o.order_id,
        o.status,
        _order_state.created,
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
        (SELECT jsonb_agg(jsonb_build_object('sku', i.sku, 'qty', i.qty) ORDER BY i.sku)
           FROM ordertimeout.order_items AS i
          WHERE i.order_id = o.order_id),
        o.coupon_id,
        o.points_account,
        o.points,
        o.payment_attempted,
        (SELECT count(*)::integer
           FROM ordertimeout.conflicts AS c
          WHERE c.order_id = o.order_id
            AND c.resolution IS NULL),
        o.payment_method,
        o.gateway_expire_at
    INTO v_state
    FROM ordertimeout.orders AS o
    WHERE o.order_id = _order_state.order_id;
    RETURN v_state;
END
$$;

-- Raises OT120 when the order does not exist.
CREATE OR REPLACE FUNCTION ordertimeout._require_order(order_id text)
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

-- ------------------------------------------------------------------
-- plpgsql/payment_methods.sql
-- ------------------------------------------------------------------

-- Returns the payment method named method, or raises OT160 naming field
-- when there is none.
CREATE OR REPLACE FUNCTION ordertimeout._payment_method(field text, method text)
RETURNS ordertimeout.payment_methods
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_row ordertimeout.payment_methods;
BEGIN
    SELECT m.* INTO v_row FROM ordertimeout.payment_methods AS m WHERE m.method = _payment_method.method;
    IF NOT FOUND THEN
        RAISE EXCEPTION '% "%" is not a known payment method (known: %)', field, left(_payment_method.method, 64),
            (SELECT string_agg(m.method, ', ' ORDER BY m.method) FROM ordertimeout.payment_methods AS m)
            USING ERRCODE = 'OT160';
    END IF;
    RETURN v_row;
END
$$;

CREATE OR REPLACE FUNCTION ordertimeout.put_payment_method(
    method        text,
    paying_window interval,
    gateway_close boolean DEFAULT true,
    late_payment  text DEFAULT NULL)
RETURNS ordertimeout.payment_methods
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_row ordertimeout.payment_methods;
BEGIN
    IF put_payment_method.method IS NULL THEN
        RAISE EXCEPTION 'method must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF put_payment_method.method !~ '^[a-z][a-z0-9_]{0,31}$' THEN
        RAISE EXCEPTION 'method must be 1 to 32 lower-case letters, digits or _, starting with a letter, got "%"',
            left(put_payment_method.method, 64)
            USING ERRCODE = 'OT161';
    END IF;
    IF put_payment_method.paying_window IS NULL THEN
        RAISE EXCEPTION 'paying_window must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    PERFORM ordertimeout._check_interval('paying_window', put_payment_method.paying_window, interval '30 days', 'OT162');
    IF put_payment_method.gateway_close IS NULL THEN
        RAISE EXCEPTION 'gateway_close must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF put_payment_method.late_payment NOT IN ('reinstate', 'refund', 'manual') THEN
        RAISE EXCEPTION 'late_payment must be "reinstate", "refund", "manual" or NULL (settings.late_payment), got "%"',
            left(put_payment_method.late_payment, 32)
            USING ERRCODE = 'OT163';
    END IF;

    INSERT INTO ordertimeout.payment_methods AS m (method, paying_window, gateway_close, late_payment)
    VALUES (put_payment_method.method, put_payment_method.paying_window, put_payment_method.gateway_close,
            put_payment_method.late_payment)
    ON CONFLICT ON CONSTRAINT payment_methods_pkey DO UPDATE
    SET paying_window = excluded.paying_window,
        gateway_close = excluded.gateway_close,
        late_payment = excluded.late_payment
    RETURNING m.* INTO v_row;
    RETURN v_row;
END
$$;

COMMENT ON FUNCTION ordertimeout.put_payment_method(text, interval, boolean, text) IS
    'creates or changes a payment method: its paying window (at most 30 days), whether a cancel closes the payment at the gateway, and its late-payment policy (NULL: settings.late_payment); safe to repeat';

-- ------------------------------------------------------------------
-- plpgsql/reconcile.sql
-- ------------------------------------------------------------------

-- Reconciliation against the gateway's records. The caller (any language;
-- `ordertimeout reconcile` parses CSV files and the sidecar asks the gateway)
-- passes the gateway's transactions of a period as JSON:
--
--   [{"payment_id": "P1", "order_id": "A1", "amount": "12.50", "currency": "EUR",
--     "status": "paid" | "refunded", "at": "2026-12-01T10:00:00Z", "line": 2}, ...]
--
-- ("line", optional, is the caller's line number, named in errors and in the
-- report). The call is applied whole or not at all: every row is checked
-- first, and a bad row raises OT171 naming its line and field, with nothing
-- written. Running the same transactions again changes nothing.

-- The decimal grammar of amounts in gateway records: digits, an optional
-- fraction; as a JSON number or a string.
CREATE OR REPLACE FUNCTION ordertimeout._parse_amount(value jsonb)
RETURNS numeric
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_text text;
BEGIN
    IF jsonb_typeof(value) NOT IN ('number', 'string') THEN
        RETURN NULL;
    END IF;
    v_text := value #>> '{}';
    IF v_text !~ '^(0|[1-9][0-9]{0,14})(\.[0-9]{1,6})?$' THEN
        RETURN NULL;
    END IF;
    RETURN v_text::numeric;
END
$$;

-- The gateway's timestamps: ISO 8601 with a zone; NULL when not one.
CREATE OR REPLACE FUNCTION ordertimeout._parse_time(value jsonb)
RETURNS timestamptz
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF jsonb_typeof(value) <> 'string'
       OR (value #>> '{}') !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,6})?)?(Z|[+-][0-9]{2}(:?[0-9]{2})?)$' THEN
        RETURN NULL;
    END IF;
    RETURN (value #>> '{}')::timestamptz;
EXCEPTION
    WHEN datetime_field_overflow OR invalid_datetime_format THEN
        RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION ordertimeout.reconcile_payments(
    transactions   jsonb,
    period_start   timestamptz,
    period_end     timestamptz,
    report_missing boolean DEFAULT true,
    source         text DEFAULT NULL)
RETURNS TABLE (
    line       integer,
    payment_id text,
    order_id   text,
    outcome    text,
    detail     text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_row      record;
    v_rows     jsonb := '[]';
    v_line     integer;
    v_key      text;
    v_amount   numeric;
    v_at       timestamptz;
    v_dup      text;
    v_pay      ordertimeout.payments;
    v_order    ordertimeout.orders;
    v_result   text;
    v_kind     text;
BEGIN
    IF reconcile_payments.transactions IS NULL THEN
        RAISE EXCEPTION 'transactions must not be null' USING ERRCODE = 'OT100';
    END IF;
    IF reconcile_payments.period_start IS NULL OR reconcile_payments.period_end IS NULL
       OR reconcile_payments.report_missing IS NULL THEN
        RAISE EXCEPTION 'period_start, period_end and report_missing must not be null' USING ERRCODE = 'OT100';
    END IF;
    IF jsonb_typeof(reconcile_payments.transactions) <> 'array' THEN
        RAISE EXCEPTION 'transactions must be a JSON array of gateway transactions, got a JSON %',
            jsonb_typeof(reconcile_payments.transactions)
            USING ERRCODE = 'OT170';
    END IF;
    IF jsonb_array_length(reconcile_payments.transactions) > 100000 THEN
        RAISE EXCEPTION 'transactions has % rows: at most 100000 per call (split the file by period)',
            jsonb_array_length(reconcile_payments.transactions)
            USING ERRCODE = 'OT170';
    END IF;
    IF NOT (reconcile_payments.period_start < reconcile_payments.period_end)
       OR reconcile_payments.period_end - reconcile_payments.period_start > interval '400 days' THEN
        RAISE EXCEPTION 'the period must start before it ends and span at most 400 days, got % to %',
            reconcile_payments.period_start, reconcile_payments.period_end
            USING ERRCODE = 'OT172';
    END IF;
    IF reconcile_payments.source IS NOT NULL AND reconcile_payments.source !~ '^[a-z][a-z0-9_:.-]{0,63}$' THEN
        RAISE EXCEPTION 'source must be 1 to 64 characters a-z, 0-9, _ : . -, starting with a letter, got "%"',
            left(reconcile_payments.source, 64)
            USING ERRCODE = 'OT173';
    END IF;

    -- 1. Check every row before writing anything.
    FOR v_row IN SELECT e.value, e.ordinality::integer AS n
                   FROM jsonb_array_elements(reconcile_payments.transactions) WITH ORDINALITY AS e LOOP
        v_line := v_row.n;
        IF jsonb_typeof(v_row.value) <> 'object' THEN
            RAISE EXCEPTION 'line %: a transaction must be a JSON object, got a JSON %', v_line, jsonb_typeof(v_row.value)
                USING ERRCODE = 'OT171';
        END IF;
        IF v_row.value ? 'line' THEN
            IF jsonb_typeof(v_row.value -> 'line') <> 'number' OR (v_row.value ->> 'line') !~ '^[0-9]{1,9}$' THEN
                RAISE EXCEPTION 'line %: line must be a positive integer', v_line USING ERRCODE = 'OT171';
            END IF;
            v_line := (v_row.value ->> 'line')::integer;
        END IF;
        SELECT k INTO v_key FROM jsonb_object_keys(v_row.value) AS k
         WHERE k NOT IN ('payment_id', 'order_id', 'amount', 'currency', 'status', 'at', 'line') ORDER BY 1 LIMIT 1;
        IF v_key IS NOT NULL THEN
            RAISE EXCEPTION 'line %: unknown field "%" (allowed: payment_id, order_id, amount, currency, status, at, line)',
                v_line, left(v_key, 64) USING ERRCODE = 'OT171';
        END IF;
        IF jsonb_typeof(v_row.value -> 'payment_id') IS DISTINCT FROM 'string'
           OR NOT ordertimeout._is_identifier(v_row.value ->> 'payment_id', 128) THEN
            RAISE EXCEPTION 'line %: payment_id must be an id of 1 to 128 characters', v_line USING ERRCODE = 'OT171';
        END IF;
        IF jsonb_typeof(v_row.value -> 'order_id') IS DISTINCT FROM 'string'
           OR NOT ordertimeout._is_identifier(v_row.value ->> 'order_id', 64) THEN
            RAISE EXCEPTION 'line %: order_id must be an id of 1 to 64 characters', v_line USING ERRCODE = 'OT171';
        END IF;
        v_amount := ordertimeout._parse_amount(v_row.value -> 'amount');
        IF v_amount IS NULL THEN
            RAISE EXCEPTION 'line %: amount must be a decimal number from 0 to below 10^15 with at most 6 decimals, got %',
                v_line, left(coalesce(v_row.value ->> 'amount', 'nothing'), 40) USING ERRCODE = 'OT171';
        END IF;
        IF jsonb_typeof(v_row.value -> 'currency') IS DISTINCT FROM 'string'
           OR (v_row.value ->> 'currency') !~ '^[A-Z]{3}$' THEN
            RAISE EXCEPTION 'line %: currency must be three upper-case letters (ISO 4217)', v_line USING ERRCODE = 'OT171';
        END IF;
        IF (v_row.value ->> 'status') IS DISTINCT FROM 'paid' AND (v_row.value ->> 'status') IS DISTINCT FROM 'refunded'
           OR jsonb_typeof(v_row.value -> 'status') <> 'string' THEN
            RAISE EXCEPTION 'line %: status must be "paid" or "refunded"', v_line USING ERRCODE = 'OT171';
        END IF;
        v_at := ordertimeout._parse_time(v_row.value -> 'at');
        IF v_at IS NULL THEN
            RAISE EXCEPTION 'line %: at must be an ISO 8601 time with a zone, such as 2026-12-01T10:00:00Z', v_line
                USING ERRCODE = 'OT171';
        END IF;
        v_rows := v_rows || jsonb_build_array(jsonb_build_object(
            'line', v_line, 'payment_id', v_row.value ->> 'payment_id', 'order_id', v_row.value ->> 'order_id',
            'amount', v_amount, 'currency', v_row.value ->> 'currency', 'status', v_row.value ->> 'status', 'at', v_at));
    END LOOP;
    SELECT format('line %s: payment %s is %s twice in the transactions', max((r ->> 'line')::integer),
                  r ->> 'payment_id', r ->> 'status')
    INTO v_dup
    FROM jsonb_array_elements(v_rows) AS r
    GROUP BY r ->> 'payment_id', r ->> 'status'
    HAVING count(*) > 1
    LIMIT 1;
    IF v_dup IS NOT NULL THEN
        RAISE EXCEPTION '%', v_dup USING ERRCODE = 'OT171';
    END IF;

    -- 2. Each gateway transaction against what this database knows.
    FOR v_row IN SELECT r AS value FROM jsonb_array_elements(v_rows) AS r ORDER BY (r ->> 'line')::integer LOOP
        line := (v_row.value ->> 'line')::integer;
        payment_id := v_row.value ->> 'payment_id';
        order_id := v_row.value ->> 'order_id';
        detail := NULL;
        v_amount := (v_row.value ->> 'amount')::numeric;
        SELECT p.* INTO v_pay FROM ordertimeout.payments AS p WHERE p.payment_id = reconcile_payments.payment_id;
        SELECT o.* INTO v_order FROM ordertimeout.orders AS o WHERE o.order_id = reconcile_payments.order_id;
        IF v_order.order_id IS NULL THEN
            outcome := 'unknown_order';
            detail := 'the gateway has a transaction for an order this database does not know';
        ELSIF v_pay.payment_id IS NOT NULL AND v_pay.order_id <> order_id THEN
            outcome := 'other_order';
            detail := format('payment %s belongs to order %s here', v_pay.payment_id, v_pay.order_id);
        ELSIF v_row.value ->> 'status' = 'refunded' THEN
            IF v_pay.status = 'refunded' THEN
                outcome := 'ok';
            ELSE
                outcome := 'refund_unknown';
                detail := format('refunded at the gateway; here the payment is %s', coalesce(v_pay.status, 'unknown'));
            END IF;
        ELSIF v_pay.status = 'confirmed' THEN
            IF v_pay.amount IS NULL THEN
                outcome := 'ok';
                detail := format('confirmed here without an amount; the gateway settled %s %s',
                                 v_amount, v_row.value ->> 'currency');
            ELSIF v_pay.amount = v_amount AND v_pay.currency IS NOT DISTINCT FROM (v_row.value ->> 'currency') THEN
                outcome := 'ok';
            ELSE
                outcome := 'amount_differs';
                detail := format('paid here %s %s, at the gateway %s %s', v_pay.amount, coalesce(v_pay.currency, ''),
                                 v_amount, v_row.value ->> 'currency');
            END IF;
        ELSIF v_pay.status IN ('late', 'refunded') THEN
            outcome := 'known_conflict';
        ELSE
            -- Money this database has not seen: a lost callback. Confirm it
            -- as a callback would have, with cause reconcile.
            v_result := ordertimeout._confirm_payment(order_id, payment_id, v_amount, v_row.value ->> 'currency',
                                                      'reconcile');
            IF v_result = 'paid' THEN
                outcome := 'confirmed';
                detail := 'paid at the gateway without a callback: now PAID';
            ELSE
                SELECT c.kind INTO v_kind FROM ordertimeout.conflicts AS c WHERE c.payment_id = reconcile_payments.payment_id;
                outcome := v_kind;
                detail := 'paid at the gateway without a callback: recorded as a conflict (cause reconcile)';
            END IF;
        END IF;
        RETURN NEXT;
    END LOOP;

    -- 3. Payments confirmed here in the period that the gateway does not list.
    IF reconcile_payments.report_missing THEN
        RETURN QUERY
        SELECT NULL::integer, p.payment_id, p.order_id, 'missing_at_gateway'::text,
               format('confirmed here at %s; the gateway lists no such payment', p.confirmed_at)
        FROM ordertimeout.payments AS p
        WHERE p.status = 'confirmed'
          AND p.confirmed_at >= reconcile_payments.period_start
          AND p.confirmed_at < reconcile_payments.period_end
          AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(v_rows) AS r
                           WHERE r ->> 'payment_id' = p.payment_id AND r ->> 'status' = 'paid')
        ORDER BY p.confirmed_at, p.payment_id;
    END IF;

    IF reconcile_payments.source IS NOT NULL THEN
        INSERT INTO ordertimeout.reconcile_watermarks AS w (source, watermark, updated_at)
        VALUES (reconcile_payments.source, reconcile_payments.period_end, clock_timestamp())
        ON CONFLICT ON CONSTRAINT reconcile_watermarks_pkey DO UPDATE
        SET watermark = greatest(w.watermark, excluded.watermark),
            updated_at = excluded.updated_at;
    END IF;
END
$$;

COMMENT ON FUNCTION ordertimeout.reconcile_payments(jsonb, timestamptz, timestamptz, boolean, text) IS
    'reconciles the gateway''s transactions of a period, all or nothing: each row ok, confirmed (a lost callback on a live order, now PAID), a new conflict (late_payment, double_payment, amount_mismatch; cause reconcile), known_conflict, amount_differs, refund_unknown, unknown_order or other_order; with report_missing, payments confirmed here in the period that the gateway does not list (missing_at_gateway); with source, advances its watermark to period_end. Running it again changes nothing';

CREATE OR REPLACE FUNCTION ordertimeout.reconcile_watermark(source text)
RETURNS timestamptz
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT w.watermark FROM ordertimeout.reconcile_watermarks AS w WHERE w.source = reconcile_watermark.source);
END
$$;

COMMENT ON FUNCTION ordertimeout.reconcile_watermark(text) IS
    'the end of the last period reconciled for source (NULL: never)';

-- ------------------------------------------------------------------
-- plpgsql/release.sql
-- ------------------------------------------------------------------

-- What happens to an order's reservations: released on cancel (through the
-- ledger), consumed on payment, reclaimed when a late payment reinstates it.
--
-- Lock order, the same in every function: timer rows, then order rows, then
-- stock rows sorted by sku, then points accounts sorted by account. Concurrent
-- sweeps and payments therefore never deadlock on stock.

-- Releases stock, coupons and points of the given orders, each at most once:
-- the ledger's primary key admits one release per (order, kind, resource) and
-- only what the ledger admitted goes back.
CREATE OR REPLACE FUNCTION ordertimeout._release(order_ids text[], causes text[], at timestamptz)
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
CREATE OR REPLACE FUNCTION ordertimeout._consume(order_id text, at timestamptz)
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
CREATE OR REPLACE FUNCTION ordertimeout._reclaim(order_id text, at timestamptz)
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

-- ------------------------------------------------------------------
-- plpgsql/create_order.sql
-- ------------------------------------------------------------------

-- The single-order API functions (create_order, begin/confirm/fail_payment,
-- cancel_order, extend_deadline, cancel_checked, resolve_conflict) run with
-- plan_cache_mode = force_generic_plan, nested helpers included. Their
-- statements touch one order and a few SKUs by primary key, so the generic
-- plan is the right one; left to choose, PostgreSQL keeps re-planning the
-- statements over unnest(...) or = ANY (...) on every call (a custom plan
-- estimated cheaper than the generic one), which cost about a third of
-- create_order's time.
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
        create_order.order_id, 'PENDING', v_now, v_expire, v_cancel, nextval('public.river_job_id_seq'),
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
    INSERT INTO public.river_job (id, kind, args, queue, state, scheduled_at)
    VALUES (v_job_id, 'ordertimeout_expire',
            jsonb_build_object('order_id', create_order.order_id, 'version', 1),
            'ordertimeout_expire', 'available', v_cancel);

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

-- ------------------------------------------------------------------
-- plpgsql/payments.sql
-- ------------------------------------------------------------------

-- PAYING -> PENDING once no payment attempt is in flight any more: the
-- order's own timeout applies again, with a new timer row for the new version
-- (due at once if cancel_at has passed). Returns false while another attempt
-- is still started.
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
        timer_job_id = nextval('public.river_job_id_seq'),
        check_job_id = NULL
    WHERE o.order_id = _back_to_pending.order_id
      AND o.status = 'PAYING'
    RETURNING o.deadline_version, o.timer_job_id, o.cancel_at INTO v_version, v_job_id, v_cancel;
    IF NOT FOUND THEN
        RETURN false;
    END IF;

    INSERT INTO public.river_job (id, kind, args, queue, state, scheduled_at)
    VALUES (v_job_id, 'ordertimeout_expire',
            jsonb_build_object('order_id', _back_to_pending.order_id, 'version', v_version),
            'ordertimeout_expire', 'available', v_cancel);
    PERFORM ordertimeout._log_event(_back_to_pending.order_id, 'PAYING', 'PENDING', 'payment',
        _back_to_pending.at, _back_to_pending.detail);
    PERFORM ordertimeout._wake_if_sooner(v_cancel);
    RETURN true;
END
$$;

-- The paying window is the call's, else the payment method's (the call's
-- method, else the order's), else settings.paying_window. The gateway must
-- enforce gateway_expire_at = now + window: the shop passes that moment to
-- the gateway as the payment's expiry, so both clocks agree. The payment
-- check runs at paying_until = gateway_expire_at + grace, and the order's
-- cancel_at is moved to at least that moment too: ordertimeout never cancels
-- an order while the gateway may still take its money.
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
    FROM ordertimeout.orders AS o
    WHERE o.order_id = begin_payment.order_id
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'order_id "%" is unknown', begin_payment.order_id
            USING ERRCODE = 'OT120';
    END IF;

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

-- Money is exact: an order with an amount (and currency) is PAID only by a
-- payment of that amount in that currency. Any other payment is a conflict
-- of kind amount_mismatch, on a live order as on a cancelled one. A payment
-- without an amount (an app caller that does not know it) pays an order with
-- an amount, recorded as unverified in the event; the sidecar never confirms
-- such an order without the gateway's amount. A payment without a currency
-- is in the order's currency.
-- The one implementation of confirm_payment; cause is the events' and a new
-- conflict's cause: payment (a callback, a gateway check) or reconcile (found
-- in the gateway's records).
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
    FROM ordertimeout.orders AS o
    WHERE o.order_id = _confirm_payment.order_id
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'order_id "%" is unknown', _confirm_payment.order_id
            USING ERRCODE = 'OT120';
    END IF;

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

CREATE OR REPLACE FUNCTION ordertimeout.confirm_payment(
    order_id   text,
    payment_id text,
    amount     numeric DEFAULT NULL,
    currency   text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN ordertimeout._confirm_payment(confirm_payment.order_id, confirm_payment.payment_id,
                                         confirm_payment.amount, confirm_payment.currency, 'payment');
END
$$;

COMMENT ON FUNCTION ordertimeout.confirm_payment(text, text, numeric, text) IS
    'PENDING/PAYING -> PAID by a payment of the order''s exact amount and currency (returns paid); money the order cannot take (cancelled, already paid, wrong amount or currency) is recorded as a conflict with a wake-up (returns conflict); a repeat returns the same answer and writes nothing';

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

    SELECT o.status INTO v_status
    FROM ordertimeout.orders AS o
    WHERE o.order_id = fail_payment.order_id
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'order_id "%" is unknown', fail_payment.order_id
            USING ERRCODE = 'OT120';
    END IF;

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

-- ------------------------------------------------------------------
-- plpgsql/cancel.sql
-- ------------------------------------------------------------------

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

    SELECT o.timer_job_id INTO v_timer
    FROM ordertimeout.orders AS o
    WHERE o.order_id = cancel_order.order_id
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'order_id "%" is unknown', cancel_order.order_id
            USING ERRCODE = 'OT120';
    END IF;

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
    FROM ordertimeout.orders AS o
    WHERE o.order_id = extend_deadline.order_id
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'order_id "%" is unknown', extend_deadline.order_id
            USING ERRCODE = 'OT120';
    END IF;

    -- A new version: the old timer row (and any gateway check in flight) can
    -- no longer act on this order.
    UPDATE ordertimeout.orders AS o
    SET expire_at = o.expire_at + extend_deadline.by,
        cancel_at = o.cancel_at + extend_deadline.by,
        deadline_version = o.deadline_version + 1,
        timer_job_id = nextval('public.river_job_id_seq'),
        check_job_id = NULL
    WHERE o.order_id = extend_deadline.order_id
      AND o.status = 'PENDING'
    RETURNING o.deadline_version, o.timer_job_id, o.expire_at, o.cancel_at
    INTO v_version, v_job_id, v_expire, v_cancel;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'order "%" is %: only a PENDING order can be given more time', extend_deadline.order_id, v_status
            USING ERRCODE = 'OT123';
    END IF;

    INSERT INTO public.river_job (id, kind, args, queue, state, scheduled_at)
    VALUES (v_job_id, 'ordertimeout_expire',
            jsonb_build_object('order_id', extend_deadline.order_id, 'version', v_version),
            'ordertimeout_expire', 'available', v_cancel);
    PERFORM ordertimeout._drop_timer(v_timer);
    PERFORM ordertimeout._log_event(extend_deadline.order_id, 'PENDING', 'PENDING', 'requested', v_now,
        jsonb_build_object('extended_by_seconds', extract(epoch FROM extend_deadline.by), 'expire_at', v_expire));
    PERFORM ordertimeout._wake_if_sooner(v_cancel);

    RETURN ordertimeout._order_state(extend_deadline.order_id, false);
END
$$;

COMMENT ON FUNCTION ordertimeout.extend_deadline(text, interval) IS
    'gives a PENDING order more time; bumps its deadline version so its old timer cannot act (fencing)';

CREATE OR REPLACE FUNCTION ordertimeout.close_cancelled(
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
    IF close_cancelled.older_than < interval '0' OR close_cancelled.older_than > interval '100 years' THEN
        RAISE EXCEPTION 'older_than must be between 0 and 100 years, got %', close_cancelled.older_than
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

-- ------------------------------------------------------------------
-- plpgsql/sweep.sql
-- ------------------------------------------------------------------

-- Whether args, the args of a timer row, are what the timers of
-- create_order and friends carry: {"order_id": <text>, "version": <integer>}.
CREATE OR REPLACE FUNCTION ordertimeout._is_timer_args(args jsonb)
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
CREATE OR REPLACE FUNCTION ordertimeout._discard_malformed_timers(job_ids bigint[], at timestamptz)
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
                            left(r.args::text, 200)),
            'trace', ''))
    WHERE r.id = ANY (_discard_malformed_timers.job_ids);
END
$$;

-- The in-database sweep: claims due timer rows with FOR UPDATE SKIP LOCKED and
-- cancels their orders set-based, in one transaction. Any number of sessions
-- may run it at once; each due order is cancelled by exactly one of them.
-- plan_cache_mode = force_custom_plan holds for the nested helpers too: a
-- batch of a thousand orders always gets a plan made for its arrays, while
-- single-order callers of the same helpers (cancel_order, cancel_checked)
-- run with generic plans (see create_order.sql).
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
    v_now       timestamptz := clock_timestamp();
    v_precheck  text;
    v_job_ids   bigint[];
    v_ids       text[];
    v_versions  integer[];
    v_lost_ids  text[] := '{}';
    v_lost_vers integer[] := '{}';
    v_bad_ids   bigint[];
    v_causes    text[];
    v_timers    integer;
    v_lost      integer;
    v_cancelled integer;
    v_caught    integer;
    v_checks    integer;
    v_rescued_payments integer := 0;
    v_paused    boolean;
BEGIN
    PERFORM ordertimeout._check_max(sweep_due.max);
    SELECT s.precheck, s.paused INTO v_precheck, v_paused FROM ordertimeout.settings AS s;
    -- Paused (configure(paused => true)): the timers stay, nothing is claimed.
    IF v_paused THEN
        RETURN QUERY SELECT 0, 0, 0, 0, 0;
        RETURN;
    END IF;

    -- 1. Due timer rows (River's fetch index: state, queue, priority, scheduled_at).
    -- A row whose args are not {"order_id": text, "version": integer} is
    -- claimed too but only set aside below: one malformed row must not stop
    -- every sweep.
    SELECT coalesce(array_agg(j.id) FILTER (WHERE j.valid), '{}'),
           coalesce(array_agg(j.args ->> 'order_id') FILTER (WHERE j.valid), '{}'),
           coalesce(array_agg(CASE WHEN j.valid THEN (j.args ->> 'version')::integer END) FILTER (WHERE j.valid), '{}'),
           coalesce(array_agg(j.id) FILTER (WHERE NOT j.valid), '{}')
    INTO v_job_ids, v_ids, v_versions, v_bad_ids
    FROM (SELECT r.id, r.args, ordertimeout._is_timer_args(r.args) AS valid
            FROM public.river_job AS r
           WHERE r.state = 'available'
             AND r.queue = 'ordertimeout_expire'
             AND r.priority = 1
             AND r.scheduled_at <= v_now
           ORDER BY r.scheduled_at, r.id
           LIMIT sweep_due.max
             FOR UPDATE SKIP LOCKED) AS j;
    v_timers := cardinality(v_job_ids);
    IF cardinality(v_bad_ids) > 0 THEN
        PERFORM ordertimeout._discard_malformed_timers(v_bad_ids, v_now);
    END IF;

    -- 2. The fallback: PENDING orders past cancel_at whose timer row is gone.
    -- Run only when the timer rows did not fill the batch, so a backlog is
    -- never scanned twice; orders whose timer another session holds still
    -- have their row and are skipped.
    IF v_timers < sweep_due.max THEN
        SELECT coalesce(array_agg(l.order_id), '{}'), coalesce(array_agg(l.deadline_version), '{}')
        INTO v_lost_ids, v_lost_vers
        FROM (SELECT o.order_id, o.deadline_version
                FROM ordertimeout.orders AS o
               WHERE o.status = 'PENDING'
                 AND o.check_job_id IS NULL
                 AND o.cancel_at <= v_now
                 AND NOT EXISTS (SELECT 1
                                   FROM public.river_job AS r
                                  WHERE r.id = o.timer_job_id
                                    AND r.finalized_at IS NULL)
               ORDER BY o.cancel_at
               LIMIT sweep_due.max - v_timers
                 FOR NO KEY UPDATE SKIP LOCKED) AS l;
    END IF;
    v_lost := cardinality(v_lost_ids);

    -- 3. At most every 10 seconds, and only in a session that is not busy
    -- with a backlog: orders whose gateway-check job River lost (discarded,
    -- cancelled, deleted) are caught like lost timers; PAYING orders whose
    -- payment check was lost get a new one.
    IF v_timers + v_lost < sweep_due.max THEN
        PERFORM 1
        FROM ordertimeout.rescue_state AS s
        WHERE s.rescued_at <= v_now - interval '10 seconds'
        FOR UPDATE SKIP LOCKED;
        IF FOUND THEN
            UPDATE ordertimeout.rescue_state SET rescued_at = v_now;

            WITH stuck AS (
                SELECT o.order_id
                FROM ordertimeout.orders AS o
                WHERE o.status = 'PENDING'
                  AND o.check_job_id IS NOT NULL
                  AND o.cancel_at <= v_now
                  AND NOT EXISTS (SELECT 1
                                    FROM public.river_job AS r
                                   WHERE r.id = o.check_job_id
                                     AND r.finalized_at IS NULL)
                ORDER BY o.cancel_at
                LIMIT sweep_due.max - v_timers - v_lost
                FOR NO KEY UPDATE SKIP LOCKED
            ), rescued AS (
                UPDATE ordertimeout.orders AS o
                SET check_job_id = NULL
                FROM stuck
                WHERE o.order_id = stuck.order_id
                RETURNING o.order_id, o.deadline_version
            )
            SELECT v_lost_ids || coalesce(array_agg(r.order_id), '{}'),
                   v_lost_vers || coalesce(array_agg(r.deadline_version), '{}')
            INTO v_lost_ids, v_lost_vers
            FROM rescued AS r;
            v_lost := cardinality(v_lost_ids);

            WITH stuck AS (
                SELECT o.order_id
                FROM ordertimeout.orders AS o
                WHERE o.status = 'PAYING'
                  AND o.paying_until <= v_now
                  AND NOT EXISTS (SELECT 1
                                    FROM public.river_job AS r
                                   WHERE r.id = o.timer_job_id
                                     AND r.finalized_at IS NULL)
                ORDER BY o.paying_until
                LIMIT sweep_due.max
                FOR NO KEY UPDATE SKIP LOCKED
            ), rescued AS (
                UPDATE ordertimeout.orders AS o
                SET timer_job_id = nextval('public.river_job_id_seq')
                FROM stuck
                WHERE o.order_id = stuck.order_id
                RETURNING o.order_id, o.timer_job_id
            )
            INSERT INTO public.river_job (id, kind, args, queue, state, scheduled_at)
            SELECT r.timer_job_id, 'ordertimeout_payment_check',
                   jsonb_build_object('order_id', r.order_id, 'payment_id',
                       (SELECT p.payment_id
                          FROM ordertimeout.payments AS p
                         WHERE p.order_id = r.order_id
                           AND p.status = 'started'
                         ORDER BY p.started_at DESC
                         LIMIT 1)),
                   'ordertimeout', 'available', v_now
            FROM rescued AS r;
            GET DIAGNOSTICS v_rescued_payments = ROW_COUNT;
        END IF;
    END IF;

    v_ids := v_ids || v_lost_ids;
    v_versions := v_versions || v_lost_vers;
    v_causes := array_fill('timeout'::text, ARRAY[v_timers]) || array_fill('sweep'::text, ARRAY[v_lost]);

    -- 4. Orders whose policy wants the gateway asked first get a check job
    -- (worked by the sidecar) instead of a cancel.
    WITH checking AS (
        UPDATE ordertimeout.orders AS o
        SET check_job_id = nextval('public.river_job_id_seq'),
            timer_job_id = NULL
        FROM unnest(v_ids, v_versions) AS t(order_id, version)
        WHERE o.order_id = t.order_id
          AND o.status = 'PENDING'
          AND o.deadline_version = t.version
          AND o.check_job_id IS NULL
          AND CASE coalesce(o.precheck, v_precheck)
                  WHEN 'always' THEN true
                  WHEN 'never' THEN false
                  ELSE o.payment_attempted
              END
        RETURNING o.order_id, o.check_job_id, o.deadline_version
    )
    INSERT INTO public.river_job (id, kind, args, queue, state, scheduled_at)
    SELECT c.check_job_id, 'ordertimeout_precancel_check',
           jsonb_build_object('order_id', c.order_id, 'version', c.deadline_version),
           'ordertimeout', 'available', v_now
    FROM checking AS c;
    GET DIAGNOSTICS v_checks = ROW_COUNT;

    -- 5. Every claimed timer row has done its work or can no longer act.
    DELETE FROM public.river_job AS r WHERE r.id = ANY (v_job_ids);

    -- 6. Cancel and release the rest, set-based. Last, because releasing
    -- locks the batch's stock rows until the commit.
    SELECT count(*), count(*) FILTER (WHERE c.cancelled_cause = 'sweep')
    INTO v_cancelled, v_caught
    FROM ordertimeout._cancel_orders(v_ids, v_versions, v_causes, NULL, true) AS c;

    RETURN QUERY SELECT v_timers + v_lost + cardinality(v_bad_ids), v_cancelled, v_lost, v_checks + v_rescued_payments,
                        v_timers + v_lost + cardinality(v_bad_ids) - v_cancelled - v_checks;
END
$$;

COMMENT ON FUNCTION ordertimeout.sweep_due(integer) IS
    'claims up to max due timeouts (FOR UPDATE SKIP LOCKED) and cancels them in one transaction; also catches PENDING orders past cancel_at whose timer row or gateway-check job was lost, and re-queues lost payment checks of PAYING orders (at most every 10 s); returns claimed, cancelled, caught_by_sweep (lost timers found), checks (gateway checks queued), moot (timer rows that could no longer act)';

CREATE OR REPLACE FUNCTION ordertimeout.cancel_due(max integer DEFAULT 1000)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT s.cancelled FROM ordertimeout.sweep_due(cancel_due.max) AS s);
END
$$;

COMMENT ON FUNCTION ordertimeout.cancel_due(integer) IS
    'cancels up to max due orders in one transaction and returns how many; safe from any number of sessions at once; runnable from pg_cron';

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
           CASE WHEN CASE coalesce(d.precheck, v_precheck)
                         WHEN 'always' THEN true
                         WHEN 'never' THEN false
                         ELSE d.payment_attempted
                     END
                THEN 'check' ELSE 'cancel' END
    FROM (
        (SELECT o.order_id, o.cancel_at, o.deadline_version, 'timer'::text AS found_by, o.precheck, o.payment_attempted
           FROM public.river_job AS r
           JOIN ordertimeout.orders AS o
             ON ordertimeout._is_timer_args(r.args)
            AND o.order_id = r.args ->> 'order_id'
            AND o.deadline_version = (CASE WHEN ordertimeout._is_timer_args(r.args)
                                           THEN (r.args ->> 'version')::integer END)
            AND o.status = 'PENDING'
            AND o.check_job_id IS NULL
          WHERE r.state = 'available'
            AND r.queue = 'ordertimeout_expire'
            AND r.priority = 1
            AND r.scheduled_at <= v_now
          ORDER BY r.scheduled_at
          LIMIT preview_due.max)
        UNION ALL
        (SELECT o.order_id, o.cancel_at, o.deadline_version, 'sweep'::text, o.precheck, o.payment_attempted
           FROM ordertimeout.orders AS o
          WHERE o.status = 'PENDING'
            AND o.check_job_id IS NULL
            AND o.cancel_at <= v_now
            AND NOT EXISTS (SELECT 1
                              FROM public.river_job AS r
                             WHERE r.id = o.timer_job_id
                               AND r.finalized_at IS NULL)
          ORDER BY o.cancel_at
          LIMIT preview_due.max)
    ) AS d
    ORDER BY d.cancel_at, d.order_id
    LIMIT preview_due.max;
END
$$;

COMMENT ON FUNCTION ordertimeout.preview_due(integer) IS
    'dry run of sweep_due: the orders it would cancel (action cancel) or hand to a gateway check (action check) now, found by their timer row or by the fallback sweep; changes nothing';

-- For the sidecar's gateway check: cancels the order as a timeout if it is
-- still PENDING at the version the check was made for.
CREATE OR REPLACE FUNCTION ordertimeout.cancel_checked(
    order_id         text,
    deadline_version integer)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_cancelled boolean;
    v_paused_at timestamptz;
BEGIN
    PERFORM ordertimeout._require_order(cancel_checked.order_id);
    IF cancel_checked.deadline_version IS NULL THEN
        RAISE EXCEPTION 'deadline_version must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    SELECT s.paused_at INTO v_paused_at FROM ordertimeout.settings AS s WHERE s.paused;
    IF FOUND THEN
        RAISE EXCEPTION 'timeout cancels are paused (since %): ask again after configure(paused => false)', v_paused_at
            USING ERRCODE = 'OT137';
    END IF;
    SELECT count(*) > 0 INTO v_cancelled
    FROM ordertimeout._cancel_orders(ARRAY[cancel_checked.order_id], ARRAY[cancel_checked.deadline_version],
                                     ARRAY['timeout'], 'gateway check: not paid', false);
    RETURN v_cancelled;
END
$$;

COMMENT ON FUNCTION ordertimeout.cancel_checked(text, integer) IS
    'for the sidecar: after the gateway said the order is not paid, cancels it as a timeout if it is still PENDING at deadline_version';

CREATE OR REPLACE FUNCTION ordertimeout.next_due()
RETURNS timestamptz
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT r.scheduled_at
              FROM public.river_job AS r
             WHERE r.state = 'available'
               AND r.queue = 'ordertimeout_expire'
               AND r.priority = 1
             ORDER BY r.scheduled_at
             LIMIT 1);
END
$$;

COMMENT ON FUNCTION ordertimeout.next_due() IS 'when the earliest timer row comes due (NULL when there is none)';

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
    UPDATE ordertimeout.sweep_state AS s SET wake_at = v_wake;
    RETURN v_wake;
END
$$;

COMMENT ON FUNCTION ordertimeout.plan_sleep(interval) IS
    'for the sidecar: the moment to sweep next (the earliest due timer, at most max_sleep away), recorded so that an order due sooner sends a wake-up on channel ordertimeout_wake';

-- River's rescuer decides that a job is stuck by the client's wall clock
-- (running since before client_now - RescueStuckJobsAfter): a sidecar whose
-- clock is fast would hand a running gateway check to a second worker. The
-- sidecar therefore sets River's rescuer far back and rescues the jobs of
-- its queue here, by the database's clock. Mirrors what River's rescuer does
-- to a stuck job: cancelled if a cancel was asked, discarded on its last
-- attempt, otherwise available again at once; an error is recorded on it.
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
          AND r.attempted_at < v_now - rescue_stuck_jobs.running_for
        ORDER BY r.id
        LIMIT rescue_stuck_jobs.max
        FOR UPDATE SKIP LOCKED
    ), rescued AS (
        UPDATE public.river_job AS r
        SET state = s.next_state,
            scheduled_at = CASE WHEN s.next_state = 'available' THEN v_now ELSE r.scheduled_at END,
            finalized_at = CASE WHEN s.next_state = 'available' THEN NULL ELSE v_now END,
            errors = array_append(r.errors, jsonb_build_object(
                'at', v_now,
                'attempt', greatest(r.attempt, 0),
                'error', format('Stuck job rescued by ordertimeout.rescue_stuck_jobs: running since %s, over %s by the database clock',
                                r.attempted_at, rescue_stuck_jobs.running_for),
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

COMMENT ON FUNCTION ordertimeout.rescue_stuck_jobs(interval, integer) IS
    'for the sidecar: hands back up to max jobs of queue ordertimeout that have been running longer than running_for by the database clock (their sidecar died): available again at once, discarded on their last attempt, cancelled if a cancel was asked; returns retried, discarded, cancelled';

-- ------------------------------------------------------------------
-- plpgsql/resolve_conflict.sql
-- ------------------------------------------------------------------

-- A conflict is open, then resolved exactly once: reinstated, refunded or
-- manual. A refund touches the outside world, so it has a state between:
-- resolve_conflict(id, 'refund') claims the conflict (state refunding) before
-- any gateway call, and from then on the refund is the only way it can end;
-- the sidecar refunds at the gateway with the payment id as idempotency key
-- and records it with finish_refund. A retry after any failure continues the
-- same refund.
CREATE OR REPLACE FUNCTION ordertimeout.resolve_conflict(
    conflict_id bigint,
    resolution  text)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_now      timestamptz := clock_timestamp();
    v_actor    text := ordertimeout._actor();
    v_conflict ordertimeout.conflicts;
    v_outcome  text;
    v_status   text;
    v_amount   numeric;
    v_currency text;
BEGIN
    IF resolve_conflict.conflict_id IS NULL THEN
        RAISE EXCEPTION 'conflict_id must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF resolve_conflict.resolution IS NULL THEN
        RAISE EXCEPTION 'resolution must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    v_outcome := CASE resolve_conflict.resolution
                     WHEN 'reinstate' THEN 'reinstated'
                     WHEN 'refund' THEN 'refunded'
                     WHEN 'manual' THEN 'manual'
                 END;
    IF v_outcome IS NULL THEN
        RAISE EXCEPTION 'resolution must be "reinstate", "refund" or "manual", got "%"', left(resolve_conflict.resolution, 32)
            USING ERRCODE = 'OT131';
    END IF;

    SELECT c.* INTO v_conflict
    FROM ordertimeout.conflicts AS c
    WHERE c.conflict_id = resolve_conflict.conflict_id
    FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'conflict_id % is unknown', resolve_conflict.conflict_id
            USING ERRCODE = 'OT130';
    END IF;

    -- Exactly once: a repeat of the same resolution is answered, another one refused.
    IF v_conflict.state = 'resolved' THEN
        IF v_conflict.resolution = v_outcome THEN
            RETURN v_outcome;
        END IF;
        RAISE EXCEPTION 'conflict % is already resolved as %', resolve_conflict.conflict_id, v_conflict.resolution
            USING ERRCODE = 'OT133';
    END IF;
    IF v_conflict.state = 'refunding' THEN
        IF v_outcome = 'refunded' THEN
            RETURN 'refunding';
        END IF;
        RAISE EXCEPTION 'conflict % is being refunded (since %): a refund that started is the one that finishes',
            resolve_conflict.conflict_id, v_conflict.refund_started_at
            USING ERRCODE = 'OT134';
    END IF;

    SELECT o.status, o.amount, o.currency INTO v_status, v_amount, v_currency
    FROM ordertimeout.orders AS o
    WHERE o.order_id = v_conflict.order_id
    FOR NO KEY UPDATE;

    IF v_outcome = 'refunded' THEN
        -- Claimed here, refunded by the sidecar, recorded by finish_refund.
        UPDATE ordertimeout.conflicts AS c
        SET state = 'refunding',
            refund_started_at = v_now,
            refund_started_by = v_actor
        WHERE c.conflict_id = resolve_conflict.conflict_id;
        PERFORM ordertimeout._log_event(v_conflict.order_id, v_status, v_status, 'conflict', v_now,
            jsonb_build_object('conflict_id', v_conflict.conflict_id, 'resolution', 'refunding',
                               'payment_id', v_conflict.payment_id),
            webhook => true);
        PERFORM pg_notify('ordertimeout_conflict', '');
        RETURN 'refunding';
    END IF;

    IF v_outcome = 'reinstated' THEN
        IF v_conflict.kind <> 'late_payment' OR v_status NOT IN ('CANCELLED', 'CLOSED') THEN
            RAISE EXCEPTION 'conflict % cannot be reinstated: it is a % on a % order (reinstate takes back a cancelled order paid late)',
                resolve_conflict.conflict_id, v_conflict.kind, v_status
                USING ERRCODE = 'OT132';
        END IF;
        -- Money is exact: only the order's own amount in its own currency.
        IF v_amount IS NOT NULL AND v_conflict.amount IS DISTINCT FROM v_amount
           OR v_currency IS NOT NULL AND v_conflict.currency IS DISTINCT FROM v_currency THEN
            RAISE EXCEPTION 'conflict % cannot be reinstated: the payment is % %, the order % %',
                resolve_conflict.conflict_id, coalesce(v_conflict.amount::text, 'of an unknown amount'),
                coalesce(v_conflict.currency, ''), v_amount, coalesce(v_currency, '')
                USING ERRCODE = 'OT132';
        END IF;
        PERFORM ordertimeout._reclaim(v_conflict.order_id, v_now);
        UPDATE ordertimeout.orders AS o
        SET status = 'PAID',
            paid_at = v_now,
            cancelled_at = NULL,
            cancel_cause = NULL,
            cancel_reason = NULL,
            closed_at = NULL,
            deadline_version = o.deadline_version + 1
        WHERE o.order_id = v_conflict.order_id
          AND o.status IN ('CANCELLED', 'CLOSED');
        UPDATE ordertimeout.payments AS p
        SET status = 'confirmed'
        WHERE p.payment_id = v_conflict.payment_id;
        PERFORM ordertimeout._log_event(v_conflict.order_id, v_status, 'PAID', 'conflict', v_now,
            jsonb_build_object('conflict_id', v_conflict.conflict_id, 'resolution', v_outcome,
                               'payment_id', v_conflict.payment_id),
            webhook => true);
    ELSE
        PERFORM ordertimeout._log_event(v_conflict.order_id, v_status, v_status, 'conflict', v_now,
            jsonb_build_object('conflict_id', v_conflict.conflict_id, 'resolution', v_outcome,
                               'payment_id', v_conflict.payment_id),
            webhook => true);
    END IF;

    UPDATE ordertimeout.conflicts AS c
    SET state = 'resolved',
        resolution = v_outcome,
        resolved_at = v_now,
        resolved_by = v_actor
    WHERE c.conflict_id = resolve_conflict.conflict_id;
    RETURN v_outcome;
END
$$;

COMMENT ON FUNCTION ordertimeout.resolve_conflict(bigint, text) IS
    'resolves a conflict exactly once: reinstate (take the stock back and mark the order paid: only a late payment of the order''s exact amount and currency; OT132 otherwise), manual (handed to a person), or refund (claims the conflict for a refund, which the sidecar makes at the gateway and records with finish_refund; returns refunding); while refunding, nothing but the refund can end it (OT134)';

CREATE OR REPLACE FUNCTION ordertimeout.finish_refund(
    conflict_id bigint,
    refund_id   text)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_now      timestamptz := clock_timestamp();
    v_conflict ordertimeout.conflicts;
    v_status   text;
BEGIN
    IF finish_refund.conflict_id IS NULL THEN
        RAISE EXCEPTION 'conflict_id must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF finish_refund.refund_id IS NULL THEN
        RAISE EXCEPTION 'refund_id must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF NOT ordertimeout._is_identifier(finish_refund.refund_id, 128) THEN
        RAISE EXCEPTION 'refund_id must be 1 to 128 characters, not "." or "..", without control, format or line-separator characters (got % characters)',
            char_length(finish_refund.refund_id)
            USING ERRCODE = 'OT136';
    END IF;

    SELECT c.* INTO v_conflict
    FROM ordertimeout.conflicts AS c
    WHERE c.conflict_id = finish_refund.conflict_id
    FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'conflict_id % is unknown', finish_refund.conflict_id
            USING ERRCODE = 'OT130';
    END IF;
    IF v_conflict.resolution = 'refunded' THEN
        RETURN 'refunded';   -- recorded already: the same answer
    END IF;
    IF v_conflict.state <> 'refunding' THEN
        RAISE EXCEPTION 'conflict % is %, not being refunded: claim it with resolve_conflict(%, ''refund'') first',
            finish_refund.conflict_id,
            CASE WHEN v_conflict.state = 'resolved' THEN 'resolved as ' || v_conflict.resolution ELSE v_conflict.state END,
            finish_refund.conflict_id
            USING ERRCODE = 'OT135';
    END IF;

    SELECT o.status INTO v_status
    FROM ordertimeout.orders AS o
    WHERE o.order_id = v_conflict.order_id
    FOR NO KEY UPDATE;

    UPDATE ordertimeout.payments AS p
    SET status = 'refunded'
    WHERE p.payment_id = v_conflict.payment_id;
    UPDATE ordertimeout.conflicts AS c
    SET state = 'resolved',
        resolution = 'refunded',
        resolved_at = v_now,
        resolved_by = ordertimeout._actor(),
        refund_id = finish_refund.refund_id
    WHERE c.conflict_id = finish_refund.conflict_id;
    PERFORM ordertimeout._log_event(v_conflict.order_id, v_status, v_status, 'conflict', v_now,
        jsonb_build_object('conflict_id', v_conflict.conflict_id, 'resolution', 'refunded',
                           'payment_id', v_conflict.payment_id, 'refund_id', finish_refund.refund_id),
        webhook => true);
    RETURN 'refunded';
END
$$;

COMMENT ON FUNCTION ordertimeout.finish_refund(bigint, text) IS
    'for the sidecar: records that the gateway refunded the payment of a conflict claimed with resolve_conflict(id, ''refund''); returns refunded, also when repeated; OT135 when the conflict is not being refunded';

CREATE OR REPLACE FUNCTION ordertimeout.open_conflicts(max integer DEFAULT 1000)
RETURNS TABLE (
    conflict_id bigint,
    order_id    text,
    payment_id  text,
    kind        text,
    amount      numeric,
    detected_at  timestamptz,
    currency     text,
    state        text,
    late_payment text)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM ordertimeout._check_max(open_conflicts.max);
    RETURN QUERY
    SELECT c.conflict_id, c.order_id, c.payment_id, c.kind, c.amount, c.detected_at, c.currency, c.state,
           coalesce(m.late_payment, s.late_payment)
    FROM ordertimeout.conflicts AS c
    JOIN ordertimeout.orders AS o ON o.order_id = c.order_id
    LEFT JOIN ordertimeout.payment_methods AS m ON m.method = o.payment_method
    CROSS JOIN ordertimeout.settings AS s
    WHERE c.resolution IS NULL
    ORDER BY c.detected_at, c.conflict_id
    LIMIT open_conflicts.max;
END
$$;

COMMENT ON FUNCTION ordertimeout.open_conflicts(integer) IS
    'unresolved conflicts (open, or refunding: claimed for a refund not yet recorded), oldest first, with the late-payment policy that applies (the payment method''s, else the settings''): what the sidecar reads after every wake-up on channel ordertimeout_conflict';

-- ------------------------------------------------------------------
-- plpgsql/admin.sql
-- ------------------------------------------------------------------

CREATE OR REPLACE FUNCTION ordertimeout.put_stock(
    sku text,
    qty bigint)
RETURNS ordertimeout.stock
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_row ordertimeout.stock;
BEGIN
    IF put_stock.sku IS NULL THEN
        RAISE EXCEPTION 'sku must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF NOT ordertimeout._is_plain_text(put_stock.sku, 64) THEN
        RAISE EXCEPTION 'sku must be 1 to 64 characters without control, format or line-separator characters'
            USING ERRCODE = 'OT142';
    END IF;
    IF put_stock.qty IS NULL THEN
        RAISE EXCEPTION 'qty must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF put_stock.qty NOT BETWEEN 0 AND 1000000000000000 THEN
        RAISE EXCEPTION 'qty must be between 0 and 10^15, got %', put_stock.qty
            USING ERRCODE = 'OT143';
    END IF;

    INSERT INTO ordertimeout.stock AS s (sku, available)
    VALUES (put_stock.sku, put_stock.qty)
    ON CONFLICT ON CONSTRAINT stock_pkey DO UPDATE
    SET available = excluded.available
    RETURNING s.* INTO v_row;
    RETURN v_row;
END
$$;

COMMENT ON FUNCTION ordertimeout.put_stock(text, bigint) IS
    'sets the units of sku available to order (creating the sku); reserved and sold are not touched; safe to repeat';

CREATE OR REPLACE FUNCTION ordertimeout.put_points(
    account_id text,
    balance    bigint)
RETURNS ordertimeout.points_accounts
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_row ordertimeout.points_accounts;
BEGIN
    IF put_points.account_id IS NULL THEN
        RAISE EXCEPTION 'account_id must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF NOT ordertimeout._is_plain_text(put_points.account_id, 64) THEN
        RAISE EXCEPTION 'account_id must be 1 to 64 characters without control, format or line-separator characters'
            USING ERRCODE = 'OT146';
    END IF;
    IF put_points.balance IS NULL THEN
        RAISE EXCEPTION 'balance must not be null'
            USING ERRCODE = 'OT100';
    END IF;
    IF put_points.balance NOT BETWEEN 0 AND 1000000000000000 THEN
        RAISE EXCEPTION 'balance must be between 0 and 10^15, got %', put_points.balance
            USING ERRCODE = 'OT143';
    END IF;

    INSERT INTO ordertimeout.points_accounts AS a (account_id, balance)
    VALUES (put_points.account_id, put_points.balance)
    ON CONFLICT ON CONSTRAINT points_accounts_pkey DO UPDATE
    SET balance = excluded.balance
    WHERE a.held <= excluded.balance
    RETURNING a.* INTO v_row;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'balance % is below the % points that live orders hold on account "%"',
            put_points.balance,
            (SELECT a.held FROM ordertimeout.points_accounts AS a WHERE a.account_id = put_points.account_id),
            put_points.account_id
            USING ERRCODE = 'OT147';
    END IF;
    RETURN v_row;
END
$$;

COMMENT ON FUNCTION ordertimeout.put_points(text, bigint) IS
    'sets the points balance of an account (creating it); never below what live orders hold; safe to repeat';

CREATE OR REPLACE FUNCTION ordertimeout.configure(
    default_timeout interval DEFAULT NULL,
    grace           interval DEFAULT NULL,
    paying_window   interval DEFAULT NULL,
    precheck        text DEFAULT NULL,
    late_payment    text DEFAULT NULL,
    webhooks        boolean DEFAULT NULL,
    remind_before   interval DEFAULT NULL,
    paused          boolean DEFAULT NULL)
RETURNS ordertimeout.settings
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_row   ordertimeout.settings;
    v_now   timestamptz := clock_timestamp();
    v_actor text := ordertimeout._actor();
BEGIN
    PERFORM ordertimeout._check_interval('default_timeout', configure.default_timeout, interval '30 days', 'OT145');
    PERFORM ordertimeout._check_interval('grace', configure.grace, interval '1 day', 'OT145', allow_zero => true);
    PERFORM ordertimeout._check_interval('paying_window', configure.paying_window, interval '30 days', 'OT145');
    IF configure.precheck NOT IN ('attempted', 'always', 'never') THEN
        RAISE EXCEPTION 'precheck must be "attempted", "always" or "never", got "%"', configure.precheck
            USING ERRCODE = 'OT145';
    END IF;
    IF configure.late_payment NOT IN ('reinstate', 'refund', 'manual') THEN
        RAISE EXCEPTION 'late_payment must be "reinstate", "refund" or "manual", got "%"', configure.late_payment
            USING ERRCODE = 'OT145';
    END IF;
    -- 0 turns reminders off.
    PERFORM ordertimeout._check_interval('remind_before', configure.remind_before, interval '30 days', 'OT145',
                                         allow_zero => true);

    UPDATE ordertimeout.settings AS s
    SET default_timeout = coalesce(configure.default_timeout, s.default_timeout),
        grace = coalesce(configure.grace, s.grace),
        paying_window = coalesce(configure.paying_window, s.paying_window),
        precheck = coalesce(configure.precheck, s.precheck),
        late_payment = coalesce(configure.late_payment, s.late_payment),
        webhooks = coalesce(configure.webhooks, s.webhooks),
        remind_before = CASE
                            WHEN configure.remind_before IS NULL THEN s.remind_before
                            WHEN configure.remind_before = interval '0' THEN NULL
                            ELSE configure.remind_before
                        END,
        paused = coalesce(configure.paused, s.paused),
        paused_at = CASE WHEN configure.paused AND NOT s.paused THEN v_now ELSE s.paused_at END,
        paused_by = CASE WHEN configure.paused AND NOT s.paused THEN v_actor ELSE s.paused_by END,
        resumed_at = CASE WHEN NOT configure.paused AND s.paused THEN v_now ELSE s.resumed_at END
    RETURNING s.* INTO v_row;
    IF configure.paused IS FALSE THEN
        -- The backlog is due now: wake the sleeping sweepers.
        PERFORM pg_notify('ordertimeout_wake', '');
    END IF;
    RETURN v_row;
END
$$;

COMMENT ON FUNCTION ordertimeout.configure(interval, interval, interval, text, text, boolean, interval, boolean) IS
    'changes settings; a NULL argument leaves that setting as it is; paused => true stops every timeout cancel until paused => false; returns the settings';

-- ------------------------------------------------------------------
-- privileges of the new functions (as in sql/grants.sql)
-- ------------------------------------------------------------------

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA ordertimeout FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ordertimeout.confirm_payment(text, text, numeric, text)
TO ordertimeout_app, ordertimeout_sidecar, ordertimeout_admin;
GRANT EXECUTE ON FUNCTION
    ordertimeout.finish_refund(bigint, text),
    ordertimeout.open_conflicts(integer)
TO ordertimeout_sidecar, ordertimeout_admin;
GRANT EXECUTE ON FUNCTION ordertimeout.configure(interval, interval, interval, text, text, boolean, interval, boolean)
TO ordertimeout_admin;
GRANT EXECUTE ON FUNCTION ordertimeout.begin_payment(text, text, interval, text)
TO ordertimeout_app, ordertimeout_sidecar, ordertimeout_admin;
GRANT EXECUTE ON FUNCTION ordertimeout.put_payment_method(text, interval, boolean, text)
TO ordertimeout_admin;
GRANT SELECT ON ordertimeout.payment_methods TO ordertimeout_sidecar, ordertimeout_admin;
GRANT EXECUTE ON FUNCTION
    ordertimeout.reconcile_payments(jsonb, timestamptz, timestamptz, boolean, text),
    ordertimeout.reconcile_watermark(text)
TO ordertimeout_sidecar, ordertimeout_admin;
GRANT SELECT ON ordertimeout.reconcile_watermarks TO ordertimeout_admin;
