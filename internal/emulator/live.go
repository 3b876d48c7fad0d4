package emulator

import (
	"encoding/json"
	"net/http"
	"strings"

	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"github.com/gorilla/websocket"
	"google.golang.org/grpc/codes"

	"github.com/regionwarden/regionwarden/internal/googleerror"
)

// The Live API (genai's client.Live.Connect): a session over a websocket at
//
//	GET /ws/google.cloud.aiplatform.{v1,v1beta1}.LlmBidiService/BidiGenerateContent
//
// whose first message is the setup naming the model; the region answers
// setupComplete, then each clientContent turn with a serverContent (the
// answer, turn complete) and its usageMetadata. Each turn is served as a
// generateContent call of the turn's text is: the same capacity, faults,
// latency and capacity headers (those of the session's handshake). What
// the region refuses it refuses as Google's servers do on a Live session:
// it closes the socket, with the status's name and message as the close
// frame's text, 1007 for INVALID_ARGUMENT, 1008 for a model or project the
// caller has no access to, 1011 for the rest (a full quota, an outage). A
// region whose outage refuses connections closes the socket without a
// word.

// liveUpgrader accepts Live sessions from any origin: the emulator serves
// tests and demos on loopback.
var liveUpgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// liveSetupMessage is what the emulator reads of a session's setup.
type liveSetupMessage struct {
	Setup *struct {
		Model string `json:"model"`
	} `json:"setup"`
}

// liveClientMessage is what the emulator reads of the caller's later
// messages: a clientContent's turns.
type liveClientMessage struct {
	ClientContent *struct {
		Turns []struct {
			Role  string `json:"role"`
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"turns"`
	} `json:"clientContent"`
}

// liveServerMessage is a turn's answer.
type liveServerMessage struct {
	ServerContent liveServerContent `json:"serverContent"`
	UsageMetadata liveUsage         `json:"usageMetadata"`
}

type liveServerContent struct {
	ModelTurn    liveTurn `json:"modelTurn"`
	TurnComplete bool     `json:"turnComplete"`
}

type liveTurn struct {
	Parts []livePart `json:"parts"`
}

type livePart struct {
	Text string `json:"text"`
}

// liveUsage is a Live answer's usageMetadata: the answer's tokens are
// responseTokenCount there.
type liveUsage struct {
	PromptTokenCount   int32  `json:"promptTokenCount"`
	ResponseTokenCount int32  `json:"responseTokenCount"`
	TotalTokenCount    int32  `json:"totalTokenCount"`
	TrafficType        string `json:"trafficType"`
}

// serveLive serves one Live session on region r.
func serveLive(r *region, w http.ResponseWriter, req *http.Request) {
	conn, err := liveUpgrader.Upgrade(w, req, nil)
	if err != nil {
		return
	}
	defer func() { _ = conn.Close() }()
	conn.SetReadLimit(maxBodyBytes)
	_, msg, err := conn.ReadMessage()
	if err != nil {
		return
	}
	var setup liveSetupMessage
	if json.Unmarshal(msg, &setup) != nil || setup.Setup == nil {
		ae := &apiError{code: codes.InvalidArgument, msg: "Request contains an invalid argument."}
		r.reject(ae)
		liveRefuse(conn, ae)
		return
	}
	name := setup.Setup.Model
	if ae := r.checkModel(name); ae != nil {
		r.reject(ae)
		liveRefuse(conn, ae)
		return
	}
	if ae := r.outage(r.clock.Elapsed()); ae != nil {
		liveRefuse(conn, ae)
		return
	}
	h := headersOf(req.Header)
	if conn.WriteMessage(websocket.BinaryMessage, []byte(`{"setupComplete":{}}`)) != nil {
		return
	}
	for {
		kind, msg, err := conn.ReadMessage()
		if err != nil {
			return
		}
		var in liveClientMessage
		if json.Unmarshal(msg, &in) != nil || in.ClientContent == nil {
			continue // realtime input, tool responses: nothing to answer
		}
		gen := &aiplatformpb.GenerateContentRequest{Model: name}
		for _, t := range in.ClientContent.Turns {
			var text strings.Builder
			for _, p := range t.Parts {
				text.WriteString(p.Text)
			}
			gen.Contents = append(gen.Contents, &aiplatformpb.Content{Role: t.Role, Parts: []*aiplatformpb.Part{{Data: &aiplatformpb.Part_Text{Text: text.String()}}}})
		}
		c, ae := r.newCall(gen, h)
		if ae != nil {
			r.reject(ae)
			liveRefuse(conn, ae)
			return
		}
		resp, err := r.generate(req.Context(), c)
		if err != nil {
			liveRefuse(conn, serveError(err))
			return
		}
		u := resp.GetUsageMetadata()
		out, err := json.Marshal(liveServerMessage{
			ServerContent: liveServerContent{ModelTurn: liveTurn{Parts: []livePart{{Text: responseText(resp)}}}, TurnComplete: true},
			UsageMetadata: liveUsage{
				PromptTokenCount: u.GetPromptTokenCount(), ResponseTokenCount: u.GetCandidatesTokenCount() + u.GetThoughtsTokenCount(),
				TotalTokenCount: u.GetTotalTokenCount(), TrafficType: u.GetTrafficType().String(),
			},
		})
		if err != nil || conn.WriteMessage(kind, out) != nil {
			return
		}
	}
}

// liveRefuse ends a session with ae as Google's servers close one; a
// refused outage closes it without a word.
func liveRefuse(conn *websocket.Conn, ae *apiError) {
	if ae.refused {
		return
	}
	code, text := googleerror.LiveClose(ae.code, ae.msg)
	_ = conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(code, text))
}
