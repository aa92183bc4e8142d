-- ordertimeout_app may run the order lifecycle through the API and nothing
-- else: no table, no River job row, no sweep, no administration, no private
-- helper.
BEGIN;
\ir ../setup.psql
SET LOCAL search_path = public, ordertimeout;
SELECT plan(21);

INSERT INTO ordertimeout.stock (sku, available) VALUES ('A', 10);
SET LOCAL ROLE ordertimeout_app;

SELECT lives_ok($$SELECT ordertimeout.create_order('o1', '[{"sku": "A", "qty": 1}]')$$, 'can create_order');
SELECT lives_ok($$SELECT ordertimeout.begin_payment('o1', 'p1')$$, 'can begin_payment');
SELECT lives_ok($$SELECT ordertimeout.fail_payment('o1', 'p1')$$, 'can fail_payment');
SELECT lives_ok($$SELECT ordertimeout.extend_deadline('o1', interval '1 minute')$$, 'can extend_deadline');
SELECT lives_ok($$SELECT ordertimeout.confirm_payment('o1', 'p2')$$, 'can confirm_payment');
SELECT lives_ok($$SELECT ordertimeout.create_order('o2', '[{"sku": "A", "qty": 1}]')$$, 'can create another order');
SELECT lives_ok($$SELECT ordertimeout.cancel_order('o2')$$, 'can cancel_order');
SELECT lives_ok($$SELECT * FROM ordertimeout.order_info('o1')$$, 'can order_info');
SELECT lives_ok($$SELECT * FROM ordertimeout.order_events('o1')$$, 'can order_events');
SELECT lives_ok($$SELECT * FROM ordertimeout.order_payments('o1')$$, 'can order_payments');

SELECT throws_ok($$SELECT * FROM ordertimeout.orders$$, '42501', NULL, 'cannot SELECT ordertimeout.orders');
SELECT throws_ok($$INSERT INTO ordertimeout.orders (order_id, created_at, expire_at, cancel_at, request)
                   VALUES ('x', now(), now() + interval '1 minute', now() + interval '1 minute', '{}')$$,
    '42501', NULL, 'cannot INSERT INTO ordertimeout.orders');
SELECT throws_ok($$UPDATE ordertimeout.stock SET available = 1000$$, '42501', NULL, 'cannot UPDATE ordertimeout.stock');
SELECT throws_ok($$SELECT * FROM public.river_job$$, '42501', NULL, 'cannot SELECT public.river_job');
SELECT throws_ok($$SELECT * FROM ordertimeout.sweep_stats$$, '42501', NULL, 'cannot SELECT the view sweep_stats');
SELECT throws_ok($$SELECT ordertimeout.put_stock('A', 1000)$$, '42501', NULL, 'cannot put_stock');
SELECT throws_ok($$SELECT ordertimeout.configure(grace => interval '0')$$, '42501', NULL, 'cannot configure');
SELECT throws_ok($$SELECT * FROM ordertimeout.sweep_due()$$, '42501', NULL, 'cannot sweep_due');
SELECT throws_ok($$SELECT * FROM ordertimeout.rescue_stuck_jobs(interval '1 minute')$$, '42501', NULL, 'cannot rescue_stuck_jobs');
SELECT throws_ok($$SELECT ordertimeout.resolve_conflict(1, 'refund')$$, '42501', NULL, 'cannot resolve_conflict');
SELECT throws_ok($$SELECT * FROM ordertimeout._cancel_orders(ARRAY['o1'], NULL, ARRAY['requested'], NULL, false)$$,
    '42501', NULL, 'cannot call the private _cancel_orders');

SELECT * FROM finish();
ROLLBACK;
