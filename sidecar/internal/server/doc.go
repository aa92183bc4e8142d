// Package server is the sidecar's HTTP server: /metrics (Prometheus text
// format), /healthz (the process is up), /readyz (the database answers and
// River is working), River's web UI at /riverui/ and the ordertimeout
// console at /console/ (package console, with its own users).
//
// It listens on localhost unless configured otherwise. River's UI can
// cancel, delete and retry jobs and has no authentication of its own: with
// UIUser and UIPassword set it is behind HTTP basic auth; without them it is
// served only on a loopback address, and read-only (every method but GET,
// HEAD and OPTIONS gets 403), so that no other local user or process can
// change jobs through it.
//
// Every route is behind a guard against browsers acting for another site
// (see Server.Handler): a request whose Host is not an IP address,
// "localhost", the host of Addr or one of AllowedHosts gets 403 (DNS
// rebinding), and so does a request that may change something whose Origin,
// Sec-Fetch-Site or Referer says it comes from another origin (cross-site
// request forgery, which cached basic-auth credentials would not stop).
//
// Whatever its clients do, it does not take from the sweep what the sweep
// needs (see DefaultMaxConns and the limits beside it): at most 256
// connections open, one more making room by closing the one idle the
// longest; idle ones closed after 30 s; reads and answers bounded in time;
// and the pages that read the database served two at a time.
package server
