package reconcile_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/reconcile"
)

// A CSV time must be RFC 3339. Go's time.Parse is laxer: it read a zone
// minute of 60 ("+00:60") as the next hour, so the line was applied as
// 09:00 UTC, and it took a one-digit hour and a comma before the
// fraction. Each is refused, naming the line and the field.
func TestParseCSVRefusesTimesOutsideRFC3339(t *testing.T) {
	t.Parallel()
	for _, at := range []string{
		"2026-12-01T10:00:00+00:60",
		"2026-12-01T10:00:00-05:60",
		"2026-12-01T1:00:00Z",
		"2026-12-01T10:00:00,5Z",
	} {
		t.Run(at, func(t *testing.T) {
			le := parseErr(t, reconcile.FormatCSV, reconcile.CSVHeader+"\nP1,A1,1.00,EUR,paid,\""+at+"\"\n")
			require.Equal(t, 2, le.Line, le.Error())
			require.Equal(t, "time", le.Field, le.Error())
			require.Contains(t, le.Msg, "RFC 3339")
		})
	}
	// What RFC 3339 allows still reads.
	for _, at := range []string{"2026-12-01T10:00:00Z", "2026-12-01T10:00:00.5+05:30", "2026-12-01T10:00:00.123456-15:59"} {
		f, err := reconcile.Parse(strings.NewReader(reconcile.CSVHeader+"\nP1,A1,1.00,EUR,paid,\""+at+"\"\n"), reconcile.FormatCSV)
		require.NoError(t, err, at)
		require.Len(t, f.Transactions, 1)
	}
}
