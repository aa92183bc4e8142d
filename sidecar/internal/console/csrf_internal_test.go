package console

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCSRFTokens(t *testing.T) {
	t.Parallel()
	olga := Credentials{User: "olga", Password: "pw"}
	u := &user{Name: olga.User, Role: RoleOperator, key: csrfKey(olga)}
	now := time.Unix(1_800_000_000, 0)
	tok := csrfToken(u, now)
	require.Empty(t, checkCSRF(u, tok, now))
	require.Empty(t, checkCSRF(u, tok, now.Add(csrfLifetime-time.Second)))
	require.Contains(t, checkCSRF(u, tok, now.Add(csrfLifetime+time.Second)), "expired")
	require.Contains(t, checkCSRF(u, tok, now.Add(-2*time.Minute)), "expired")

	// Another password, another user: another key.
	other := &user{Name: "olga", Role: RoleOperator, key: csrfKey(Credentials{User: "olga", Password: "pw2"})}
	require.Contains(t, checkCSRF(other, tok, now), "not this user's")
	ann := &user{Name: "ann", Role: RoleOperator, key: csrfKey(Credentials{User: "ann", Password: "pw"})}
	require.Contains(t, checkCSRF(ann, tok, now), "not this user's")

	anonymous := &user{Name: "anonymous", Role: RoleViewer}
	require.Empty(t, csrfToken(anonymous, now))
	require.NotEmpty(t, checkCSRF(anonymous, "", now))
}

func TestLagChart(t *testing.T) {
	t.Parallel()
	now := 1_800_000_000.0
	c := lagChart([]lagBucket{{Minute: now - 120, Cancels: 3, P50: 12, P99: 180}, {Minute: now - 60, Cancels: 1, P50: 5, P99: 5}}, now)
	require.False(t, c.Empty)
	require.Len(t, c.Dots99, 2)
	require.Equal(t, "200 ms", c.YTicks[4].Label) // 180 rounds up to 200
	require.InDelta(t, float64(c.Top)+196*(1-180.0/200), c.Dots99[0].Y, 0.1)
	require.Less(t, c.Dots99[0].X, c.Dots99[1].X)
	require.LessOrEqual(t, c.Dots99[1].X, float64(c.Right))
	require.True(t, lagChart(nil, now).Empty)
	require.Equal(t, 1.0, niceCeil(0.2))
	require.Equal(t, 50.0, niceCeil(41))
	require.Equal(t, 1000.0, niceCeil(1000))
}
