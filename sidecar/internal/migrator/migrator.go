package migrator

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/golang-migrate/migrate/v4"

	"github.com/ordertimeout/ordertimeout/migrations"
)

// Migrator applies the embedded migrations to one database. Close it when
// done.
type Migrator struct {
	m   *migrate.Migrate
	url string
}

// Open connects to the database at databaseURL (a postgres:// URL or a
// keyword/value string).
func Open(databaseURL string, logger *slog.Logger) (*Migrator, error) {
	m, err := migrations.New(databaseURL)
	if err != nil {
		return nil, err
	}
	if logger != nil {
		m.Log = logAdapter{logger}
	}
	return &Migrator{m: m, url: databaseURL}, nil
}

// Close closes the source and the database connection.
func (g *Migrator) Close() error {
	sourceErr, dbErr := g.m.Close()
	if err := errors.Join(sourceErr, dbErr); err != nil {
		return fmt.Errorf("close migrator: %w", err)
	}
	return nil
}

// Up applies every migration not yet applied, after the checks of
// migrations.Preflight. It reports whether anything changed.
func (g *Migrator) Up() (changed bool, err error) {
	if err := migrations.Preflight(g.url); err != nil {
		return false, err
	}
	err = g.m.Up()
	if errors.Is(err, migrate.ErrNoChange) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("migrate up: %w", err)
	}
	return true, nil
}

// Down rolls back steps migrations, or every migration when steps is 0
// (which removes ordertimeout and River's tables with all their data).
func (g *Migrator) Down(steps int) (changed bool, err error) {
	if steps < 0 {
		return false, fmt.Errorf("migrate down: steps must be positive, got %d", steps)
	}
	if steps == 0 {
		err = g.m.Down()
	} else {
		err = g.m.Steps(-steps)
	}
	if errors.Is(err, migrate.ErrNoChange) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("migrate down: %w", err)
	}
	return true, nil
}

// Force records version as applied and clean, without running anything: for
// a database that a failed migration left dirty. PostgreSQL runs each
// migration file in one transaction, so a failed one changed nothing but the
// dirty mark, and the version to force is the one before it.
func (g *Migrator) Force(version int) error {
	if version < 0 {
		return fmt.Errorf("migrate force: version must not be negative, got %d", version)
	}
	if err := g.m.Force(version); err != nil {
		return fmt.Errorf("migrate force %d: %w", version, err)
	}
	return nil
}

// Version returns the applied version (0 when none) and whether a failed
// migration left the database dirty.
func (g *Migrator) Version() (version uint, dirty bool, err error) {
	version, dirty, err = g.m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read migration version: %w", err)
	}
	return version, dirty, nil
}

type logAdapter struct{ l *slog.Logger }

// Printf logs one line of golang-migrate at info level.
func (a logAdapter) Printf(format string, v ...any) {
	a.l.Info(strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// Verbose turns golang-migrate's verbose logging off.
func (a logAdapter) Verbose() bool { return false }
