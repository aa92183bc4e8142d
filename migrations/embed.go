// Package migrations holds ordertimeout's database migrations in
// golang-migrate's format: NNNNNN_verb_object.up.sql and .down.sql, numbered
// 1, 2, 3... Versions 1 to 8 create River's tables (written by
// sidecar/cmd/genrivermigrations); version 9 creates the ordertimeout schema
// (generated from sql/install.sql by the since retired
// tests/bin/gen-initial-migration); 10 and 11 are written by hand; from 12 on
// sidecar/cmd/genmigration writes them (`make gen-migration`) from the change
// to plpgsql/ and sql/views.sql and the hand-written table statements in
// hand/, a folder this package does not embed (only *.sql at its top). Each
// file runs as one transaction: never enable multi-statement mode, which
// splits function bodies. `ordertimeout migrate` applies them through
// sidecar/internal/migrator.
package migrations

import "embed"

// FS holds every migration file, for golang-migrate's iofs source (New and
// Up in this package use it).
//
//go:embed *.sql
var FS embed.FS
