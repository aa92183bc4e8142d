-- An order's own precheck option overrides the setting: 'always' gets a check
-- without any payment attempt, 'never' is cancelled even when the setting is
-- 'always'.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(4);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SELECT ordertimeout.create_order('always', '[{"sku": "A", "qty": 1}]', NULL, '{"precheck": "always"}');
SELECT ordertimeout.create_order('plain', '[{"sku": "A", "qty": 1}]');
SELECT test.make_due('always');
SELECT test.make_due('plain');

SELECT results_eq(
    $$SELECT claimed, cancelled, checks FROM ordertimeout.sweep_due()$$,
    $$VALUES (2, 1, 1)$$,
    'one check, one cancel');
SELECT results_eq(
    $$SELECT o.order_id, o.status::text, r.kind
        FROM ordertimeout.orders AS o LEFT JOIN public.river_job AS r ON r.id = o.check_job_id
       ORDER BY o.order_id$$,
    $$VALUES ('always', 'PENDING', 'ordertimeout_precancel_check'), ('plain', 'CANCELLED', NULL)$$,
    'precheck always: a check without a payment attempt; the plain order is cancelled');

SELECT ordertimeout.configure(precheck => 'always');
SELECT ordertimeout.create_order('never', '[{"sku": "A", "qty": 1}]', NULL, '{"precheck": "never"}');
SELECT ordertimeout.create_order('default', '[{"sku": "A", "qty": 1}]');
SELECT test.make_due('never');
SELECT test.make_due('default');
SELECT results_eq(
    $$SELECT claimed, cancelled, checks FROM ordertimeout.sweep_due()$$,
    $$VALUES (2, 1, 1)$$,
    'with the setting always: one check, one cancel');
SELECT results_eq(
    $$SELECT order_id, status::text, check_job_id IS NOT NULL FROM ordertimeout.orders WHERE order_id IN ('never', 'default') ORDER BY order_id$$,
    $$VALUES ('default', 'PENDING', true), ('never', 'CANCELLED', false)$$,
    'precheck never is cancelled; the default follows the setting');

SELECT * FROM finish();
ROLLBACK;
