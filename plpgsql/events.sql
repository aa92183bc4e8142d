-- The audit trail: every transition of an order appends one row to
-- ordertimeout.events, with the actor who asked for it.

CREATE FUNCTION ordertimeout._actor()
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

-- Appends one event and returns its id.
CREATE FUNCTION ordertimeout._log_event(
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
    -- Nested: the condition with the settings is a statement of its own.
    IF webhook THEN
        IF (SELECT s.webhooks FROM ordertimeout.settings AS s) THEN
            PERFORM ordertimeout._enqueue_webhooks(ARRAY[v_event_id]);
        END IF;
    END IF;
    RETURN v_event_id;
END
$$;
