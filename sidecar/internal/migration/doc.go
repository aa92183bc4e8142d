// Package migration applies the embedded migrations (package migrations:
// River's tables, then the ordertimeout schema) with golang-migrate: up, down
// and version. It is what `ordertimeout migrate` runs.
package migration
