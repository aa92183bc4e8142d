// Package sidecartest helps the sidecar's tests: placing orders through the
// SQL API, starting a fake gateway and in-process sidecars on a pgtest
// database, and waiting for database conditions with a deadline (tests
// never sleep to synchronize).
package sidecartest
