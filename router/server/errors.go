package server

import (
	"net/http"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/regionwarden/regionwarden/router/upstream"
)

// writeError writes Google's error JSON with status httpCode. A positive
// retryAfter is sent as Retry-After in whole seconds, at least one.
func writeError(w http.ResponseWriter, httpCode int, code codes.Code, msg string, retryAfter time.Duration) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=UTF-8")
	if retryAfter > 0 {
		setRetryAfter(h, retryAfter)
	}
	w.WriteHeader(httpCode)
	_, _ = w.Write(upstream.GoogleErrorStatus(httpCode, code, msg))
	_, _ = w.Write([]byte("\n"))
}

// setRetryAfter sets Retry-After to d in whole seconds, rounded up, at least one.
func setRetryAfter(h http.Header, d time.Duration) {
	h.Set("Retry-After", strconv.FormatInt(int64(max((d+time.Second-1)/time.Second, 1)), 10))
}
