package migrations

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	pgxmigrate "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// New returns a golang-migrate migrator of FS for the database at
// databaseURL (a postgres:// URL or a keyword/value string), using the pgx v5
// driver. Close it: that also closes its database connection.
func New(databaseURL string) (*migrate.Migrate, error) {
	m, _, err := NewWithDriver(databaseURL)
	return m, err
}

// NewWithDriver is New, also returning the migrator's database driver: its
// Lock is golang-migrate's advisory lock, which a change of the version mark
// made beside the migrator (as migrator.Settle does) must hold, on the
// driver's own connection.
func NewWithDriver(databaseURL string) (*migrate.Migrate, database.Driver, error) {
	config, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, nil, fmt.Errorf("parse database URL: %w", err)
	}
	// A migration whose client dies (kill -9, a lost connection) must not go
	// on without it: PostgreSQL notices a vanished client only when it next
	// writes to it, so a migration waiting for a lock that live traffic
	// holds took it once free, ran to its end and committed, while
	// golang-migrate's mark stayed dirty, and the documented recovery
	// (force the version before, up again) ran it twice. Checked every
	// second, the dead client's migration is rolled back instead.
	config.RuntimeParams["client_connection_check_interval"] = "1s"
	db := stdlib.OpenDB(*config)
	driver, err := pgxmigrate.WithInstance(db, &pgxmigrate.Config{})
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("open migration driver: %w", err)
	}
	source, err := iofs.New(FS, ".")
	if err != nil {
		driver.Close()
		return nil, nil, fmt.Errorf("open embedded migrations: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", source, "pgx5", driver)
	if err != nil {
		source.Close()
		driver.Close()
		return nil, nil, fmt.Errorf("create migrator: %w", err)
	}
	return m, driver, nil
}

// Versions returns the versions of the migrations in FS, ascending.
func Versions() ([]uint, error) {
	source, err := iofs.New(FS, ".")
	if err != nil {
		return nil, fmt.Errorf("open embedded migrations: %w", err)
	}
	defer source.Close()
	var versions []uint
	v, err := source.First()
	for err == nil {
		versions = append(versions, v)
		v, err = source.Next(v)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("list embedded migrations: %w", err)
	}
	return versions, nil
}

// Up applies every migration not yet applied to the database at databaseURL
// and closes every connection it opened (a template database must keep
// none).
func Up(databaseURL string) error {
	if err := Preflight(databaseURL); err != nil {
		return err
	}
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

// Preflight refuses, before golang-migrate starts, what a migration would
// refuse halfway: golang-migrate marks the database dirty on any failed
// migration, even one whose transaction rolled back, and then needs `migrate
// force`. Today: 000010 refuses NaN, infinite, negative and >= 10^15 amounts,
// which 000009 accepted; 000020 cannot change the types of columns that a
// materialized view or a SQL-standard function body depends on.
func Preflight(databaseURL string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("connect for the migration checks: %w", err)
	}
	defer conn.Close(ctx)
	var installed bool
	err = conn.QueryRow(ctx, `SELECT to_regclass('public.schema_migrations') IS NOT NULL
	                             AND to_regclass('ordertimeout.conflicts') IS NOT NULL`).Scan(&installed)
	if err != nil {
		return fmt.Errorf("read the migration version: %w", err)
	}
	if !installed {
		return nil
	}
	var version *int64
	if err := conn.QueryRow(ctx, "SELECT max(version) FROM public.schema_migrations").Scan(&version); err != nil {
		return fmt.Errorf("read the migration version: %w", err)
	}
	if version == nil || *version >= 20 {
		return nil
	}
	if err := preflight20(ctx, conn); err != nil {
		return err
	}
	if *version >= 10 {
		return nil
	}
	var bad *string
	err = conn.QueryRow(ctx, `
		SELECT string_agg(x, ', ')
		  FROM (SELECT 'order ' || o.order_id AS x FROM ordertimeout.orders AS o
		         WHERE NOT (o.amount >= 0 AND o.amount < 1000000000000000)
		        UNION ALL
		        SELECT 'payment ' || p.payment_id FROM ordertimeout.payments AS p
		         WHERE NOT (p.amount >= 0 AND p.amount < 1000000000000000)
		        UNION ALL
		        SELECT 'conflict ' || c.conflict_id FROM ordertimeout.conflicts AS c
		         WHERE NOT (c.amount >= 0 AND c.amount < 1000000000000000)
		        LIMIT 20) AS b`).Scan(&bad)
	if err != nil {
		return fmt.Errorf("check amounts before migration 000010: %w", err)
	}
	if bad != nil {
		return fmt.Errorf("migration 000010 refuses amounts that are NaN, infinite, negative or >= 10^15, "+
			"which earlier versions accepted; fix or delete them first (nothing was migrated): %s", *bad)
	}
	return nil
}

// preflight20 refuses what migration 000020 cannot carry through its change
// of column types: it drops and re-creates the views that read orders,
// payments, events and stock (directly or through other views), but a
// materialized view or a function with a SQL-standard body that depends on
// them makes ALTER COLUMN TYPE fail.
func preflight20(ctx context.Context, conn *pgx.Conn) error {
	var bad *string
	err := conn.QueryRow(ctx, `
		WITH RECURSIVE dependent (oid) AS (
		    SELECT c.oid FROM pg_class AS c
		     WHERE c.oid IN ('ordertimeout.orders'::regclass, 'ordertimeout.payments'::regclass,
		                     'ordertimeout.events'::regclass, 'ordertimeout.stock'::regclass)
		    UNION
		    SELECT r.ev_class
		      FROM dependent AS dep
		      JOIN pg_depend AS d ON d.refclassid = 'pg_class'::regclass AND d.refobjid = dep.oid
		      JOIN pg_rewrite AS r ON d.classid = 'pg_rewrite'::regclass AND r.oid = d.objid
		)
		SELECT string_agg(x, ', ' ORDER BY x)
		  FROM (SELECT DISTINCT 'materialized view ' || c.oid::regclass::text AS x
		          FROM dependent AS dep JOIN pg_class AS c ON c.oid = dep.oid
		         WHERE c.relkind = 'm'
		        UNION
		        SELECT DISTINCT 'function ' || d.objid::regprocedure::text
		          FROM dependent AS dep
		          JOIN pg_depend AS d ON d.refclassid = 'pg_class'::regclass AND d.refobjid = dep.oid
		         WHERE d.classid = 'pg_proc'::regclass) AS b`).Scan(&bad)
	if err != nil {
		return fmt.Errorf("check dependents before migration 000020: %w", err)
	}
	if bad != nil {
		return fmt.Errorf("migration 000020 changes the types of columns of orders, payments, events and stock, "+
			"which these objects depend on; drop them first and create them again after it (nothing was migrated): %s", *bad)
	}
	return nil
}
