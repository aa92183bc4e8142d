// Package sidecarproc supervises this repository's binaries as child
// processes: it builds them, starts sidecars (`ordertimeout run`) and the fake
// payment gateway (ordertimeout-fakegateway), waits until they answer HTTP,
// watches them exit, stops them with SIGTERM (killing them after
// a timeout) or kills them with SIGKILL, reads a sidecar's /metrics, and
// drives the fake's control API. Every program of this repository that runs
// them uses it: the demo (sidecar/cmd/ordertimeout-demo), the fault
// tests (tests/fault), the soak (tests/soak, tests/internal/soak) and the
// benchmark (tests/bench).
//
// It lives here, under sidecar/ but outside sidecar/internal, because Go's
// internal rule lets no internal directory serve both the demo (under
// sidecar/) and the programs under tests/. Being outside internal makes it
// importable by anyone, but it is not part of ordertimeout's supported API:
// it exists for this repository's own programs and changes with them.
package sidecarproc
