-- Installs ordertimeout into a database that already has River's tables
-- (migrations 000001 to 000008). This file and the files it includes are the
-- readable current state; migrations/ is the deploy history, and
-- `make check-migrations` proves both build the same database.
--
--   psql -v ON_ERROR_STOP=1 -f sql/install.sql

\ir schema.sql
\ir settings.sql
\ir payment_methods.sql
\ir stock.sql
\ir holds.sql
\ir orders.sql
\ir payments.sql
\ir ledger.sql
\ir types.sql
\ir views.sql
\ir retention.sql
\ir ../plpgsql/private.sql
\ir ../plpgsql/payment_methods.sql
\ir ../plpgsql/release.sql
\ir ../plpgsql/create_order.sql
\ir ../plpgsql/payments.sql
\ir ../plpgsql/cancel.sql
\ir ../plpgsql/sweep.sql
\ir ../plpgsql/resolve_conflict.sql
\ir ../plpgsql/reconcile.sql
\ir ../plpgsql/admin.sql
\ir ../plpgsql/reading.sql
\ir ../plpgsql/purge.sql
\ir ../plpgsql/cron.sql
\ir grants.sql
