package fault

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// gatewayProxy sits between the sidecars and the fake gateway. It forwards
// every request, tells the test which orders the sidecars ask about and when
// a request was abandoned by its caller, and can answer garbage for chosen
// orders (the fake has no such behaviour).
type gatewayProxy struct {
	URL string

	proxy   *httputil.ReverseProxy
	arrived chan string // order ids of requests as they arrive (dropped when full)
	aborted atomic.Int64

	mu      sync.Mutex
	garbage map[string]string // order id -> body answered with 200 to GET /v1/orders/{id}
	served  map[string]int    // order id -> garbage answers served

	// holdRefunds, when set, makes POST /v1/refunds reach the fake (the
	// refund is made) and then withholds the answer until the caller gives
	// up: the sidecar never learns of the refund. refundMade gets a value
	// per refund made so.
	holdRefunds atomic.Bool
	refundMade  chan struct{}
}

func newGatewayProxy(t *testing.T, fakeURL string) *gatewayProxy {
	t.Helper()
	target, err := url.Parse(fakeURL)
	require.NoError(t, err)
	p := &gatewayProxy{
		proxy:      httputil.NewSingleHostReverseProxy(target),
		arrived:    make(chan string, 1000),
		garbage:    map[string]string{},
		served:     map[string]int{},
		refundMade: make(chan struct{}, 100),
	}
	p.proxy.ErrorLog = log.New(io.Discard, "", 0)
	p.proxy.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		if r.Context().Err() != nil {
			p.aborted.Add(1)
			return
		}
		http.Error(w, "proxy: "+err.Error(), http.StatusBadGateway)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// orderID returns the order of a gateway API path (/v1/orders/{id}[/close]),
// or "".
func orderID(path string) string {
	rest, ok := strings.CutPrefix(path, "/v1/orders/")
	if !ok {
		return ""
	}
	id, _ := strings.CutSuffix(rest, "/close")
	if u, err := url.PathUnescape(id); err == nil {
		return u
	}
	return id
}

// ServeHTTP forwards the request to the fake, or answers garbage.
func (p *gatewayProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := orderID(r.URL.Path)
	if id != "" {
		select {
		case p.arrived <- id:
		default:
		}
	}
	p.mu.Lock()
	body, bad := p.garbage[id]
	if bad && r.Method == http.MethodGet {
		p.served[id]++
	}
	p.mu.Unlock()
	if bad && r.Method == http.MethodGet {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
		return
	}
	if r.URL.Path == "/v1/refunds" && p.holdRefunds.Load() {
		rec := httptest.NewRecorder()
		p.proxy.ServeHTTP(rec, r)
		if rec.Code == http.StatusOK {
			select {
			case p.refundMade <- struct{}{}:
			default:
			}
		}
		<-r.Context().Done() // the answer never comes
		p.aborted.Add(1)
		return
	}
	p.proxy.ServeHTTP(w, r)
}

// setGarbage makes GET /v1/orders/{id} answer 200 with body; "" forwards it
// again.
func (p *gatewayProxy) setGarbage(orderID, body string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if body == "" {
		delete(p.garbage, orderID)
		return
	}
	p.garbage[orderID] = body
}

// garbageServed returns how many garbage answers the order got.
func (p *gatewayProxy) garbageServed(orderID string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.served[orderID]
}
