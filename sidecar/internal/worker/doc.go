// Package worker holds the sidecar's River job kinds: the work that needs
// the outside world. One kind per file, each an XxxArgs with a stable Kind()
// and an XxxWorker.
//
// The database inserts most of these jobs itself, in the transaction that
// makes them necessary, into River queue "ordertimeout" (Queue), which the
// sidecar's River client serves:
//
//   - ordertimeout_payment_check at a PAYING order's paying_until
//     (begin_payment): ask the gateway, then confirm or fail the payment;
//   - ordertimeout_precancel_check when sweep_due finds a due order whose
//     precheck policy wants the gateway asked first: confirm if paid, else
//     cancel_checked at the version the check was made for;
//   - ordertimeout_gateway_close after a cancel of an order that had a
//     payment attempt whose method closes (payments.method; none named:
//     the defaults, which close): close the order's payments at the
//     gateway; a buyer who paid anyway becomes a late-payment conflict;
//   - ordertimeout_webhook per cancelled / paid / conflict / resolved event
//     when settings.webhooks is on, and expiring-soon reminders.
//
// The sidecar's River leader inserts ordertimeout_reconcile periodically
// (--reconcile-every), unique by its source among live jobs: it reads the
// gateway's payments since the source's watermark and reconciles them
// (package reconcile), so a payment whose callback never came is found
// within one period.
//
// The sidecar inserts ordertimeout_resolve_conflict itself (package listener),
// unique by its arguments, so there is one job per conflict however many
// sidecars hear the NOTIFY or read the backlog.
//
// Timer rows (kind ordertimeout_expire) are not River work: they sit in
// queue ordertimeout_expire, which no River client serves, and only
// ordertimeout.sweep_due claims them (package sweep).
//
// Retries: a gateway that is down, times out, says "pending" or gives a bad
// answer (gateway.ErrBadAnswer: malformed, ambiguous, outside the contract,
// "paid" without an amount for an order that has one, or a payment id,
// amount or currency confirm_payment refuses, a payment id of another order
// included) makes a job snooze with a growing pause, at most 5 minutes
// (river.JobSnooze does not use up attempts, so the job is never discarded:
// a discarded check would leave an order PENDING or PAYING for good). A bad answer also logs an error naming
// the order and counts outcome "bad_answer". Other errors (database errors)
// are returned to River, which records them and retries with its backoff; on
// the last attempt the checks, closes and refunds snooze instead of failing
// for good. A call the gateway rate limit holds back (gateway.ErrThrottled)
// keeps a token reserved for it, recorded in the job's metadata, and the
// job snoozes until it is due (outcome "throttled"; see gatewayTicket). No worker
// ever cancels an order that may be paid: only a gateway answer of "failed",
// of "none" once the gateway can no longer take the payment (see
// noneIsFinal), or of "paid" by money the database records as a conflict,
// leads to cancel_checked or fail_payment.
package worker
