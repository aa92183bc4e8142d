// Package timer names the rows in River's job table that are order timeouts.
//
// create_order (and every call that gives an order a new deadline) writes
// the order's timer in the same transaction as the order: a row of
// public.river_job whose kind and queue are both Name, with the order's id
// and deadline version in its args. No River client serves that queue, so
// River never works these rows; only ordertimeout.sweep_due claims them
// (the sidecar's sweep, or run_sweeper from pg_cron). The sidecar's own
// River jobs live in another queue.
//
// Use Name to tell timers apart when reading River's table, e.g. in a
// query or River's web UI:
//
//	SELECT count(*) FROM public.river_job WHERE queue = $1  -- timer.Name
//
// The package is outside internal/ so that applications and the tests in
// tests/ can import it.
package timer

// Name is the River job kind and the River queue of every order's timer row.
// The SQL writes the same name; a test checks that they agree.
const Name = "ordertimeout_expire"
