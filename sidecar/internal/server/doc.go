// Package server is the sidecar's HTTP server: /metrics (Prometheus text
// format), /healthz (the process is up), /readyz (the database answers and
// River is working) and River's web UI at /riverui/.
//
// It listens on localhost unless configured otherwise. River's UI can
// cancel, delete and retry jobs and has no authentication of its own: with
// UIUser and UIPassword set it is behind HTTP basic auth; without them it is
// served only on a loopback address.
package server
