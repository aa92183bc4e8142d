package migrations

import (
	"errors"
	"fmt"

	"github.com/golang-migrate/migrate/v4"
	pgxmigrate "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// New returns a golang-migrate migrator of FS for the database at
// databaseURL (a postgres:// URL or a keyword/value string), using the pgx v5
// driver. Close it: that also closes its database connection.
func New(databaseURL string) (*migrate.Migrate, error) {
	config, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	db := stdlib.OpenDB(*config)
	driver, err := pgxmigrate.WithInstance(db, &pgxmigrate.Config{})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open migration driver: %w", err)
	}
	source, err := iofs.New(FS, ".")
	if err != nil {
		driver.Close()
		return nil, fmt.Errorf("open embedded migrations: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", source, "pgx5", driver)
	if err != nil {
		source.Close()
		driver.Close()
		return nil, fmt.Errorf("create migrator: %w", err)
	}
	return m, nil
}

// Up applies every migration not yet applied to the database at databaseURL
// and closes every connection it opened (a template database must keep
// none).
func Up(databaseURL string) error {
	m, err := New(databaseURL)
	if err != nil {
		return err
	}
	upErr := m.Up()
	sourceErr, dbErr := m.Close()
	if upErr != nil && !errors.Is(upErr, migrate.ErrNoChange) {
		return fmt.Errorf("migrate: %w", upErr)
	}
	if err := errors.Join(sourceErr, dbErr); err != nil {
		return fmt.Errorf("close migrator: %w", err)
	}
	return nil
}
