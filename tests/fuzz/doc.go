// Package fuzz fuzzes ordertimeout's SQL API on a real database:
// create_order with arbitrary ids, items, timeouts and options, and the
// functions that take order and payment ids with arbitrary strings.
//
// Every call must either succeed or fail with an SQLSTATE of class OT (the
// API's own errors), and a failed call must write nothing. Inputs that
// PostgreSQL itself refuses before the API sees them (invalid UTF-8, NUL, a
// JSON document jsonb cannot hold) are turned into ones it accepts, so the
// fuzzed surface is the API's, not PostgreSQL's input parsers. Each input runs
// in a transaction that is rolled back.
//
// `go test ./tests/fuzz` runs the seed corpus (testdata/fuzz); `make fuzz`
// fuzzes each target for FUZZTIME. The tests need DATABASE_URL (run them
// through tests/bin/withpg).
package fuzz
