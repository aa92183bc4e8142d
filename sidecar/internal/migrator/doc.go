// Package migrator applies the embedded migrations (the top-level package
// migrations holds the SQL files: River's tables, then the ordertimeout
// schema) with golang-migrate: up, down and version. It is what `ordertimeout
// migrate` runs.
package migrator
