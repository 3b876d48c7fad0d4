package server

import (
	"context"
	"errors"
	"io"
	"net/http"

	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"google.golang.org/grpc/status"

	"github.com/regionwarden/regionwarden/router/policy"
	"github.com/regionwarden/regionwarden/router/table"
	"github.com/regionwarden/regionwarden/router/upstream"
)

// gaveUp is the outcome of an attempt whose caller went away.
const gaveUp = policy.Cancelled //nolint:misspell // the policy package's name

// streamWriter writes a streamed answer as Vertex AI does: server-sent events
// (each chunk a "data: {json}" line and a blank line) or one JSON array.
type streamWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	sse     bool
	started bool
}

// begin writes the status and headers.
func (sw *streamWriter) begin() {
	h := sw.w.Header()
	if sw.sse {
		h.Set("Content-Type", "text/event-stream")
	} else {
		h.Set("Content-Type", "application/json; charset=UTF-8")
	}
	h.Set("Cache-Control", "no-cache")
	sw.w.WriteHeader(http.StatusOK)
}

// chunk writes one chunk's JSON and flushes it to the caller. An error means
// the caller is gone.
func (sw *streamWriter) chunk(b []byte) error {
	var prefix, suffix string
	switch {
	case sw.sse:
		prefix, suffix = "data: ", "\r\n\r\n"
	case !sw.started:
		prefix = "["
	default:
		prefix = ",\r\n"
	}
	sw.started = true
	buf := make([]byte, 0, len(prefix)+len(b)+len(suffix))
	buf = append(append(append(buf, prefix...), b...), suffix...)
	if _, err := sw.w.Write(buf); err != nil {
		return err
	}
	return sw.rc.Flush()
}

// end closes the JSON array; server-sent events need no end.
func (sw *streamWriter) end() {
	if sw.sse {
		return
	}
	if !sw.started {
		_, _ = io.WriteString(sw.w, "[]")
		return
	}
	_, _ = io.WriteString(sw.w, "]")
}

// stream is the attempt of a streamGenerateContent call. Chunks are relayed
// as they arrive. Until the first chunk the attempt can fail and be retried
// elsewhere; from the first chunk on, the answer is committed, and an error
// ends the stream with an error chunk in Google's error JSON, which the SDKs
// read as the stream's error.
func (x *exchange) stream(in *aiplatformpb.GenerateContentRequest, sse bool) attemptFunc {
	return func(ctx context.Context, region table.Region) (policy.Report, bool, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		st, err := x.s.up.StreamGenerateContent(ctx, in, &x.pool.table, region)
		if err != nil {
			return x.report(err), false, err
		}
		m, err := st.Recv()
		if err != nil && !errors.Is(err, io.EOF) {
			return x.report(err), false, err
		}
		sw := &streamWriter{w: x.w, rc: http.NewResponseController(x.w), sse: sse}
		x.status = http.StatusOK
		sw.begin()
		var (
			tokens  int64
			traffic aiplatformpb.GenerateContentResponse_UsageMetadata_TrafficType
		)
		for m != nil {
			if t, tt := usage(m); t > 0 || tt != 0 {
				tokens = max(tokens, t)
				if tt != 0 {
					traffic = tt
				}
			}
			b, merr := marshalJSON.Marshal(m)
			if merr != nil {
				return policy.Report{Outcome: policy.Success, Tokens: tokens}, true, merr
			}
			if werr := sw.chunk(b); werr != nil {
				// The caller is gone: canceling ctx ends the upstream call.
				return policy.Report{Outcome: gaveUp, Tokens: tokens}, true, werr
			}
			m, err = st.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				rep := x.report(err)
				rep.Tokens = tokens
				code := upstream.Code(err)
				_ = sw.chunk(upstream.GoogleError(code, status.Convert(err).Message()))
				sw.end()
				return rep, true, err
			}
		}
		sw.end()
		x.s.metrics.TrafficType(x.pool.label, region.Name, traffic.String())
		return policy.Report{Outcome: policy.Success, Tokens: tokens}, true, nil
	}
}
