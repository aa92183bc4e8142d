package sidecar_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/listener"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
)

// A conflict a person claimed for a refund must be refunded however many
// older conflicts wait for a person. The listener read the oldest
// listener.DefaultBacklog (10,000) unresolved conflicts from open_conflicts
// and only then left out those under the manual policy: with 10,000 older
// manual ones, a refunding conflict (or a new one under a refund or
// reinstate policy) was never read, so no job was made and the buyer was
// never refunded. The listener now reads conflicts_to_resolve, whose limit
// counts only the conflicts the sidecar acts on (migration 000039).
func TestRefundingConflictBehindManyManualOnes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.configure(late_payment => 'manual')")
	sidecartest.Exec(t, e.db, "SELECT ordertimeout.put_stock('M', 100000)")
	sidecartest.Exec(t, e.db, manualConflictsSQL(listener.DefaultBacklog))
	require.EqualValues(t, listener.DefaultBacklog, sidecartest.Int(t, e.db, "SELECT count(*) FROM ordertimeout.conflicts WHERE resolution IS NULL"))

	sidecartest.CreateOrder(t, e.db, "R1", 200*time.Millisecond, `{"precheck": "never"}`)
	sidecartest.Start(t, e.config("s1"))
	lateConflict(t, e, "R1", "PR1")
	var claimed string
	require.NoError(t, e.db.QueryRow(bg, `SELECT ordertimeout.resolve_conflict(conflict_id, 'refund') FROM ordertimeout.conflicts WHERE order_id = 'R1'`).Scan(&claimed))
	require.Equal(t, "refunding", claimed)
	sidecartest.Eventually(t, 20*time.Second, "the claimed refund made", func() (bool, error) {
		return sidecartest.Int(t, e.db, "SELECT count(*) FROM ordertimeout.conflicts WHERE order_id = 'R1' AND resolution = 'refunded'") == 1, nil
	})
}

func manualConflictsSQL(n int) string {
	return `DO $$
		BEGIN
			FOR i IN 1 .. ` + strconv.Itoa(n) + ` LOOP
				PERFORM ordertimeout.create_order('M' || i, '[{"sku":"M","qty":1}]', interval '1 hour');
				PERFORM ordertimeout.cancel_order('M' || i);
				PERFORM ordertimeout.confirm_payment('M' || i, 'PM' || i, NULL, NULL);
			END LOOP;
		END $$`
}
