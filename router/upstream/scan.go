package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
)

// Framings of an answer, which say at what depth its answer objects sit.
const (
	// FrameObject is one answer object (a unary answer) or server-sent events,
	// each event one answer object: answer objects sit at depth 1.
	FrameObject = 1
	// FrameArray is a stream as one JSON array of answer objects (a
	// streamGenerateContent without ?alt=sse): answer objects sit at depth 2.
	FrameArray = 2
)

// Fields of an answer object the scanner captures.
const (
	fieldNone = iota
	fieldUsage
	fieldError
	fieldChatUsage
	fieldMessage
)

// maxCapture bounds the bytes of one captured field: a usageMetadata or an
// error object is a few hundred bytes. A larger one is skipped, not read.
const maxCapture = 16 << 10

// AnswerScanner reads what the router needs of an answer while its bytes
// pass on to the caller, without decoding the answer: the usageMetadata of
// each answer object (total tokens and traffic type), the usage of an
// OpenAI-compatible chat completion, and an error object (Vertex ends a
// failing stream with one). It is a byte-level JSON state
// machine that follows strings and nesting only, and captures the values of
// those two keys of the answer objects themselves, so fields it does not know
// cost nothing and are never touched. Feed it the bytes in any pieces, in
// order. The zero value is not usable: make one with NewAnswerScanner or Reset.
type AnswerScanner struct {
	// Tokens is the largest usageMetadata.totalTokenCount seen: a stream
	// reports its running total, the last chunk the whole.
	Tokens int64
	// InputTokens and OutputTokens are the largest promptTokenCount, and
	// candidatesTokenCount plus thoughtsTokenCount, seen: what the GenAI
	// semantic conventions call input and output tokens, for traces.
	InputTokens, OutputTokens int64
	// TrafficType is the last usageMetadata.trafficType seen, e.g.
	// PROVISIONED_THROUGHPUT; "" when none was.
	TrafficType string
	// Err is the code of an error object seen in the answer, OK when none was.
	Err codes.Code
	// Objects counts the answer objects that ended.
	Objects int

	base      int
	depth     int
	inString  bool
	escaped   bool
	expectKey bool // the next string at the base depth is a key
	keyString bool // the string being read is such a key
	keyLong   bool
	keyN      int
	key       [16]byte
	keyField  int // the field the last key names
	want      int // the field whose value comes next
	capture   int // the field being captured into buf
	buf       []byte
	small     [512]byte // buf's first backing: a usageMetadata fits
	output    int64     // the output's parts of the usage object being read
	input     int64     // the input's parts of an Anthropic usage object being read
}

// NewAnswerScanner returns a scanner for an answer of the given framing.
func NewAnswerScanner(framing int) *AnswerScanner {
	s := &AnswerScanner{}
	s.Reset(framing)
	return s
}

// Reset readies s for a new answer of the given framing, keeping its buffer.
func (s *AnswerScanner) Reset(framing int) {
	buf := s.buf[:0]
	if buf == nil {
		buf = s.small[:0]
	}
	s.Tokens, s.InputTokens, s.OutputTokens, s.TrafficType, s.Err, s.Objects = 0, 0, 0, "", codes.OK, 0
	s.base, s.depth, s.inString, s.escaped, s.expectKey, s.keyString, s.keyLong = framing, 0, false, false, false, false, false
	s.keyN, s.keyField, s.want, s.capture, s.buf = 0, fieldNone, fieldNone, fieldNone, buf
}

// Write scans p. It never fails; it is an io.Writer so that an answer can be
// teed through it.
func (s *AnswerScanner) Write(p []byte) (int, error) {
	for i := 0; i < len(p); {
		if s.inString && !s.keyString && !s.escaped {
			// Most of an answer is text inside strings: skip to the next
			// quote or backslash at once.
			rest := p[i:]
			q := bytes.IndexByte(rest, '"')
			if q < 0 {
				q = len(rest)
			}
			if b := bytes.IndexByte(rest[:q], '\\'); b >= 0 {
				q = b
			}
			if q > 0 {
				if s.capture != fieldNone {
					s.keep(rest[:q])
				}
				i += q
				continue
			}
		}
		s.scan(p[i])
		i++
	}
	return len(p), nil
}

// Between reports whether the answer so far ends between answer objects, where
// another one (an error the router adds) can be written.
func (s *AnswerScanner) Between() bool { return !s.inString && s.depth == s.base-1 }

// keep adds p to the field being captured, or drops the capture when the
// field outgrows maxCapture.
func (s *AnswerScanner) keep(p []byte) {
	if len(s.buf)+len(p) <= maxCapture {
		s.buf = append(s.buf, p...)
	} else {
		s.capture, s.buf = fieldNone, s.buf[:0]
	}
}

func (s *AnswerScanner) scan(c byte) {
	if s.capture != fieldNone {
		if len(s.buf) < maxCapture {
			s.buf = append(s.buf, c)
		} else {
			s.capture, s.buf = fieldNone, s.buf[:0]
		}
	}
	if s.inString {
		switch {
		case s.escaped:
			s.escaped = false
			s.keyLong = true // no key the scanner wants has an escape
		case c == '\\':
			s.escaped = true
		case c == '"':
			s.inString = false
			if s.keyString {
				s.keyString = false
				s.keyField = s.field()
			}
		case s.keyString:
			if s.keyN < len(s.key) {
				s.key[s.keyN] = c
				s.keyN++
			} else {
				s.keyLong = true
			}
		}
		return
	}
	switch c {
	case ' ', '\t', '\r', '\n':
	case '"':
		s.inString = true
		if s.depth == s.base && s.expectKey {
			s.keyString, s.keyN, s.keyLong, s.expectKey = true, 0, false, false
		}
		s.want = fieldNone
	case '{', '[':
		if s.want != fieldNone && c == '{' && s.depth == s.base {
			s.capture = s.want
			s.buf = append(s.buf[:0], c)
		}
		s.want = fieldNone
		s.depth++
		s.expectKey = s.depth == s.base && c == '{'
	case '}', ']':
		s.depth--
		if s.capture != fieldNone && s.depth == s.base {
			s.finish()
		}
		if c == '}' && s.depth == s.base-1 {
			s.Objects++
		}
		s.want = fieldNone
	case ',':
		if s.depth == s.base {
			s.expectKey = true
		}
		s.want = fieldNone
	case ':':
		if s.depth == s.base {
			s.want, s.keyField = s.keyField, fieldNone
		}
	default:
		s.want = fieldNone // a number or a literal: not a field the scanner captures
	}
}

// field is the field the key just read names.
func (s *AnswerScanner) field() int {
	if s.keyLong {
		return fieldNone
	}
	switch string(s.key[:s.keyN]) {
	case "usageMetadata":
		return fieldUsage
	case "usage":
		return fieldChatUsage
	case "error":
		return fieldError
	case "message":
		return fieldMessage
	}
	return fieldNone
}

// finish reads a captured field.
func (s *AnswerScanner) finish() {
	switch s.capture {
	case fieldUsage:
		s.usage(&vertexUsage, s.buf)
	case fieldChatUsage:
		s.usage(&chatUsage, s.buf)
	case fieldMessage:
		// An Anthropic stream's message_start event holds the message
		// begun, its usage (the input's tokens) inside it.
		members(s.buf, s.messageUsage)
	case fieldError:
		code, httpStatus := codes.Unknown, 0
		members(s.buf, func(k, v []byte) {
			switch string(k) {
			case "status":
				if c, ok := codeOfName(unquote(v)); ok {
					code = c
				}
			case "code":
				if n, ok := parseInt(v); ok {
					httpStatus = int(n)
				}
			case "type":
				// Anthropic's error object (a Claude stream's error
				// event) names its kind instead of a status.
				if c, ok := anthropicErrors[string(unquote(v))]; ok && code == codes.Unknown {
					code = c
				}
			}
		})
		if code == codes.Unknown && httpStatus != 0 {
			code = codeOfHTTP(httpStatus)
		}
		s.Err = code
	}
	s.capture, s.buf = fieldNone, s.buf[:0]
}

// usageFormat names the members of one wire format's usage object.
type usageFormat struct {
	// total and prompt name the counts of all tokens and of the prompt's.
	total, prompt string
	// other reads any other member: the output's parts into s.output, the
	// traffic type into s.TrafficType.
	other func(s *AnswerScanner, k, v []byte)
}

// vertexUsage is Vertex's usageMetadata: candidatesTokenCount (the answer;
// responseTokenCount in a Live session's messages) and thoughtsTokenCount
// (thoughts) are the output, and trafficType says which capacity served the
// call.
var vertexUsage = usageFormat{
	total: "totalTokenCount", prompt: "promptTokenCount",
	other: func(s *AnswerScanner, k, v []byte) {
		switch string(k) {
		case "candidatesTokenCount", "responseTokenCount", "thoughtsTokenCount":
			add(&s.output, v)
		case "trafficType":
			s.setTrafficType(v)
		}
	},
}

// chatUsage is the usage of an OpenAI-compatible chat completion (or its
// last chunk), as Vertex writes it: completion_tokens (the answer) and
// completion_tokens_details.reasoning_tokens (thoughts, counted in
// total_tokens beside completion_tokens) are the output, and
// extra_properties.google.traffic_type is the traffic type. It is also the
// usage of an Anthropic message (Claude's rawPredict and streamRawPredict),
// whose members have other names and no total: input_tokens and the
// prompt cache's tokens (cache_creation_input_tokens,
// cache_read_input_tokens) are the input, output_tokens the output. The two
// formats share no member name, so one reader serves both.
var chatUsage = usageFormat{
	total: "total_tokens", prompt: "prompt_tokens",
	other: func(s *AnswerScanner, k, v []byte) {
		switch string(k) {
		case "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens":
			add(&s.input, v)
		case "completion_tokens", "output_tokens":
			add(&s.output, v)
		case "completion_tokens_details":
			members(v, func(k, v []byte) {
				if string(k) == "reasoning_tokens" {
					add(&s.output, v)
				}
			})
		case "extra_properties":
			members(v, func(k, v []byte) {
				if string(k) == "google" {
					members(v, func(k, v []byte) {
						if string(k) == "traffic_type" {
							s.setTrafficType(v)
						}
					})
				}
			})
		}
	},
}

// usage reads a usage object of format f. The input's and the output's
// parts add up within one object, and every count keeps its largest value
// across objects: a stream repeats its usage in every chunk, and the counts
// only grow. The total is at least the input and the output together (a
// format without a total has them alone). The sums are fields of s, not
// locals: a local whose address went to f.other would be moved to the
// heap, an allocation a usage object.
func (s *AnswerScanner) usage(f *usageFormat, obj []byte) {
	s.output, s.input = 0, 0
	members(obj, func(k, v []byte) {
		switch string(k) {
		case f.total:
			keepMax(&s.Tokens, v)
		case f.prompt:
			keepMax(&s.InputTokens, v)
		default:
			f.other(s, k, v)
		}
	})
	s.InputTokens = max(s.InputTokens, s.input)
	s.OutputTokens = max(s.OutputTokens, s.output)
	s.Tokens = max(s.Tokens, s.InputTokens+s.OutputTokens)
}

// messageUsage reads the usage member of an Anthropic message_start
// event's message.
func (s *AnswerScanner) messageUsage(k, v []byte) {
	if string(k) == "usage" {
		s.usage(&chatUsage, v)
	}
}

// anthropicErrors are the gRPC codes of the error types of Anthropic's
// error object ({"type":"error","error":{"type":"overloaded_error",...}}),
// by the HTTP status Anthropic documents for each.
var anthropicErrors = map[string]codes.Code{
	"invalid_request_error": codes.InvalidArgument,  // 400
	"authentication_error":  codes.Unauthenticated,  // 401
	"permission_error":      codes.PermissionDenied, // 403
	"not_found_error":       codes.NotFound,         // 404
	"request_too_large":     codes.InvalidArgument,  // 413
	"rate_limit_error":      codes.ResourceExhausted,
	"api_error":             codes.Internal,          // 500
	"timeout_error":         codes.Unavailable,       // 504
	"overloaded_error":      codes.ResourceExhausted, // 529: see codeOfHTTP
}

// keepMax sets *n to the integer v holds where that is larger: a stream
// repeats its usage in every chunk, and the counts only grow.
func keepMax(n *int64, v []byte) {
	if m, ok := parseInt(v); ok && m > *n {
		*n = m
	}
}

// add adds the integer v holds to *n.
func add(n *int64, v []byte) {
	if m, ok := parseInt(v); ok {
		*n += m
	}
}

// setTrafficType keeps the traffic type v names, if it names one.
func (s *AnswerScanner) setTrafficType(v []byte) {
	if t := trafficType(v); t != "" {
		s.TrafficType = t
	}
}

// TrafficTypes are the values of usageMetadata.trafficType this build knows,
// so that reading one allocates nothing. A value it does not know is read too.
var TrafficTypes = [...]string{
	"PROVISIONED_THROUGHPUT", "ON_DEMAND", "ON_DEMAND_PRIORITY", "ON_DEMAND_FLEX", "TRAFFIC_TYPE_UNSPECIFIED",
}

// maxTrafficType bounds a traffic type the scanner does not know, which it
// reports as it is: a metric label must stay short.
const maxTrafficType = 64

// trafficType is the traffic type a JSON string value names; "" for a value
// that is not a short upper-case name.
func trafficType(v []byte) string {
	name := unquote(v)
	for _, t := range TrafficTypes {
		if string(name) == t {
			return t
		}
	}
	if len(name) == 0 || len(name) > maxTrafficType {
		return ""
	}
	for _, c := range name {
		if (c < 'A' || c > 'Z') && c != '_' && (c < '0' || c > '9') {
			return ""
		}
	}
	return string(name)
}

// BodyModel reads the "model" member of a request body that names its model
// (a chat completion; Anthropic's count_tokens), a JSON object, without
// decoding the rest: the body's top-level members are
// stepped over as bytes. It fails when the body is not an object, has no
// string "model", or has more than one: a router that read one model and a
// region that read another would route a call by a name it does not run.
func BodyModel(body []byte) (string, error) {
	model, n := membersNamed(body, "model")
	switch {
	case n == 0:
		return "", errors.New(`the request body has no "model"`)
	case n > 1:
		return "", errors.New(`the request body has more than one "model"`)
	}
	var name string
	if err := json.Unmarshal(model, &name); err != nil {
		return "", fmt.Errorf(`"model" is not a string: %s`, model)
	}
	return name, nil
}

// CachedContent reads the cached content a generateContent body names at
// its top level ("cachedContent", or "cached_content" as protojson also
// reads it) without decoding the rest, as BodyModel reads a model; "" when
// it names none, names it more than once, names it with a value that is not
// a string, or is not a JSON object: the region then answers the body as
// Google does. A member of that name deeper in the body, or text that
// mentions it, is not one.
func CachedContent(body []byte) string {
	var name string
	if json.Unmarshal(onlyMember(body, "cachedContent", "cached_content"), &name) != nil {
		return ""
	}
	return name
}

// ChatCachedContent reads the cached content a chat completion request body
// names where Vertex AI's OpenAI-compatible API reads Google's own fields:
// extra_body.google.cached_content (what the OpenAI SDKs send for
// extra_body={"extra_body": {"google": {...}}}), in either spelling as
// CachedContent reads it, stepping over everything else as bytes. "" when
// the path holds none, holds one of its members more than once, or its
// value is not a string.
func ChatCachedContent(body []byte) string {
	google := onlyMember(onlyMember(body, "extra_body"), "google")
	return CachedContent(google)
}

// onlyMember is the raw value of the member of the JSON object obj named
// one of names, when exactly one member is; nil otherwise (none, more than
// one, or obj is not an object).
func onlyMember(obj []byte, names ...string) []byte {
	raw, n := membersNamed(obj, names...)
	if n != 1 {
		return nil
	}
	return raw
}

// membersNamed counts the members of the JSON object obj named one of
// names, and returns the raw value of the last.
func membersNamed(obj []byte, names ...string) (raw []byte, n int) {
	members(obj, func(k, v []byte) {
		for _, name := range names {
			if string(k) == name {
				raw = v
				n++
			}
		}
	})
	return raw, n
}

// members calls fn with the raw key and value of each member of the JSON
// object obj, until obj ends or is malformed.
func members(obj []byte, fn func(key, value []byte)) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	i++
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] != '"' {
			return
		}
		end := endString(obj, i)
		if end < 0 {
			return
		}
		key := obj[i+1 : end]
		i = skipSpace(obj, end+1)
		if i >= len(obj) || obj[i] != ':' {
			return
		}
		i = skipSpace(obj, i+1)
		vend := endValue(obj, i)
		if vend < 0 {
			return
		}
		fn(key, obj[i:vend])
		i = skipSpace(obj, vend)
		if i >= len(obj) || obj[i] != ',' {
			return
		}
		i++
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// endString returns the index of the quote that closes the string opening at
// b[i], or -1.
func endString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j
		}
	}
	return -1
}

// endValue returns the index just past the JSON value starting at b[i], or -1.
func endValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		if e := endString(b, i); e >= 0 {
			return e + 1
		}
		return -1
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e := endString(b, j)
				if e < 0 {
					return -1
				}
				j = e
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\r' && b[j] != '\n' {
		j++
	}
	return j
}

// unquote strips the quotes of a JSON string value without decoding escapes;
// other values are returned as they are.
func unquote(v []byte) []byte {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return v[1 : len(v)-1]
	}
	return v
}

// parseInt reads a non-negative JSON integer, quoted or not (proto3 JSON
// writes 64-bit integers as strings).
func parseInt(v []byte) (int64, bool) {
	v = unquote(v)
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}
