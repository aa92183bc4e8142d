// Package fault holds the fault-injection tests of ordertimeout (issue 5): the
// real sidecar binary and the fake gateway run as processes against a real
// PostgreSQL, and each test breaks something on purpose, then checks the
// money-safety invariants (package invariant) and "nothing lost, nothing
// twice" (package outcome):
//
//   - kill -9 of a sidecar while a gateway check is in flight;
//   - pg_terminate_backend of the sidecar's LISTEN and pool connections in
//     the middle of a drain;
//   - PostgreSQL restarted (fast, then immediate) under load, on a private
//     cluster (package pgcluster);
//   - the gateway down, slow, and answering garbage;
//   - duplicate and out-of-order payment callbacks;
//   - the sidecar's wall clock 10 minutes fast and slow;
//   - `ordertimeout migrate up` and `down` killed at random moments.
//
// The tests are in _test.go files only; they need DATABASE_URL (make test
// sets it) and, for the restart test, the PostgreSQL server binaries.
package fault
