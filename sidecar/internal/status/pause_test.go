package status_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/status"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// records sends every log record to a channel.
type records chan slog.Record

func (r records) Enabled(context.Context, slog.Level) bool        { return true }
func (r records) Handle(_ context.Context, rec slog.Record) error { r <- rec; return nil }
func (r records) WithAttrs([]slog.Attr) slog.Handler              { return r }
func (r records) WithGroup(string) slog.Handler                   { return r }

// While timeout cancels are paused, WarnWhilePaused logs who paused and what
// waits; it is quiet otherwise.
func TestWarnWhilePaused(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	ctx, cancel := context.WithCancel(t.Context())
	logs := make(records, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		status.WarnWhilePaused(ctx, db, 10*time.Millisecond, slog.New(logs))
	}()
	t.Cleanup(func() { cancel(); <-done })

	_, err := db.Exec(ctx, "SET ordertimeout.actor = 'ops:anna'; SELECT ordertimeout.configure(paused => true)")
	require.NoError(t, err)
	select {
	case rec := <-logs:
		require.Equal(t, slog.LevelWarn, rec.Level)
		require.Contains(t, rec.Message, "timeout cancels are paused")
		attrs := map[string]string{}
		rec.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
		require.Equal(t, "0", attrs["due_or_overdue"])
		require.Contains(t, attrs, "paused_at")
		require.Contains(t, attrs, "paused_for")
		require.NotEmpty(t, attrs["paused_by"])
	case <-time.After(10 * time.Second):
		t.Fatal("no warning within 10 s of the pause")
	}
}
