package worker

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A webhook URL often carries its receiver's secret in its path or query
// (https://hooks.example.com/services/T0/B0/<token>, ?token=<token>). A
// failed delivery's error goes to River's errors of the job (shown by the
// River UI and the console) and to the logs: it names the receiver by
// scheme and host, never with the URL's user, password, path or query.
func TestWebhookErrorHidesTheURLsSecrets(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()

	for _, base := range []string{slow.URL, closedURL} {
		u, err := url.Parse(base + "/services/T0/B0/s3cr3t-path?token=s3cr3t-query")
		require.NoError(t, err)
		u.User = url.UserPassword("user", "s3cr3t-password")
		w := &WebhookWorker{Deps: &Deps{
			WebhookURL:    u.String(),
			WebhookClient: &http.Client{Timeout: 200 * time.Millisecond},
		}}
		err = w.post(context.Background(), []byte(`{"id":"evt_1"}`), "evt_1")
		require.Error(t, err)
		require.NotContains(t, err.Error(), "s3cr3t", "the error shows the URL's secrets")
		require.NotContains(t, err.Error(), "user")
		require.Contains(t, err.Error(), "deliver webhook evt_1 to http://"+u.Host+":")
	}
}

// A receiver that answers 200 and then sends its body slowly, or without
// end: the delivery is done with the status. Before, the worker read up to
// 64 KiB of the body under the delivery's whole timeout, a worker held for
// an answer already given.
func TestWebhookDoesNotWaitForTheAnswersBody(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	trickle := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Query().Has("known") { // a small body of known length, sent as slowly
			w.Header().Set("Content-Length", "100")
		}
		w.WriteHeader(http.StatusOK)
		for {
			_, _ = w.Write([]byte("x"))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-release:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}))
	t.Cleanup(trickle.Close)
	t.Cleanup(func() { close(release) })
	for _, url := range []string{trickle.URL, trickle.URL + "?known"} {
		w := &WebhookWorker{Deps: &Deps{WebhookURL: url, WebhookClient: &http.Client{Timeout: time.Minute}}}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		require.NoError(t, w.post(ctx, []byte(`{"id":"evt_1"}`), "evt_1"), url)
		require.NoError(t, ctx.Err(), "%s: the delivery waited for the body until its context ended", url)
		cancel()
	}
}
