package server

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/regionwarden/regionwarden/router/upstream"
)

// googleError is Google's REST error body, which the client libraries parse.
type googleError struct {
	Error googleErrorBody `json:"error"`
}

type googleErrorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Status  string `json:"status"`
}

// errorBody is the JSON of an error with HTTP status httpCode and gRPC code code.
func errorBody(httpCode int, code codes.Code, msg string) []byte {
	b, _ := json.Marshal(googleError{Error: googleErrorBody{Code: httpCode, Message: msg, Status: upstream.StatusName(code)}})
	return b
}

// writeError writes Google's error JSON with status httpCode. A positive
// retryAfter is sent as Retry-After in whole seconds, at least one.
func writeError(w http.ResponseWriter, httpCode int, code codes.Code, msg string, retryAfter time.Duration) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=UTF-8")
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64(max((retryAfter+time.Second-1)/time.Second, 1)), 10))
	}
	w.WriteHeader(httpCode)
	_, _ = w.Write(errorBody(httpCode, code, msg))
	_, _ = w.Write([]byte("\n"))
}
