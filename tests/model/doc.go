// Package model holds the seeded, randomized model test of ordertimeout's SQL
// API: many sessions at once create, pay, fail, cancel, extend, sweep,
// resolve and close a few hundred orders whose timeouts fire during the run,
// a reference model in Go records every answer, and at the end the database
// must agree with the model and with the money-safety invariants of
// docs/design.md.
//
// The test needs DATABASE_URL (run it through tests/bin/withpg). A failure
// names the seed; `go test ./tests/model -run TestModel -model.seed=N` replays
// the same operation choices (the interleaving of the sessions differs from
// run to run; the checks hold for every interleaving). `make soak-model` runs
// it for longer on more orders.
package model
