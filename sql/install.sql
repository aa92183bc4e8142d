-- Installs ordertimeout into a database that already has River's tables
-- (migrations 000001 to 000008). This file and the files it includes are the
-- readable current state; migrations/ is the deploy history, and
-- `make check-migrations` proves both build the same database.
--
--   psql -v ON_ERROR_STOP=1 -f sql/install.sql

\ir schema.sql
\ir domains.sql
\ir settings.sql
\ir payment_methods.sql
\ir stock.sql
\ir holds.sql
\ir orders.sql
\ir payments.sql
\ir ledger.sql
\ir types.sql
-- River's tables are read through plpgsql/jobs.sql's views (the views of
-- views.sql too), so it comes first.
\ir ../plpgsql/jobs.sql
-- Its _method_of is read by a view of views.sql.
\ir ../plpgsql/payments.sql
\ir views.sql
\ir retention.sql
-- plpgsql/: a file per API function, named after it (its pgTAP tests are in
-- tests/pgtap/<function>/), and the private helpers (_name) in files by
-- concept. tests/layout checks the rule.
\ir ../plpgsql/checks.sql
\ir ../plpgsql/events.sql
\ir ../plpgsql/orders.sql
\ir ../plpgsql/release.sql
\ir ../plpgsql/begin_payment.sql
\ir ../plpgsql/cancel_checked.sql
\ir ../plpgsql/cancel_due.sql
\ir ../plpgsql/cancel_order.sql
\ir ../plpgsql/close_cancelled.sql
\ir ../plpgsql/configure.sql
\ir ../plpgsql/confirm_payment.sql
\ir ../plpgsql/conflict_info.sql
\ir ../plpgsql/conflicts_to_resolve.sql
\ir ../plpgsql/create_order.sql
\ir ../plpgsql/extend_deadline.sql
\ir ../plpgsql/fail_payment.sql
\ir ../plpgsql/finish_refund.sql
\ir ../plpgsql/next_due.sql
\ir ../plpgsql/open_conflicts.sql
\ir ../plpgsql/order_events.sql
\ir ../plpgsql/order_info.sql
\ir ../plpgsql/order_payments.sql
\ir ../plpgsql/plan_next_sweep.sql
\ir ../plpgsql/plan_sleep.sql
\ir ../plpgsql/preview_due.sql
\ir ../plpgsql/purge_orders.sql
\ir ../plpgsql/put_payment_method.sql
\ir ../plpgsql/put_points.sql
\ir ../plpgsql/put_stock.sql
\ir ../plpgsql/reconcile_payments.sql
\ir ../plpgsql/reconcile_watermark.sql
\ir ../plpgsql/rescue_stuck_jobs.sql
\ir ../plpgsql/resolve_conflict.sql
\ir ../plpgsql/hand_over_conflict.sql
\ir ../plpgsql/run_sweeper.sql
\ir ../plpgsql/sweep_due.sql
\ir triggers.sql
\ir grants.sql
