// Package sidecar assembles one running sidecar: a pgx pool whose sessions
// name the sidecar (ordertimeout.actor = "sidecar:<name>"), the cancel sweep
// (package sweep), a River client serving queue "ordertimeout" with the
// workers of package worker, the listener (package listener: one LISTEN
// connection for the conflicts and the sweep's wake-ups), the metrics
// registry every part registers its own metrics on, with the database's
// statistics read at each scrape (package metrics), and the HTTP server
// (package server).
//
// Run starts them and, when its context ends, stops them in order: the sweep
// stops claiming (a sweep in flight commits), the listener closes, River stops
// fetching and waits up to ShutdownTimeout for running jobs, then cancels
// them (the workers hand an interrupted job back with river.JobSnooze(0)),
// and the HTTP server closes. Nothing is lost at any point: every piece of
// work is a row that another sidecar, or this one restarted, picks up.
//
// Files: config.go is Config, its defaults and its validation; sidecar.go is
// New (the pool) and Run; build.go builds the gateway driver and the River
// client with its workers; listen.go the listener and the sweep it wakes;
// http.go the HTTP server with River's UI and the console.
package sidecar
