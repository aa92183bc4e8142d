package sqlstate_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/sqlstate"
)

// Only configure's warning about cancels it could not wait for is the
// pause's; the live warning is checked by the CLI's and the console's tests.
func TestPauseUnconfirmed(t *testing.T) {
	t.Parallel()
	warning := func(code, msg string) *pgconn.Notice {
		return &pgconn.Notice{SeverityUnlocalized: "WARNING", Code: code, Message: msg}
	}
	require.True(t, sqlstate.PauseUnconfirmed(warning(sqlstate.PauseNotFenced,
		"paused, but timeout cancels made before the pause are still not committed after 2s (backend pid 7): they are kept if their transaction commits")))
	require.True(t, sqlstate.PauseUnconfirmed(warning(sqlstate.PauseNotFenced,
		"paused, but advisory lock (28532, 4) is held by backend pid 7: timeout cancels can commit until this transaction does")))
	require.True(t, sqlstate.PauseUnconfirmed(warning(sqlstate.PauseNotFenced, "any text")), "the code decides, not the text")
	// A database before migration 000049 raised them with the default code.
	require.True(t, sqlstate.PauseUnconfirmed(warning("01000",
		"paused, but timeout cancels made before the pause are still not committed after 2s (backend pid 7): they are kept if their transaction commits")))
	require.True(t, sqlstate.PauseUnconfirmed(warning("01000",
		"paused, but advisory lock (28532, 4) is held by backend pid 7: timeout cancels can commit until this transaction does")))
	require.False(t, sqlstate.PauseUnconfirmed(&pgconn.Notice{SeverityUnlocalized: "NOTICE", Code: sqlstate.PauseNotFenced, Message: "paused, but"}),
		"only a WARNING")
	require.False(t, sqlstate.PauseUnconfirmed(warning("01000", `invalid configuration parameter name "plpgsql.x", removing it`)))
	require.False(t, sqlstate.PauseUnconfirmed(warning("01000", "database \"shop\" has a collation version mismatch")))
	require.False(t, sqlstate.PauseUnconfirmed(&pgconn.Notice{SeverityUnlocalized: "NOTICE", Code: "00000", Message: "paused, but"}))
	require.False(t, sqlstate.PauseUnconfirmed(warning("OT137", "paused, but")), "a code of its own is not this warning")
	require.False(t, sqlstate.PauseUnconfirmed(nil))
}
