-- Input checks. Every API function checks its arguments with these before it
-- writes anything: a bad value raises its own OT SQLSTATE naming the field.
-- Private helpers (EXECUTE revoked from PUBLIC, sql/grants.sql); the API
-- functions run them as their owner. Helpers are PL/pgSQL, not SQL: a SQL
-- function with a SET clause cannot be inlined and is planned again on every
-- call, PL/pgSQL keeps its plans. The two predicates below are the
-- exception: SQL functions without SET, which the planner inlines into the
-- caller's expression (calling a PL/pgSQL function with a pinned
-- search_path costs about 4 microseconds, and create_order used to make a
-- dozen such calls); they call no function and read no table, so their
-- callers' pinned search_path is all they need.
--
-- The API functions on the hot path (create_order, begin_payment,
-- confirm_payment) test an argument with these predicates and call the
-- _check_x helper, which raises the error naming the field, only when the
-- test fails: PERFORM of a helper is a statement of its own.

-- Whether value is text a person can read back as it is: 1 to max_length
-- characters, none of Unicode 15's categories Cc (controls: C0, DEL, C1), Cf
-- (format characters: bidi overrides and isolates, zero-width characters,
-- the byte order mark, soft hyphen, tag characters), Zl and Zp (line and
-- paragraph separators). Identifiers, reasons and actors pass through logs,
-- URLs and consoles: these characters would make them look like something
-- else. The ranges are written out (the regex classes of PostgreSQL depend on
-- the locale); tests/fuzz checks them against Go's unicode tables.
CREATE FUNCTION ordertimeout._is_plain_text(value text, max_length integer)
RETURNS boolean
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
AS $$
    SELECT value IS NOT NULL
       AND char_length(value) BETWEEN 1 AND max_length
       AND value !~ '[\u0001-\u001F\u007F-\u009F\u00AD\u0600-\u0605\u061C\u06DD\u070F\u0890-\u0891\u08E2\u180E\u200B-\u200F\u2028-\u202E\u2060-\u2064\u2066-\u206F\uFEFF\uFFF9-\uFFFB\U000110BD\U000110CD\U00013430-\U0001343F\U0001BCA0-\U0001BCA3\U0001D173-\U0001D17A\U000E0001\U000E0020-\U000E007F]'
$$;

-- Whether id can name an order, a payment or a refund: plain text (see
-- _is_plain_text) and not "." or "..", which a URL path would read as dot
-- segments.
CREATE FUNCTION ordertimeout._is_identifier(id text, max_length integer)
RETURNS boolean
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
AS $$
    SELECT ordertimeout._is_plain_text(id, max_length) AND id NOT IN ('.', '..')
$$;

-- value as an error message repeats it: at most max_length characters (then
-- "…"), and every character _is_plain_text refuses written as \uXXXX (or
-- \UXXXXXXXX), so that a message never carries a line break, a bidi
-- override or an unbounded copy of the caller's input into a log. Only the
-- error paths call it.
CREATE FUNCTION ordertimeout._shown(value text, max_length integer)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL THEN
        RETURN 'NULL';
    END IF;
    RETURN coalesce((SELECT string_agg(CASE WHEN ordertimeout._is_plain_text(t.c, 1) THEN t.c
                                            WHEN ascii(t.c) > 65535 THEN chr(92) || 'U' || lpad(to_hex(ascii(t.c)), 8, '0')
                                            ELSE chr(92) || 'u' || lpad(to_hex(ascii(t.c)), 4, '0') END,
                                       '' ORDER BY t.n)
                       FROM regexp_split_to_table(left(value, max_length), '') WITH ORDINALITY AS t(c, n)
                      WHERE t.c <> ''), '')
        || CASE WHEN char_length(value) > max_length THEN '…' ELSE '' END;
END
$$;

-- Raises OT126 unless amount, an amount of money, is NULL or a finite number
-- from 0 to below 10^15 with at most 6 decimal places (trailing zeros aside:
-- 10.500000000 is 10.5), the grammar of the gateway's amounts
-- (_parse_amount, and the sidecar's): an amount no gateway can write could
-- never be matched by a payment check or a reconciliation. field names the
-- argument in the message.
CREATE FUNCTION ordertimeout._check_amount(field text, amount numeric)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF amount IS NULL THEN
        RETURN;
    END IF;
    -- 'NaN' >= 0 is true, and NaN sorts above every number: the upper bound
    -- is what refuses NaN and Infinity.
    IF NOT (amount >= 0 AND amount < 1000000000000000) THEN
        RAISE EXCEPTION '% must be a finite number from 0 to below 10^15, got %', field,
            CASE WHEN length(amount::text) > 40 THEN left(amount::text, 40) || '...' ELSE amount::text END
            USING ERRCODE = 'OT126';
    END IF;
    IF min_scale(amount) > 6 THEN
        RAISE EXCEPTION '% must have at most 6 decimal places, got %', field,
            CASE WHEN length(amount::text) > 40 THEN left(amount::text, 40) || '...' ELSE amount::text END
            USING ERRCODE = 'OT126';
    END IF;
END
$$;

-- Whether an interval has a negative part. Months, days and time are
-- separate fields, and added to a timestamp a day is a calendar day (23 or
-- 25 hours across a daylight-saving change in the session's TimeZone), so
-- '1 day -23:30' compares as 30 minutes but can move a time back. With no
-- negative part, an interval that compares as positive always moves a time
-- forward. Each field apart by date_trunc (the months, the months and days),
-- the form of the tables' CHECKs (sql/settings.sql). Inlined.
CREATE FUNCTION ordertimeout._has_negative_part(value interval)
RETURNS boolean
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
AS $$
    SELECT date_trunc('month', value) < interval '0'
        OR date_trunc('day', value) - date_trunc('month', value) < interval '0'
        OR value - date_trunc('day', value) < interval '0'
$$;

-- Raises code unless value is a positive interval of at most max without a
-- month or year part (a month has no fixed length: '1 mon' compares as 30
-- days but adds up to 31) and without a negative part (_has_negative_part).
-- Compared before any arithmetic, so no value overflows a timestamp later.
-- With allow_zero, 0 is accepted too.
-- Whether value passes _check_interval(field, value, max, code, allow_zero):
-- NULL, or a positive interval (or 0, with allow_zero) of at most max
-- without a month or year part and without a negative part. Inlined (see
-- above).
CREATE FUNCTION ordertimeout._is_duration(value interval, max interval, allow_zero boolean DEFAULT false)
RETURNS boolean
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
AS $$
    SELECT value IS NULL
        OR (date_trunc('month', value) = interval '0' AND NOT ordertimeout._has_negative_part(value)
            AND (value > interval '0' OR (allow_zero AND value = interval '0'))
            AND value <= max)
$$;

CREATE FUNCTION ordertimeout._check_interval(
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
    IF ordertimeout._has_negative_part(value) THEN
        RAISE EXCEPTION '% must have no negative part (a day is not always 24 hours), got %', field, value
            USING ERRCODE = code;
    END IF;
END
$$;

CREATE FUNCTION ordertimeout._check_order_id(order_id text)
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

CREATE FUNCTION ordertimeout._check_payment_id(payment_id text)
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
CREATE FUNCTION ordertimeout._check_max(max integer)
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

-- Validates create_order's items and returns them sorted by sku: as
-- [{"sku": ..., "qty": ...}] (normalized, the form stored and compared for
-- idempotency) and as two arrays (skus, qtys: the stock rows are locked in
-- that order).
--
-- A list of up to 8 items that passes every rule at first sight takes the
-- short way: a loop of expressions, sorted by insertion, no statement. Any
-- other list, valid or not, takes the long way below, which checks the rules
-- in their order and raises the error naming the first bad entry; the short
-- way only ever declines, so both give the same answer.
CREATE FUNCTION ordertimeout._normalize_items(
    items          jsonb,
    OUT normalized jsonb,
    OUT skus       text[],
    OUT qtys       integer[])
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
    v_short    boolean;
    j          integer;
BEGIN
    v_count := CASE WHEN jsonb_typeof(items) = 'array' THEN jsonb_array_length(items) END;
    v_short := v_count BETWEEN 1 AND 8;
    IF v_short THEN
        skus := '{}';
        qtys := '{}';
        FOR i IN 0 .. v_count - 1 LOOP
            v_item := items -> i;
            IF jsonb_typeof(v_item) <> 'object' THEN
                v_short := false;
                EXIT;
            END IF;
            IF v_item - 'sku' - 'qty' <> '{}'
               OR jsonb_typeof(v_item -> 'sku') IS DISTINCT FROM 'string'
               OR jsonb_typeof(v_item -> 'qty') IS DISTINCT FROM 'number' THEN
                v_short := false;
                EXIT;
            END IF;
            v_sku := v_item ->> 'sku';
            v_qty := (v_item ->> 'qty')::numeric;
            IF NOT ordertimeout._is_plain_text(v_sku, 64) OR v_qty <> trunc(v_qty) OR v_qty NOT BETWEEN 1 AND 1000000 THEN
                v_short := false;
                EXIT;
            END IF;
            -- insert in sku order; a second entry of a sku declines
            j := i;
            WHILE j > 0 AND skus[j] > v_sku LOOP
                skus[j + 1] := skus[j];
                qtys[j + 1] := qtys[j];
                j := j - 1;
            END LOOP;
            IF j > 0 AND skus[j] = v_sku THEN
                v_short := false;
                EXIT;
            END IF;
            skus[j + 1] := v_sku;
            qtys[j + 1] := v_qty::integer;
        END LOOP;
        IF v_short THEN
            normalized := '[]';
            FOR i IN 1 .. v_count LOOP
                normalized := normalized || jsonb_build_object('sku', skus[i], 'qty', qtys[i]);
            END LOOP;
            RETURN;
        END IF;
    END IF;

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
            RAISE EXCEPTION 'items[%] has unknown key "%" (allowed: sku, qty)', v_position, ordertimeout._shown(v_key, 64)
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
            RAISE EXCEPTION 'items[%].qty must be an integer, got %', v_position, ordertimeout._shown((v_item -> 'qty')::text, 40)
                USING ERRCODE = 'OT105';
        END IF;
        v_qty := (v_item ->> 'qty')::numeric;
        IF v_qty < 1 OR v_qty > 1000000 THEN
            RAISE EXCEPTION 'items[%].qty must be between 1 and 1000000, got %', v_position, ordertimeout._shown(v_qty::text, 40)
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
               ORDER BY e.value ->> 'sku'),
           array_agg(e.value ->> 'sku' ORDER BY e.value ->> 'sku'),
           array_agg((e.value ->> 'qty')::numeric::integer ORDER BY e.value ->> 'sku')
    INTO normalized, skus, qtys
    FROM jsonb_array_elements(items) AS e;
END
$$;

-- Validates create_order's options; returns them as given (NULL counts as {}),
-- but for points, which become the integer they stand for: 100.0 is 100, as
-- an item's qty 2.0 is 2 (it was accepted here, then refused with 22P02).
CREATE FUNCTION ordertimeout._normalize_options(options jsonb)
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
        RAISE EXCEPTION 'options has unknown key "%" (allowed: coupon, points_account, points, amount, currency, precheck, method)', ordertimeout._shown(v_key, 64)
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
        RAISE EXCEPTION 'options.points must be an integer between 1 and 1000000000000, got %', ordertimeout._shown((options -> 'points')::text, 40)
            USING ERRCODE = 'OT114';
    END IF;
    IF options ? 'amount' THEN
        IF jsonb_typeof(options -> 'amount') <> 'number' THEN
            RAISE EXCEPTION 'options.amount must be a JSON number, got %', ordertimeout._shown((options -> 'amount')::text, 40)
                USING ERRCODE = 'OT126';
        END IF;
        PERFORM ordertimeout._check_amount('options.amount', (options ->> 'amount')::numeric);
    END IF;
    IF options ? 'currency' AND (jsonb_typeof(options -> 'currency') <> 'string'
                                 OR (options ->> 'currency') !~ '^[A-Z]{3}$') THEN
        RAISE EXCEPTION 'options.currency must be a three-letter ISO 4217 code such as "EUR", got %', ordertimeout._shown((options -> 'currency')::text, 40)
            USING ERRCODE = 'OT114';
    END IF;
    IF options ? 'method' AND jsonb_typeof(options -> 'method') <> 'string' THEN
        RAISE EXCEPTION 'options.method must be the name of a payment method, got %', ordertimeout._shown((options -> 'method')::text, 40)
            USING ERRCODE = 'OT160';
    END IF;
    IF options ? 'precheck' AND (jsonb_typeof(options -> 'precheck') <> 'string'
                                 OR (options ->> 'precheck') NOT IN ('attempted', 'always', 'never')) THEN
        RAISE EXCEPTION 'options.precheck must be "attempted", "always" or "never", got %', ordertimeout._shown((options -> 'precheck')::text, 40)
            USING ERRCODE = 'OT114';
    END IF;
    IF options ? 'points' THEN
        options := jsonb_set(options, '{points}', to_jsonb((options ->> 'points')::numeric::bigint));
    END IF;
    RETURN options;
END
$$;

-- Returns the payment method named method, or raises OT160 naming field
-- when there is none.
CREATE FUNCTION ordertimeout._payment_method(field text, method text)
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
        RAISE EXCEPTION '% "%" is not a known payment method (known: %)', field, ordertimeout._shown(_payment_method.method, 64),
            (SELECT string_agg(m.method, ', ' ORDER BY m.method) FROM ordertimeout.payment_methods AS m)
            USING ERRCODE = 'OT160';
    END IF;
    RETURN v_row;
END
$$;

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
    IF age > interval '100 years' OR ordertimeout._has_negative_part(age) THEN
        RAISE EXCEPTION '% must be between 0 and 100 years, with no negative part, got %', name, age
            USING ERRCODE = code;
    END IF;
END
$$;

-- The decimal grammar of amounts in gateway records: digits, an optional
-- fraction; as a JSON number or a string.
CREATE FUNCTION ordertimeout._parse_amount(value jsonb)
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
    IF v_text !~ '^(0|[1-9][0-9]{0,14})([.][0-9]{1,6})?$' THEN
        RETURN NULL;
    END IF;
    RETURN v_text::numeric;
END
$$;

-- The gateway's timestamps: ISO 8601 with a zone; NULL when not one.
CREATE FUNCTION ordertimeout._parse_time(value jsonb)
RETURNS timestamptz
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF jsonb_typeof(value) <> 'string'
       OR (value #>> '{}') !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(:[0-9]{2}([.][0-9]{1,6})?)?(Z|[+-][0-9]{2}(:?[0-9]{2})?)$' THEN
        RETURN NULL;
    END IF;
    RETURN (value #>> '{}')::timestamptz;
EXCEPTION
    -- an offset beyond ±15:59 is invalid_time_zone_displacement_value
    WHEN datetime_field_overflow OR invalid_datetime_format OR invalid_time_zone_displacement_value THEN
        RETURN NULL;
END
$$;
