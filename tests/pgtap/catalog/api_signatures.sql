-- The API contract: every public function of schema ordertimeout with its
-- exact arguments (names, types, defaults) and result type. A change here is a
-- change of the contract: it needs a migration and a CHANGELOG entry, and this
-- list is updated with them.
BEGIN;
\ir ../setup.psql
-- Only public (pgTAP): result types then print schema-qualified, as clients see them.
SET LOCAL search_path = public;
SELECT plan(1);

SELECT results_eq(
    $$SELECT p.proname::text COLLATE "default", pg_get_function_arguments(p.oid), pg_get_function_result(p.oid)
        FROM pg_proc AS p
        JOIN pg_namespace AS n ON n.oid = p.pronamespace
       WHERE n.nspname = 'ordertimeout'
         AND p.proname !~ '^_'
       ORDER BY 1$$,
    $$VALUES
    ('begin_payment', 'order_id text, payment_id text, paying_window interval DEFAULT NULL::interval, method text DEFAULT NULL::text', 'ordertimeout.order_state'),
    ('cancel_checked', 'order_id text, deadline_version integer', 'boolean'),
    ('cancel_due', 'max integer DEFAULT 1000', 'integer'),
    ('cancel_order', 'order_id text, reason text DEFAULT ''requested''::text', 'boolean'),
    ('close_cancelled', 'older_than interval, max integer DEFAULT 1000', 'integer'),
    ('configure', 'default_timeout interval DEFAULT NULL::interval, grace interval DEFAULT NULL::interval, paying_window interval DEFAULT NULL::interval, precheck text DEFAULT NULL::text, late_payment text DEFAULT NULL::text, webhooks boolean DEFAULT NULL::boolean, remind_before interval DEFAULT NULL::interval, paused boolean DEFAULT NULL::boolean', 'ordertimeout.settings'),
    ('confirm_payment', 'order_id text, payment_id text, amount numeric DEFAULT NULL::numeric, currency text DEFAULT NULL::text, paid_at timestamp with time zone DEFAULT NULL::timestamp with time zone', 'text'),
    ('conflict_info', 'id bigint', 'TABLE(conflict_id bigint, order_id text, payment_id text, kind text, amount numeric, detected_at timestamp with time zone, currency text, state text, late_payment text, handed_over_at timestamp with time zone, handed_over_why text)'),
    ('conflicts_to_resolve', 'max integer DEFAULT 1000', 'TABLE(conflict_id bigint, order_id text, payment_id text, kind text, amount numeric, detected_at timestamp with time zone, currency text, state text, late_payment text, handed_over_at timestamp with time zone, handed_over_why text)'),
    ('create_order', 'order_id text, items jsonb, timeout interval DEFAULT NULL::interval, options jsonb DEFAULT ''{}''::jsonb', 'ordertimeout.order_state'),
    ('extend_deadline', 'order_id text, by interval', 'ordertimeout.order_state'),
    ('fail_payment', 'order_id text, payment_id text', 'text'),
    ('finish_refund', 'conflict_id bigint, refund_id text', 'text'),
    ('hand_over_conflict', 'conflict_id bigint, reason text', 'text'),
    ('next_due', '', 'timestamp with time zone'),
    ('open_conflicts', 'max integer DEFAULT 1000', 'TABLE(conflict_id bigint, order_id text, payment_id text, kind text, amount numeric, detected_at timestamp with time zone, currency text, state text, late_payment text, handed_over_at timestamp with time zone, handed_over_why text)'),
    ('order_events', 'order_id text', 'TABLE(event_id bigint, from_status text, to_status text, cause text, actor text, lateness interval, at timestamp with time zone, detail jsonb)'),
    ('order_info', 'order_id text', 'ordertimeout.order_state'),
    ('order_payments', 'order_id text', 'TABLE(payment_id text, status text, amount numeric, started_at timestamp with time zone, confirmed_at timestamp with time zone, failed_at timestamp with time zone, currency text, method text)'),
    ('plan_next_sweep', 'max_sleep interval, held_due_by timestamp with time zone DEFAULT NULL::timestamp with time zone, retry_held_in interval DEFAULT NULL::interval', 'TABLE(wake_at timestamp with time zone, held boolean)'),
    ('plan_sleep', 'max_sleep interval', 'timestamp with time zone'),
    ('preview_due', 'max integer DEFAULT 100', 'TABLE(order_id text, cancel_at timestamp with time zone, overdue interval, deadline_version integer, found_by text, action text)'),
    ('purge_orders', 'closed_older_than interval, max integer DEFAULT 1000, paid_older_than interval DEFAULT NULL::interval', 'integer'),
    ('put_payment_method', 'method text, paying_window interval, gateway_close boolean DEFAULT true, late_payment text DEFAULT NULL::text', 'ordertimeout.payment_methods'),
    ('put_points', 'account_id text, balance bigint', 'ordertimeout.points_accounts'),
    ('put_stock', 'sku text, qty bigint', 'ordertimeout.stock'),
    ('reconcile_payments', 'transactions jsonb, period_start timestamp with time zone, period_end timestamp with time zone, report_missing boolean DEFAULT true, source text DEFAULT NULL::text', 'TABLE(line integer, payment_id text, order_id text, outcome text, detail text)'),
    ('reconcile_watermark', 'source text', 'timestamp with time zone'),
    ('rescue_stuck_jobs', 'running_for interval, max integer DEFAULT 1000', 'TABLE(retried integer, discarded integer, cancelled integer)'),
    ('resolve_conflict', 'conflict_id bigint, resolution text, note text DEFAULT NULL::text', 'text'),
    ('run_sweeper', 'IN max integer DEFAULT 1000, IN max_sleep interval DEFAULT ''00:00:00.1''::interval, IN duration interval DEFAULT NULL::interval', NULL),
    ('sweep_due', 'max integer DEFAULT 1000', 'TABLE(claimed integer, cancelled integer, caught_by_sweep integer, checks integer, moot integer, deferred integer)')
    $$,
    'the API functions, their arguments and results are exactly the documented ones');

SELECT * FROM finish();
ROLLBACK;
