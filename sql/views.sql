-- Read-side views for operators and the sidecar's metrics.

CREATE VIEW ordertimeout.order_counts AS
SELECT
    o.status,
    count(*) AS orders
FROM ordertimeout.orders AS o
GROUP BY o.status;

COMMENT ON VIEW ordertimeout.order_counts IS 'orders per status (a full count: for dashboards, not for hot paths)';

CREATE VIEW ordertimeout.sweep_stats AS
SELECT
    (SELECT count(*) FROM ordertimeout._timers AS t WHERE t.due_at <= now()) AS due_timers,
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
    (SELECT count(*) FROM ordertimeout._malformed_timers) AS malformed_timers,
    (SELECT s.paused FROM ordertimeout.settings AS s) AS paused;

COMMENT ON VIEW ordertimeout.sweep_stats IS
    'the sweep''s health: due timer rows, overdue orders, orders waiting for a gateway check, timeouts caught without their timer row (lost timers), open conflicts, malformed timer rows set aside by sweep_due, whether timeout cancels are paused';

CREATE VIEW ordertimeout.cancel_lag AS
SELECT
    e.order_id,
    e.cause,
    e.lateness,
    e.at
FROM ordertimeout.events AS e
WHERE e.cause IN ('timeout', 'sweep')
  AND e.to_status = 'CANCELLED';

COMMENT ON VIEW ordertimeout.cancel_lag IS
    'how late each timeout cancel came (cancelled_at - cancel_at), by database timestamps; filter on at';

-- Every conflict with the late-payment policy that applies to it: that of
-- its payment's method (payments.method; the order's when it is not
-- recorded, payments.method_recorded), else the settings' (also for an
-- attempt with no method). Private: read through open_conflicts,
-- conflicts_to_resolve and conflict_info.
CREATE VIEW ordertimeout._conflicts_with_policy AS
SELECT
    c.conflict_id,
    c.order_id,
    c.payment_id,
    c.kind,
    c.amount,
    c.detected_at,
    c.currency,
    c.state,
    coalesce(m.late_payment, s.late_payment) AS late_payment,
    c.resolution,
    c.handed_over_at,
    c.handed_over_why
FROM ordertimeout.conflicts AS c
JOIN ordertimeout.orders AS o ON o.order_id = c.order_id
LEFT JOIN ordertimeout.payments AS p ON p.payment_id = c.payment_id
LEFT JOIN ordertimeout.payment_methods AS m
       ON m.method = ordertimeout._method_of(p, o.payment_method)
CROSS JOIN ordertimeout.settings AS s;

COMMENT ON VIEW ordertimeout._conflicts_with_policy IS
    'every conflict with the late-payment policy that applies to it: that of the method its payment was started with (the order''s when not known here), else the settings''';
