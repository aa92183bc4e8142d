package sidecar

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrBehindPooler is returned by Run when the sidecar's connections go
// through a connection pooler (PgBouncer and the like) instead of straight
// to PostgreSQL: the pooler refused, or dropped, the session settings the
// sidecar sends at connect.
var ErrBehindPooler = errors.New("the sidecar needs a direct connection to PostgreSQL, not one through a connection pooler such as PgBouncer: " +
	"it sends session settings at connect (ordertimeout.actor, default_transaction_isolation) and LISTENs " +
	"(README: Connection poolers)")

// ActorPrefix and the sidecar's name are the actor of every event it causes;
// MaxActor is the most characters the database takes for an actor (OT148).
const (
	ActorPrefix = "sidecar:"
	MaxActor    = 200
)

// sessionSettings are the settings New sends at connect that the sidecar's
// work depends on: the actor every event it causes names, and READ
// COMMITTED, without which sweep_due and cancel_checked refuse to run
// (OT154).
func sessionSettings(name string) map[string]string {
	return map[string]string{
		"ordertimeout.actor":            ActorPrefix + name,
		"default_transaction_isolation": "read committed",
	}
}

// checkDirect makes sure that a connection of pool is a PostgreSQL session
// with the settings sent at connect (want). A pooler refuses startup
// parameters it does not know (PgBouncer: "unsupported startup parameter",
// SQLSTATE 08P01), or drops them when told to ignore them; either way the
// sidecar would fail every sweep under another isolation level, or write
// another actor into the audit trail, and its LISTEN would hear nothing
// (a transaction-mode pooler hands the session to other clients). Both are
// ErrBehindPooler. Its query uses the simple protocol, so that it leaves no
// prepared statement behind on a pooled server session for the next start
// to trip over. Any other error is returned as it is: Run does not start
// without the check, as River does not without a database.
func checkDirect(ctx context.Context, pool *pgxpool.Pool, want map[string]string) error {
	names := []string{"ordertimeout.actor", "default_transaction_isolation"}
	got := make([]*string, len(names))
	err := pool.QueryRow(ctx, "SELECT current_setting($1, true), current_setting($2, true)",
		pgx.QueryExecModeSimpleProtocol, names[0], names[1]).Scan(&got[0], &got[1])
	if refusedStartupParameter(err) {
		return fmt.Errorf("%w: %w", ErrBehindPooler, err)
	}
	if err != nil {
		return fmt.Errorf("check the connection's settings: %w", err)
	}
	var wrong []string
	for i, name := range names {
		if got[i] == nil || *got[i] != want[name] {
			shown := "not set"
			if got[i] != nil {
				shown = fmt.Sprintf("%q", *got[i])
			}
			wrong = append(wrong, fmt.Sprintf("%s is %s, not %q", name, shown, want[name]))
		}
	}
	if len(wrong) > 0 {
		return fmt.Errorf("%w: connected, but the settings sent at connect were not applied (%s)", ErrBehindPooler, strings.Join(wrong, "; "))
	}
	return nil
}

// refusedStartupParameter reports whether err is a server's refusal of a
// startup parameter, which PostgreSQL itself never makes for a custom
// setting such as ordertimeout.actor.
func refusedStartupParameter(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "08P01" && strings.Contains(pe.Message, "unsupported startup parameter")
}

// setParam sets the startup parameter name of params to value, first
// removing the same name spelled in another case: PostgreSQL folds A-Z in
// setting names, and pgx would send both spellings, leaving PostgreSQL to
// apply whichever came last in map order. With keep, a non-empty value
// already given under any spelling is kept, under name.
func setParam(params map[string]string, name, value string, keep bool) {
	for given, v := range params {
		if asciiEqualFold(given, name) {
			delete(params, given)
			if keep && v != "" {
				value = v
			}
		}
	}
	params[name] = value
}

// asciiEqualFold reports whether a and b are equal with A-Z folded to a-z
// only, as PostgreSQL compares setting names (strings.EqualFold also folds
// other letters, such as the long s to s).
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
