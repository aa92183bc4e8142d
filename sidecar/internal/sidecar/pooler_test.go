package sidecar_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecar"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
)

// A sidecar pointed at a real PgBouncer refuses to run, with an error that
// says why, whether the pooler refuses its session settings at connect
// (PgBouncer's default: "unsupported startup parameter") or drops them
// (ignore_startup_parameters). Before, the first failed with a bare connect
// error; the second started, named the login role instead of the sidecar in
// the audit trail and, on a database whose default isolation is REPEATABLE
// READ, failed every sweep with OT154. Straight to PostgreSQL, the same
// configuration runs.
func TestRefusesAConnectionPooler(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := pgtest.NewPool(t)
	url := pgtest.URL(t, db)
	_, gatewayURL := sidecartest.Fake(t, db)
	sidecartest.Setup(t, db)
	sidecartest.CreateOrder(t, db, "P1", time.Millisecond, "")
	// Sessions that do not say otherwise run REPEATABLE READ here, where
	// sweep_due refuses to run.
	sidecartest.Exec(t, db, "ALTER DATABASE "+pgx.Identifier{db.Config().ConnConfig.Database}.Sanitize()+
		" SET default_transaction_isolation = 'repeatable read'")

	for _, tc := range []struct {
		name   string
		ignore []string
		why    []string
	}{
		{"refused", nil, []string{"unsupported startup parameter"}},
		{"dropped", []string{"ordertimeout.actor", "default_transaction_isolation"}, []string{
			"the settings sent at connect were not applied",
			`ordertimeout.actor is not set, not "sidecar:pooled"`,
			`default_transaction_isolation is "repeatable read", not "read committed"`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bouncer := sidecartest.PgBouncer(t, url, tc.ignore...)
			// Twice: a supervisor restarts a sidecar that exited, and the
			// first start leaves the pooler's server sessions as they are
			// (once, its prepared check query let the second start through).
			for start := 1; start <= 2; start++ {
				s, err := sidecar.New(ctx, sidecartest.Config(bouncer, gatewayURL, "pooled"))
				require.NoError(t, err)
				runCtx, stop := context.WithTimeout(ctx, 20*time.Second)
				err = s.Run(runCtx)
				require.ErrorIs(t, err, sidecar.ErrBehindPooler, "start %d", start)
				require.Contains(t, err.Error(), "needs a direct connection to PostgreSQL")
				for _, why := range tc.why {
					require.Contains(t, err.Error(), why)
				}
				require.NoError(t, runCtx.Err(), "start %d refused at once, not after a timeout", start)
				stop()
				require.Equal(t, "PENDING", sidecartest.Status(t, db, "P1"), "it did nothing")
			}
		})
	}

	// Straight to PostgreSQL it runs, also with the isolation setting in
	// another case in the URL: pgx would send both spellings, and which one
	// PostgreSQL applied depended on map order.
	direct := url + "&DEFAULT_TRANSACTION_ISOLATION=serializable"
	if !strings.Contains(url, "?") {
		direct = url + "?DEFAULT_TRANSACTION_ISOLATION=serializable"
	}
	sidecartest.Start(t, sidecartest.Config(direct, gatewayURL, "direct"))
	sidecartest.WaitStatus(t, db, "P1", "CANCELLED", 10*time.Second)
	require.EqualValues(t, 1, sidecartest.Int(t, db,
		"SELECT count(*) FROM ordertimeout.events WHERE order_id = 'P1' AND to_status = 'CANCELLED' AND actor = 'sidecar:direct'"))
}

// The sidecar's session settings and application_name go out under one
// spelling each, whatever the URL spells: PostgreSQL folds A-Z in setting
// names, and pgx would send both spellings, PostgreSQL applying whichever
// came last in map order. A name application_name given in the URL, in any
// case, is kept. Only A-Z fold: the long s of "ſ" is another name.
func TestStartupParamsOneSpellingEach(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	url := pgtest.URL(t, db)
	_, gatewayURL := sidecartest.Fake(t, db)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	s, err := sidecar.New(context.Background(), sidecartest.Config(url+sep+
		"DEFAULT_TRANSACTION_ISOLATION=serializable&Ordertimeout.Actor=someone&Application_Name=shop&default_tranſaction_iſolation=x",
		gatewayURL, "spelt"))
	require.NoError(t, err)
	params := s.StartupParams()
	for name, want := range map[string]string{
		"default_transaction_isolation": "read committed",
		"ordertimeout.actor":            "sidecar:spelt",
		"application_name":              "shop",
	} {
		var spellings []string
		for k := range params {
			if strings.EqualFold(k, name) && !strings.ContainsRune(k, 'ſ') {
				spellings = append(spellings, k)
			}
		}
		require.Equal(t, []string{name}, spellings, "one spelling of %s", name)
		require.Equal(t, want, params[name], name)
	}
	require.Equal(t, "x", params["default_tranſaction_iſolation"], "not PostgreSQL's name: left for PostgreSQL to refuse")
}
