package pgtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestNewPool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	first := pgtest.NewPool(t)
	second := pgtest.NewPool(t)

	var exists bool
	if err := first.QueryRow(ctx, `SELECT to_regclass('river_job') IS NOT NULL`).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if !exists {
		t.Fatal("table river_job missing from the cloned database: migrations not applied")
	}

	// Clones are separate databases.
	if _, err := first.Exec(ctx, `INSERT INTO river_job (kind, args) VALUES ('pgtest', '{}')`); err != nil {
		t.Fatal(err)
	}
	var jobs int
	if err := second.QueryRow(ctx, `SELECT count(*) FROM river_job`).Scan(&jobs); err != nil {
		t.Fatal(err)
	}
	if jobs != 0 {
		t.Fatalf("second database has %d jobs, want 0", jobs)
	}

	// URL reaches the pool's database.
	conn, err := pgx.Connect(ctx, pgtest.URL(t, first))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM river_job`).Scan(&jobs); err != nil {
		t.Fatal(err)
	}
	if jobs != 1 {
		t.Fatalf("database at URL has %d jobs, want 1", jobs)
	}
}
