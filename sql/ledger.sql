-- The release ledger and the event log: append-mostly, no foreign keys on the
-- hot path (the functions write them in the same transaction as the order).

CREATE TABLE ordertimeout.releases (
    order_id     text        NOT NULL,
    kind         text        NOT NULL,
    resource_id  text        NOT NULL,
    qty          bigint      NOT NULL,
    cause        text        NOT NULL,
    released_at  timestamptz NOT NULL,
    reclaimed_at timestamptz,
    CONSTRAINT releases_once_per_resource PRIMARY KEY (order_id, kind, resource_id),
    CONSTRAINT releases_kind_known CHECK (kind IN ('stock', 'coupon', 'points')),
    CONSTRAINT releases_qty_positive CHECK (qty > 0)
);

COMMENT ON TABLE ordertimeout.releases IS
    'one row per released reservation; the primary key makes a second release of the same thing impossible';
COMMENT ON COLUMN ordertimeout.releases.reclaimed_at IS 'set when a late payment reinstated the order and took the resource back';

CREATE TABLE ordertimeout.events (
    event_id    bigint      GENERATED ALWAYS AS IDENTITY,
    order_id    text        NOT NULL,
    from_status text,
    to_status   text        NOT NULL,
    cause       ordertimeout.event_cause NOT NULL,
    actor       text        NOT NULL,
    lateness    interval,
    at          timestamptz NOT NULL,
    detail      jsonb,
    CONSTRAINT events_pkey PRIMARY KEY (event_id)
);

CREATE INDEX events_order_id ON ordertimeout.events (order_id, event_id);

-- Timeouts whose timer row was lost, caught by the fallback sweep.
CREATE INDEX events_caught_by_sweep
    ON ordertimeout.events (at)
    WHERE cause = 'sweep';

CREATE INDEX events_at ON ordertimeout.events USING brin (at);

COMMENT ON TABLE ordertimeout.events IS
    'every state change of every order: from, to, cause, actor, how late a timeout fired, when';
COMMENT ON COLUMN ordertimeout.events.lateness IS 'for timeouts: cancelled_at - cancel_at';
