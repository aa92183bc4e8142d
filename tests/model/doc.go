// Package model holds the seeded, randomized model test of ordertimeout's SQL
// API: many sessions at once create, pay, fail, cancel, extend, sweep,
// resolve and close a few hundred orders whose timeouts fire during the run,
// a reference model in Go records every answer, and at the end the database
// must agree with the model and with the money-safety invariants of
// docs/design.md.
//
// The money dimension: confirmations give the order's amount (also written
// with another scale), its currency, none at all (unverified), or another
// amount or currency (an amount_mismatch conflict, live or late); NaN,
// infinite, negative and 10^15 amounts and malformed currencies must be
// refused and leave no trace. A resolve worker claims conflicts for a refund,
// refunds at a model gateway by the payment's idempotency key and records it
// with finish_refund, sometimes failing in between (the recording rolled
// back, its backend killed inside the transaction, or never recorded);
// admins reinstate, refund and hand off the same conflicts meanwhile, and
// close_cancelled races late payments. The gateway's ledger must end equal to
// the recorded refunds, every refund claimed must end refunded, and no CLOSED
// order may show an open conflict, also while the sessions run (a session
// runs invariant.Check now and then).
//
// Answers are judged on the whole history, by the calls' start and end
// times, never in the order the calls happened to return: two concurrent
// calls may return in either order whatever the order they took effect in.
//
// The test needs DATABASE_URL (run it through tests/bin/withpg). A failure
// names the seed; `go test ./tests/model -run TestModel -model.seed=N` replays
// the same operation choices (the interleaving of the sessions differs from
// run to run; the checks hold for every interleaving). `make soak-model` runs
// it for longer on more orders.
package model
