package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/config"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/status"
)

const statusDescription = `
Prints the state of an ordertimeout database as a table: orders by state, the
due backlog, the oldest overdue order, the cancel lag p50/p99 of timeout
cancels over the last --window (database timestamps), and open conflicts.`

func statusCmd(ctx context.Context, args []string) error {
	var (
		databaseURL string
		window      time.Duration
	)
	f := config.New("status", "ordertimeout status [flags]", statusDescription)
	f.String(&databaseURL, "database-url", "", "PostgreSQL connection string (URL or key=value)", "DATABASE_URL", config.EnvName("database-url"))
	f.Duration(&window, "window", 15*time.Minute, "how far back the cancel lag percentiles look; more than 0")
	if err := f.Parse(args, os.Getenv); err != nil {
		return err
	}
	if window <= 0 {
		return fmt.Errorf("status: window must be more than 0, got %s (--window)", window)
	}
	if databaseURL == "" {
		return errors.New("status: database URL is required (--database-url or DATABASE_URL)")
	}
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("status: connect to database: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	r, err := status.Read(ctx, conn, window)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	return r.Print(os.Stdout)
}
