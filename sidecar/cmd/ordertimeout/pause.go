package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/config"
	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

const pauseDescription = `
pause stops every timeout cancel until resume: the timers stay, sweeps claim
nothing, gateway checks do not cancel and gateway closes wait. Payments,
confirmations and conflicts go on, and an order the buyer or the shop cancels
(cancel_order) is still cancelled. Use it during an incident at the gateway or
in the shop's payment callbacks, when a timeout would cancel orders that are
paid. pause returns once the timeout cancels already under way have
committed; it waits at most 2 seconds for them, then warns, naming the
backends whose transactions still hold some, and exits 2: those cancels
commit if those transactions do. resume lets the sweepers drain
the backlog at once; each cancel of an order that came due during the pause
records its lateness and that it waited for the pause. Both call
ordertimeout.configure(paused => ...) as --actor.`

func pauseCmd(ctx context.Context, args []string, paused bool) error {
	name := "resume"
	if paused {
		name = "pause"
	}
	var databaseURL, actor string
	f := config.New(name, "ordertimeout "+name+" [flags]", pauseDescription)
	f.String(&databaseURL, "database-url", "", "PostgreSQL connection string (URL or key=value) of a role that may configure (ordertimeout_admin)", "DATABASE_URL", config.EnvName("database-url"))
	f.String(&actor, "actor", "", "who pauses or resumes, recorded in settings.paused_by (default cli:<login role>)", config.EnvName("actor"))
	if err := f.Parse(args, os.Getenv); err != nil {
		return err
	}
	if databaseURL == "" {
		return fmt.Errorf("%s: database URL is required (--database-url or DATABASE_URL)", name)
	}
	cc, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return fmt.Errorf("%s: database URL: %w", name, err)
	}
	// configure warns when timeout cancels made before the pause have not
	// committed within its wait: say so, and exit 2. Any other warning (a
	// bad setting, at connect) is printed, no more.
	warned := false
	cc.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if n.SeverityUnlocalized == "WARNING" {
			warned = warned || (paused && sqlstate.PauseUnconfirmed(n))
			fmt.Fprintf(os.Stderr, "%s: warning: %s\n", name, n.Message)
		}
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return fmt.Errorf("%s: connect to database: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT set_config('ordertimeout.actor', coalesce(nullif($1, ''), 'cli:' || session_user), true)", actor); err != nil {
		return fmt.Errorf("%s: set actor: %w", name, err)
	}
	var (
		now               bool
		pausedAt, resumed *time.Time
		by                *string
	)
	err = tx.QueryRow(ctx, "SELECT paused, paused_at, paused_by, resumed_at FROM ordertimeout.configure(paused => $1)", paused).
		Scan(&now, &pausedAt, &by, &resumed)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	switch {
	case now && pausedAt != nil:
		fmt.Printf("paused: no timeout cancels since %s (by %s); resume with 'ordertimeout resume'\n",
			pausedAt.UTC().Format(time.RFC3339), deref(by))
		if warned {
			return needsPerson(name + ": paused, but timeout cancels made before the pause may still commit (see the warning)")
		}
	case !now:
		fmt.Println("running: timeout cancels resumed; the sweepers drain the backlog now")
	default:
		return errors.New(name + ": settings answered an inconsistent pause state")
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
