package upstreamtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gorilla/websocket"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regionwarden/regionwarden/internal/googleerror"
)

// MethodLive is a Live API session (BidiGenerateContent over a websocket):
// Call.Body is its setup message as received, Call.Messages the caller's
// later messages.
const MethodLive = "BidiGenerateContent"

// liveUpgrader accepts Live sessions from any origin: the region is a
// test's, on loopback.
var liveUpgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// liveSetup is what the region reads of a setup message.
type liveSetup struct {
	Setup *struct {
		Model string `json:"model"`
	} `json:"setup"`
}

// liveClient is what the region reads of the caller's later messages: the
// text of a clientContent's turns.
type liveClient struct {
	ClientContent *struct {
		Turns []struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"turns"`
	} `json:"clientContent"`
}

// serveLive serves a Live session as Vertex AI does: credentials the
// Behavior refuses are refused at the handshake (401 or 403, Google's error
// JSON), an *HTTPError fault too; then the setup message is read and
// recorded, and a fault closes the session before setupComplete with the
// close code and text Google's servers close with (liveClose). A session
// set up answers each clientContent (Behavior.LiveTurnFault may close it
// instead) with a serverContent naming the region and the prompt, turn
// complete, with usageMetadata (7 tokens in, 5 out, the region's traffic
// type) and Behavior.ExtraJSON's members, until the caller closes it;
// every message is recorded as it came.
func (r *Region) serveLive(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	b := r.b
	r.mu.Unlock()
	if err := refused(b.Refuse, req.Header.Values("Authorization")); err != nil && status.Code(err) != codes.Internal {
		writeError(w, err)
		return
	}
	if b.Fault != nil {
		if he, ok := errors.AsType[*HTTPError](b.Fault(r.calls.Load() + 1)); ok {
			r.calls.Add(1)
			writeError(w, he)
			return
		}
	}
	conn, err := liveUpgrader.Upgrade(w, req, nil)
	if err != nil {
		return
	}
	defer func() { _ = conn.Close() }()
	_, setup, err := conn.ReadMessage()
	if err != nil {
		return
	}
	var s liveSetup
	if json.Unmarshal(setup, &s) != nil || s.Setup == nil {
		liveClose(conn, status.Error(codes.InvalidArgument, "Request contains an invalid argument."))
		return
	}
	c := Call{
		Surface: REST, Method: MethodLive, Path: req.URL.Path, Model: s.Setup.Model,
		RequestType:       req.Header.Values("X-Vertex-AI-LLM-Request-Type"),
		SharedRequestType: req.Header.Values("X-Vertex-AI-LLM-Shared-Request-Type"),
		Auth:              req.Header.Values("Authorization"),
		Header:            req.Header.Clone(), Body: setup, BodyLen: int64(len(setup)),
	}
	b, i, err := r.recordAt(req.Context(), c)
	if err != nil {
		liveClose(conn, err)
		return
	}
	if !strings.Contains(s.Setup.Model, "/locations/"+r.Name+"/") {
		liveClose(conn, status.Errorf(codes.PermissionDenied, "Publisher model `%s` is not served in %s.", s.Setup.Model, r.Name))
		return
	}
	if conn.WriteMessage(websocket.BinaryMessage, []byte(`{"setupComplete":{}}`)) != nil {
		return
	}
	if b.LiveResumption && conn.WriteMessage(websocket.BinaryMessage,
		[]byte(`{"sessionResumptionUpdate":{"newHandle":"`+r.Name+`-handle","resumable":true}}`)) != nil {
		return
	}
	turns := 0
	for {
		kind, msg, err := conn.ReadMessage()
		if err != nil {
			return
		}
		r.mu.Lock()
		r.seen[i].Messages = append(r.seen[i].Messages, msg)
		r.mu.Unlock()
		var m liveClient
		if json.Unmarshal(msg, &m) != nil || m.ClientContent == nil {
			continue // realtime input and tool responses: nothing to answer here
		}
		turns++
		if b.LiveTurnFault != nil {
			if err := b.LiveTurnFault(turns); err != nil {
				liveClose(conn, err)
				return
			}
		}
		var prompt strings.Builder
		for _, t := range m.ClientContent.Turns {
			for _, p := range t.Parts {
				prompt.WriteString(p.Text)
			}
		}
		text, _ := json.Marshal(r.unaryText(prompt.String()))
		extra := ""
		if b.ExtraJSON != "" {
			extra = "," + b.ExtraJSON
		}
		out := fmt.Sprintf(`{"serverContent":{"modelTurn":{"parts":[{"text":%s}]},"turnComplete":true},"usageMetadata":{"promptTokenCount":7,"responseTokenCount":5,"totalTokenCount":12,"trafficType":%q}%s}`,
			text, r.trafficType().String(), extra)
		if conn.WriteMessage(kind, []byte(out)) != nil {
			return
		}
	}
}

// liveClose ends a Live session with err as Google's servers do
// (googleerror.LiveClose).
func liveClose(conn *websocket.Conn, err error) {
	st := status.Convert(err)
	code, text := googleerror.LiveClose(st.Code(), st.Message())
	_ = conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(code, text))
}
