// Package sweep drives the in-database cancel sweep.
//
// An order's timeout is a River job row of kind ordertimeout_expire in queue
// ordertimeout_expire, written in the same transaction as the order. No River
// client serves that queue, so River's fetch loop never takes these rows; the
// only thing that claims them is ordertimeout.sweep_due, which locks due rows
// with FOR UPDATE SKIP LOCKED and cancels their orders set-based in one
// transaction. River's own queue, ordertimeout, holds the jobs that need the
// outside world (gateway checks, closes, refunds, webhooks) and is served by
// the sidecar's River client (package worker). The two never touch each
// other's rows.
//
// A Sweeper calls sweep_due in a loop. A full batch means more is due: it
// keeps going at once, with several sessions in parallel. A sweep that
// deferred orders (a lock their cancel needs was held) is followed by another
// after a millisecond, then two, at most twice in a row. Otherwise it asks
// ordertimeout.plan_next_sweep when the next deadline comes (at most MaxSleep
// away; due orders the sweep passed over because another transaction held
// them, only after a pause as long as they have been due, at most a second)
// and sleeps until then, or until a NOTIFY on channel ordertimeout_wake says
// that an order now due sooner was written. It never polls on a fixed long
// interval and does not depend on River's scheduler.
//
// Any number of Sweepers, in any number of processes, may run against one
// database: SKIP LOCKED hands each due row to exactly one of them, and the
// order's deadline version fences a timer that can no longer act. None of
// them needs to know about the others.
package sweep
