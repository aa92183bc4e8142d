package migrator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"

	"github.com/ordertimeout/ordertimeout/migrations"
)

// Migrator applies the embedded migrations to one database. Close it when
// done.
type Migrator struct {
	m      *migrate.Migrate
	driver database.Driver
	url    string
	logger *slog.Logger
}

// Open connects to the database at databaseURL (a postgres:// URL or a
// keyword/value string).
func Open(databaseURL string, logger *slog.Logger) (*Migrator, error) {
	m, driver, err := migrations.NewWithDriver(databaseURL)
	if err != nil {
		return nil, err
	}
	if logger != nil {
		m.Log = logAdapter{logger}
	} else {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Migrator{m: m, driver: driver, url: databaseURL, logger: logger}, nil
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
// migrations.Preflight. It reports whether anything changed. A dirty mark
// left by a migration killed or failed before is settled first (Settle);
// a migration that fails now has its mark settled too, so that once what
// its error names is fixed, up runs again without `migrate force`.
func (g *Migrator) Up(ctx context.Context) (changed bool, err error) {
	s, err := g.Settle(ctx)
	if err != nil {
		return false, fmt.Errorf("migrate up: %w; nothing was migrated", err)
	}
	if s.Dirty {
		g.logger.Warn("migrate up: " + s.String())
		changed = true
	}
	if err := migrations.Preflight(g.url); err != nil {
		return changed, err
	}
	err = g.m.Up()
	if errors.Is(err, migrate.ErrNoChange) {
		return changed, nil
	}
	if err != nil {
		err = fmt.Errorf("migrate up: %w", err)
		s, serr := g.Settle(ctx)
		switch {
		case serr != nil:
			err = errors.Join(err, serr)
		case s.Dirty && s.Schema < s.Marked:
			err = fmt.Errorf("%w; migration %d rolled back, and version %d is recorded: fix what the error names and run migrate up again", err, s.Marked, s.Schema)
		case s.Dirty:
			err = fmt.Errorf("%w; but %s", err, s)
		}
		return true, err
	}
	return true, nil
}

// Down rolls back steps migrations, or every migration when steps is 0
// (which removes ordertimeout and River's tables with all their data). It
// refuses, before anything runs, a dirty database and more steps than there
// are applied migrations: golang-migrate would roll back every applied one
// and only then report the shortfall. Unless dropData, it also refuses to
// roll back a migration whose down drops tables or columns that hold data
// (see losses), naming what would be lost.
func (g *Migrator) Down(ctx context.Context, steps int, dropData bool) (changed bool, err error) {
	if steps < 0 {
		return false, fmt.Errorf("migrate down: steps must be positive, got %d", steps)
	}
	// A dirty mark is settled, but the rollback is not done: the steps
	// were counted from a version that may not have been the schema's.
	s, err := g.Settle(ctx)
	if err != nil {
		return false, fmt.Errorf("migrate down: %w; nothing was rolled back", err)
	}
	if s.Dirty {
		return true, fmt.Errorf("migrate down: %s; nothing was rolled back: migrate down again rolls back from version %d", s, s.Schema)
	}
	if steps == 0 {
		err = g.m.Down()
	} else {
		current, target, cerr := g.checkDown(steps)
		if cerr != nil {
			return false, cerr
		}
		if !dropData {
			if lerr := g.checkLoss(current, target); lerr != nil {
				return false, lerr
			}
		}
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

// checkDown refuses to roll back steps migrations when the database is dirty
// or fewer than steps migrations are applied. It returns the applied version
// and the version the rollback leaves (0: none).
func (g *Migrator) checkDown(steps int) (current, target uint, err error) {
	current, dirty, err := g.Version()
	if err != nil {
		return 0, 0, err
	}
	if dirty {
		// Settle ran just before; another migrate marked it since.
		return 0, 0, fmt.Errorf("migrate down: version %d is dirty (another migrate failed or is running): nothing was rolled back; try again", current)
	}
	versions, err := migrations.Versions()
	if err != nil {
		return 0, 0, err
	}
	var applied []uint
	for _, v := range versions {
		if v <= current {
			applied = append(applied, v)
		}
	}
	if steps > len(applied) {
		return 0, 0, fmt.Errorf("migrate down: %d migrations are applied (version %d), fewer than %d; nothing was rolled back (down --all rolls back every migration, dropping all data)",
			len(applied), current, steps)
	}
	if steps < len(applied) {
		target = applied[len(applied)-steps-1]
	}
	return current, target, nil
}

// Force records version as applied and clean, without running anything: for
// a database that a failed migration left dirty. PostgreSQL runs each
// migration file in one transaction, so a failed one changed nothing but the
// dirty mark, and the version to force is the one before it. Version must be
// 0 (none applied) or a migration's.
func (g *Migrator) Force(version int) error {
	if version < 0 {
		return fmt.Errorf("migrate force: version must not be negative, got %d", version)
	}
	if version > 0 {
		versions, err := migrations.Versions()
		if err != nil {
			return err
		}
		if !slices.Contains(versions, uint(version)) {
			return fmt.Errorf("migrate force: no migration has version %d: give one of %s, or 0 for none; nothing was recorded",
				version, ranges(versions))
		}
	}
	// 0 is "none applied": golang-migrate's NilVersion (-1). Recorded as 0,
	// it is a version no migration has, and every later up fails.
	v := version
	if v == 0 {
		v = database.NilVersion
	}
	if err := g.m.Force(v); err != nil {
		return fmt.Errorf("migrate force %d: %w", version, err)
	}
	return nil
}

// ranges writes ascending versions as runs: "1 to 46", or "1 to 8, 10 to 46"
// if 9 were missing.
func ranges(versions []uint) string {
	var runs []string
	for i := 0; i < len(versions); {
		j := i
		for j+1 < len(versions) && versions[j+1] == versions[j]+1 {
			j++
		}
		if i == j {
			runs = append(runs, strconv.FormatUint(uint64(versions[i]), 10))
		} else {
			runs = append(runs, fmt.Sprintf("%d to %d", versions[i], versions[j]))
		}
		i = j + 1
	}
	return strings.Join(runs, ", ")
}

// Version returns the applied version (0 when none) and whether a migration
// killed or failed left the mark dirty (also "none" dirty: golang-migrate's
// mark when the down of the first migration did not finish).
func (g *Migrator) Version() (version uint, dirty bool, err error) {
	v, dirty, err := g.driver.Version()
	if err != nil {
		return 0, false, fmt.Errorf("read migration version: %w", err)
	}
	if v < 0 {
		return 0, dirty, nil
	}
	return uint(v), dirty, nil
}

type logAdapter struct{ l *slog.Logger }

// Printf logs one line of golang-migrate at info level.
func (a logAdapter) Printf(format string, v ...any) {
	a.l.Info(strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// Verbose turns golang-migrate's verbose logging off.
func (a logAdapter) Verbose() bool { return false }
