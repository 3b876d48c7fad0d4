package emulator

import (
	"context"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/aiplatform/apiv1/aiplatformpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// streamChunks is how many chunks a streamed answer arrives in.
const streamChunks = 3

// dropConnections closes every connection to the region: a refused outage.
func (r *region) dropConnections() {
	for _, l := range r.listeners {
		l.dropAll()
	}
}

// start decides the call and, when the region fails it outright (outage or no
// capacity), returns the error at once; begin already counted it.
func (r *region) start(c call) (admission, *apiError) {
	a := r.begin(c)
	if a.done {
		if a.err.refused {
			r.dropConnections()
		}
		return a, a.err
	}
	return a, nil
}

// generate serves one unary call: it waits the call's latency, then answers
// or fails as the admission decided.
func (r *region) generate(ctx context.Context, c call) (*aiplatformpb.GenerateContentResponse, error) {
	a, aerr := r.start(c)
	if aerr != nil {
		return nil, aerr
	}
	err := r.wait(ctx, a.latency)
	if err == nil && a.err != nil {
		err = a.err
	}
	r.finish(a, err)
	if err != nil {
		return nil, err
	}
	return r.response(a, c, answerText(r.cfg.Name, a.id), true), nil
}

// stream serves one streamed call in streamChunks chunks, the latency spread
// evenly before them; a failing call fails before its first chunk, or, under
// a fault that breaks streams, in place of its second.
func (r *region) stream(ctx context.Context, c call, send func(*aiplatformpb.GenerateContentResponse) error) error {
	a, aerr := r.start(c)
	if aerr != nil {
		return aerr
	}
	if a.err != nil && !a.midStream {
		err := r.wait(ctx, a.latency)
		if err == nil {
			err = a.err
		}
		r.finish(a, err)
		return err
	}
	words := strings.Fields(answerText(r.cfg.Name, a.id))
	per := (len(words) + streamChunks - 1) / streamChunks
	for i := range streamChunks {
		if err := r.wait(ctx, a.latency/streamChunks); err != nil {
			r.finish(a, err)
			return err
		}
		if i > 0 && a.err != nil {
			r.finish(a, a.err)
			return a.err
		}
		lo, hi := min(i*per, len(words)), min((i+1)*per, len(words))
		text := strings.Join(words[lo:hi], " ")
		if i < streamChunks-1 {
			text += " "
		}
		if err := send(r.response(a, c, text, i == streamChunks-1)); err != nil {
			r.finish(a, err)
			return err
		}
	}
	r.finish(a, nil)
	return nil
}

func answerText(region string, id int64) string {
	return fmt.Sprintf("Emulated answer number %d from %s, served as the scenario says.", id, region)
}

// response builds an answer. Every chunk carries the prompt's token count and
// the traffic type; the last (or only) one also carries the generated tokens
// and the finish reason, as Vertex does.
func (r *region) response(a admission, c call, text string, last bool) *aiplatformpb.GenerateContentResponse {
	cand := &aiplatformpb.Candidate{
		Content: &aiplatformpb.Content{Role: "model", Parts: []*aiplatformpb.Part{{Data: &aiplatformpb.Part_Text{Text: text}}}},
	}
	usage := &aiplatformpb.GenerateContentResponse_UsageMetadata{
		PromptTokenCount: int32(c.inputTokens),
		TotalTokenCount:  int32(c.inputTokens),
		TrafficType:      a.traffic,
	}
	if last {
		cand.FinishReason = aiplatformpb.Candidate_STOP
		usage.CandidatesTokenCount = int32(c.outputTokens)
		usage.TotalTokenCount = int32(c.inputTokens + c.outputTokens)
	}
	return &aiplatformpb.GenerateContentResponse{
		Candidates:    []*aiplatformpb.Candidate{cand},
		ModelVersion:  r.sc.Model,
		CreateTime:    timestamppb.New(time.Now()),
		ResponseId:    fmt.Sprintf("%s-%d", r.cfg.Name, a.id),
		UsageMetadata: usage,
	}
}

// countTokens answers CountTokens; it is free of capacity and faults but
// not of outages.
func (r *region) countTokens(req *aiplatformpb.CountTokensRequest) (*aiplatformpb.CountTokensResponse, *apiError) {
	if err := r.checkModel(req.GetModel()); err != nil {
		return nil, err
	}
	if err := r.outage(r.clock.Elapsed()); err != nil {
		if err.refused {
			r.dropConnections()
		}
		return nil, err
	}
	chars := 0
	for _, c := range req.GetContents() {
		for _, p := range c.GetParts() {
			chars += len(p.GetText())
		}
	}
	return &aiplatformpb.CountTokensResponse{
		TotalTokens:             int32(estimateTokens(req.GetContents(), req.GetSystemInstruction())),
		TotalBillableCharacters: int32(chars),
	}, nil
}
