package rlheader

import (
	"encoding/json"
	"errors"
)

// ProblemContentType is the media type of a Problem body (RFC 9457 §3).
const ProblemContentType = "application/problem+json"

// Problem types of draft-ietf-httpapi-ratelimit-headers-11 §5.
const (
	// TypeQuotaExceeded is for a request that exceeded a quota policy
	// (status 429).
	TypeQuotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	// TypeTemporaryReducedCapacity is for a server that lowered its quota
	// for a while (status 503).
	TypeTemporaryReducedCapacity = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
	// TypeAbnormalUsageDetected is for a server that sees abnormal usage
	// (status 429).
	TypeAbnormalUsageDetected = "https://iana.org/assignments/http-problem-types#abnormal-usage-detected"
	// TypeAboutBlank is the type a problem without "type" has (RFC 9457
	// §3.1.1).
	TypeAboutBlank = "about:blank"
)

// Problem is the application/problem+json body of a rejection: RFC 9457
// problem details with the draft's "violated-policies" extension member.
// The zero value marshals to {}.
type Problem struct {
	// Type is a URI reference identifying the problem type, e.g.
	// TypeQuotaExceeded. Omitted when "", which RFC 9457 reads as
	// TypeAboutBlank.
	Type string
	// Title is a short summary that does not change between occurrences,
	// e.g. "Quota Exceeded". Omitted when "".
	Title string
	// Status is the HTTP status code, which must equal the response's.
	// Omitted when 0.
	Status int
	// Detail explains this occurrence. Omitted when "".
	Detail string
	// ViolatedPolicies names the policies whose quota was exceeded, as in
	// RateLimit-Policy. Omitted when empty.
	ViolatedPolicies []string
}

// QuotaExceeded returns the draft's quota-exceeded problem (§5.1) for a
// response with the given status (normally 429) and violated policy names.
func QuotaExceeded(status int, violated ...string) Problem {
	return Problem{
		Type:             TypeQuotaExceeded,
		Title:            "Quota Exceeded",
		Status:           status,
		ViolatedPolicies: violated,
	}
}

// problemJSON fixes the member order: type, title, status, detail,
// violated-policies.
type problemJSON struct {
	Type             string   `json:"type,omitempty"`
	Title            string   `json:"title,omitempty"`
	Status           int      `json:"status,omitempty"`
	Detail           string   `json:"detail,omitempty"`
	ViolatedPolicies []string `json:"violated-policies,omitempty"`
}

// MarshalJSON implements json.Marshaler. Members come in the order type,
// title, status, detail, violated-policies, each omitted when empty, e.g.
//
//	{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota Exceeded","status":429,"violated-policies":["default"]}
func (p Problem) MarshalJSON() ([]byte, error) {
	return json.Marshal(problemJSON(p))
}

var errProblemNotObject = errors.New("rlheader: problem details are not a JSON object")

// UnmarshalJSON implements json.Unmarshaler with RFC 9457's consumer rules:
// unknown members are ignored, a member whose value has the wrong JSON type is
// ignored (§3.1), and an absent or ignored "type" becomes TypeAboutBlank.
// A "violated-policies" array holding anything but strings is ignored as a
// whole. It fails only when data is not a JSON object.
func (p *Problem) UnmarshalJSON(data []byte) error {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil || members == nil {
		return errProblemNotObject
	}
	*p = Problem{}
	if raw, ok := members["type"]; ok {
		_ = json.Unmarshal(raw, &p.Type) // a wrong type leaves "" and is ignored
	}
	if p.Type == "" {
		p.Type = TypeAboutBlank
	}
	if raw, ok := members["title"]; ok {
		_ = json.Unmarshal(raw, &p.Title)
	}
	if raw, ok := members["status"]; ok {
		var n int
		if json.Unmarshal(raw, &n) == nil {
			p.Status = n
		}
	}
	if raw, ok := members["detail"]; ok {
		_ = json.Unmarshal(raw, &p.Detail)
	}
	if raw, ok := members["violated-policies"]; ok {
		var vs []string
		if json.Unmarshal(raw, &vs) == nil {
			p.ViolatedPolicies = vs
		}
	}
	return nil
}
